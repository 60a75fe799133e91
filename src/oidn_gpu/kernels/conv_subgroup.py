"""Subgroup-broadcast direct conv: the direct kernel with weights read once per subgroup.

Invocation ``(x, y, ob)`` computes one output pixel of one output block, as in
`conv_direct`, but all invocations of a workgroup share ``ob`` (``gid.z``), so
each weight vec4 is read through ``subgroupBroadcast(weights[i], 0u)``: one
load per subgroup instead of one per lane. Broadcasts need every lane, so
there is no early return: taps outside the tensor read a clamped pixel and
select zero, and only the store is guarded. Decoder sources are supported; a
fused pool is not (use `conv_direct`).

Needs the device feature ``subgroup`` (``Kernel.features`` lists
``subgroups``; naga takes subgroup builtins without an ``enable``). Workgroup
8x8x1, grid ``(ceil(W/8), ceil(H/8), OB)``, no shared memory, weights
output-major, bindings and params as every conv. Trusted: clamped pixel
indices are in range for any H, W >= 1.
"""

from __future__ import annotations

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels import _common
from oidn_gpu.kernels.spec import SHAPE_PARAMS, ConvSpec, Kernel, WeightLayout
from oidn_gpu.kernels.template import render

WG_X = 8
WG_Y = 8
FAMILY = "conv-subgroup"


def generate(spec: ConvSpec, f32_sum: bool = False) -> Kernel:
    """Generate the subgroup-broadcast conv for ``spec`` (no fused pool); ``f32_sum``: fp16
    products summed in f32."""
    if spec.pool:
        raise InvalidArgumentError("the subgroup conv has no fused pool; use conv_direct")
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
    context = _common.conv_common_context(spec, layout, f32_sum)
    context["subgroup_weights"] = True
    enables = _common.enables_for(spec.precision, spec.out_precision)
    source = render(
        "conv_subgroup.wgsl",
        header=f"oidn_gpu.kernels.conv_subgroup {key}",
        consts=consts,
        enables=enables,
        bindings=decls,
        **context,
    )
    grid = _common.pixel_grid(WG_X, WG_Y, spec.out_blocks)
    return Kernel(
        FAMILY,
        key,
        source,
        "main",
        (WG_X, WG_Y, 1),
        bindings,
        grid,
        trusted=True,
        features=(*enables, "subgroups"),
        params=SHAPE_PARAMS,
        weight_layout=layout,
        precision=spec.precision,
    )
