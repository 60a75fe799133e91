"""Hand-built programs for the record tests (no GPU needed to build them)."""

from __future__ import annotations

import struct

from oidn_gpu.record.format import (
    BindGroupDesc,
    BindingDesc,
    BufferDesc,
    BufferUsage,
    Copy,
    Dispatch,
    KernelBit,
    MetaPrecision,
    PipelineDesc,
    Program,
    ProgramMeta,
    ShaderDesc,
    Submit,
    Write,
)

N = 64  # floats in the doubling program's input and output
SCRATCH = (7.0, -1.5, 0.25, 1e30)  # written to the scratch buffer, copied over output[0:4]

DOUBLE_WGSL = """// tests.record.programs double[n=64]
struct Params { count: u32, pad0: u32, pad1: u32, pad2: u32, }
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
  if (id.x < params.count) {
    dst[id.x] = src[id.x] * 2.0;
  }
}
"""

STORAGE = int(BufferUsage.STORAGE)
COPY_SRC = int(BufferUsage.COPY_SRC)
COPY_DST = int(BufferUsage.COPY_DST)
UNIFORM = int(BufferUsage.UNIFORM)


def doubling_program(*, meta: bool = True) -> Program:
    """``output = 2 * input``, then ``output[0:4] = SCRATCH`` via a queue write and a copy.

    Buffers: 0 input, 1 output, 2 params (initial data), 3 scratch.
    """
    return Program(
        inputs=(0,),
        output=1,
        output_external=True,
        output_width=4,
        output_height=4,
        output_channels=4,
        buffers=(
            BufferDesc(N * 4, STORAGE | COPY_DST, b"", "test/input"),
            BufferDesc(N * 4, STORAGE | COPY_SRC | COPY_DST, b"", "test/output"),
            BufferDesc(16, UNIFORM, struct.pack("<4I", N, 0, 0, 0), "test/params"),
            BufferDesc(16, COPY_SRC | COPY_DST, b"", "test/scratch"),
        ),
        shaders=(ShaderDesc(DOUBLE_WGSL),),
        pipelines=(PipelineDesc(0, "main"),),
        bind_groups=(
            BindGroupDesc(0, 0, (BindingDesc(0, 0), BindingDesc(1, 1), BindingDesc(2, 2, 0, 16))),
        ),
        operations=(
            Write(3, 0, struct.pack("<4f", *SCRATCH)),
            Submit((Dispatch(0, 0, 1, 1, 1), Copy(3, 0, 1, 0, 16))),
        ),
        meta=ProgramMeta(MetaPrecision.FP32, 0, int(KernelBit.OTHER), None, (2,)) if meta else None,
    )
