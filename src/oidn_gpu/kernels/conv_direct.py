"""Direct 3x3 convolution: one invocation per output pixel and output vec4 block.

Algorithm: invocation ``(x, y, ob)`` (``global_invocation_id``) starts from
``bias[ob]`` and, for each of the 9 taps inside the tensor (taps outside are
skipped: zero padding 1), for each input block of each source, adds one input
vec4 times 4 weight vec4s (`WeightLayout.OUTPUT_MAJOR`). fp32: FMAs into the
f32 accumulator. fp16 with ``f32_sum`` (the accumulation ``f32``, the default of
every device's GEMM options for the convs this kernel runs): the f16 operands
widened, FMAs into the f32 accumulator. fp16 without it (any f16 accumulation;
oidn-web's direct kernel always sums so): the 4 products of one input vec4 are
summed in an f16 partial, folded into the f32 accumulator. Then ReLU (optional)
and the store (``vec4<f16>`` saturated to +-65504, or ``vec4<f32>``).

Fusions (all in this one kernel):

- decoder: several sources concatenated along channels; an upsampled source is
  read at ``(y / 2, x / 2)`` with width ``W / 2`` (the conv resolution is even);
- pool: each invocation computes the 2x2 conv outputs of its pooled pixel and
  keeps the max after the activation (the output is ``[O, H/2, W/2]``).

Shapes: sources ``[C_i, H, W]`` (``[C_i, H/2, W/2]`` when upsampled), output
``[O, H, W]`` (``[O, H/2, W/2]`` with pool), all blocked HWC.

Bindings: ``input0..input{N-1}`` (read), ``weights`` (read, output-major),
``bias`` (read, ``vec4<f32>``), ``output`` (read_write), ``params``
(uniform ``{height, width}``: the OUTPUT spatial size).
Grid: ``(ceil(W_out / 8), ceil(H_out / 8), OB)``; workgroup 8x8x1.
Shared memory: none. Limits: none beyond OB <= max workgroups per dimension.

Trusted: every load is guarded by the tap test and every store by the early
return, so indices stay in range when buffers have the planned sizes.
"""

from __future__ import annotations

from oidn_gpu.kernels import _common
from oidn_gpu.kernels.spec import SHAPE_PARAMS, ConvSpec, Kernel, WeightLayout
from oidn_gpu.kernels.template import render

WG_X = 8
WG_Y = 8
FAMILY = "conv-direct"


def generate(spec: ConvSpec, f32_sum: bool = False) -> Kernel:
    """Generate the direct conv kernel for ``spec`` (any sources, pool, precision);
    ``f32_sum``: fp16 products summed in f32 rather than in 4-term f16 partials."""
    layout = WeightLayout.OUTPUT_MAJOR
    bindings, decls = _common.conv_bindings(spec)
    consts = {
        "WG_X": WG_X,
        "WG_Y": WG_Y,
        "IN_BLOCKS": spec.in_blocks,
        "OUT_BLOCKS": spec.out_blocks,
        **_common.source_consts(spec),
    }
    key = _common.conv_key(FAMILY, spec, " ".join(_common.f32_sum_key(spec, f32_sum)))
    source = render(
        "conv_direct.wgsl",
        header=f"oidn_gpu.kernels.conv_direct {key}",
        consts=consts,
        enables=_common.enables_for(spec.precision, spec.out_precision),
        bindings=decls,
        **_common.conv_common_context(spec, layout, f32_sum),
    )
    grid = _common.pixel_grid(WG_X, WG_Y, spec.out_blocks)
    return Kernel(
        name=FAMILY,
        key=key,
        source=source,
        entry_point="main",
        workgroup_size=(WG_X, WG_Y, 1),
        bindings=bindings,
        grid=grid,
        trusted=True,
        features=_common.enables_for(spec.precision, spec.out_precision),
        workgroup_storage_bytes=0,
        params=SHAPE_PARAMS,
        weight_layout=layout,
        precision=spec.precision,
    )
