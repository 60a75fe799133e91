"""What a recorded program holds where oidn-webgpu (the seeds) defines it, word by word."""

from __future__ import annotations

import pytest

from oidn_gpu.record import make_config, read_program
from oidn_gpu.record.api import record_denoise
from oidn_gpu.record.format import BufferUsage

# The recorder runs the wgpu executor on a recording device, so it needs wgpu (no GPU).
pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("hdr", [False, True])
def test_frame_and_tile_parameter_buffer_usages(tiny_tza, hdr):
    """oidn-webgpu's ``uniformBuffer`` (native/denoise.ts) makes the frame and every tile's
    parameters UNIFORM|COPY_DST (0x48). The frame buffer is that here; the tile parameter
    blocks are UNIFORM (0x40): they are mapped at creation and nothing writes them later
    (docs/program-format.md, oidn-gpu's extensions)."""
    program = read_program(
        record_denoise(tiny_tza["tiny_base_ic3"], make_config(16, 16, denoise=True, hdr=hdr))
    )
    frame = program.buffers[program.meta.frame_buffer]
    assert frame.usage == BufferUsage.UNIFORM | BufferUsage.COPY_DST == 0x48
    params = [b for b in program.buffers if "/params" in b.label]  # per layer and pass
    assert len(params) == 18 and all(b.usage == BufferUsage.UNIFORM == 0x40 for b in params)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_recordings_use_the_small_gpu_gemm_defaults_even_for_large_limits(tiny_tza, precision):
    """A config does not say whether its adapter is discrete, and the large-GPU GEMM
    defaults (tuned on a discrete NVIDIA H200) are for discrete GPUs only; an integrated GPU
    reports the same limits. So the recorder uses `GemmOptions()` (oidn-web's tile defaults,
    every fp16 product summed in f32) for every config: the image is the live small-GPU
    backend's (`accumulation=` chooses other sums: tests/record/test_program_sums.py)."""
    from oidn_gpu.kernels.gemm import LARGE_GPU_OPTIONS, GemmOptions
    from oidn_gpu.kernels.spec import Precision
    from oidn_gpu.record.api import record_network

    large = dict(
        max_compute_workgroup_storage_size=49152,
        max_compute_invocations_per_workgroup=1024,
        max_compute_workgroup_size_x=1024,
        max_compute_workgroup_size_y=1024,
    )
    config = make_config(16, 16, precision=precision, features=["shader-f16"], **large)
    program = read_program(record_network(tiny_tza["tiny_base_ic3"], config))
    gemms = [s.code for s in program.shaders if "conv_igemm" in s.code.splitlines()[0]]
    assert gemms and all(GemmOptions().describe() in code for code in gemms)
    assert not any(LARGE_GPU_OPTIONS[Precision(precision)].describe() in c for c in gemms)
