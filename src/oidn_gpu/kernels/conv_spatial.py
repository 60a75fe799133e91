"""Spatial conv: each 8x8 workgroup loads its 10x10 input halo (all input blocks) once.

Invocation ``(lx, ly)`` of workgroup ``(wx, wy, ob)`` computes output pixel
``(8 wx + lx, 8 wy + ly)`` of output block ``ob``: bias, then 9 taps x IB blocks
read from the workgroup patch, accumulated as in `conv_direct` (fp16: 4-term
f16 partial per input vec4, folded into f32). Decoder sources (upsampled or
not) are gathered while the patch is filled. With ``cache_weights`` the
output block's ``9 * IB * 4`` weight vec4s are staged in workgroup memory too
(used by `final_rgb`).

Shared memory: ``100 * IB`` vec4s (+ ``36 * IB`` with cached weights); the
kernel is only valid when that fits the device (`storage_bytes`,
`max_input_blocks`). No fused
pool. Weights: output-major. Grid ``(ceil(W/8), ceil(H/8), OB)``; params
``{height, width}`` (output = conv resolution). Trusted: patch loads are
guarded by the tensor bounds, patch and cache indices are bounded by their
loop limits, and the store follows the early bounds return (after the barrier).
"""

from __future__ import annotations

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels import _common
from oidn_gpu.kernels.spec import (
    SHAPE_PARAMS,
    ConvSpec,
    DeviceLimits,
    Kernel,
    Precision,
    WeightLayout,
)
from oidn_gpu.kernels.template import render

WG = 8
PATCH = WG + 2
FAMILY = "conv-spatial"


def storage_bytes(spec: ConvSpec, cache_weights: bool = False) -> int:
    """Workgroup memory the kernel declares for ``spec``."""
    vec = 4 * spec.precision.itemsize
    patch = PATCH * PATCH * spec.in_blocks * vec
    cache = 9 * spec.in_blocks * 4 * vec if cache_weights else 0
    return patch + cache


def max_input_blocks(precision: Precision, limits: DeviceLimits) -> int:
    """The most input blocks whose halo patch fits ``limits`` (0: the 8x8 workgroup does not)."""
    if (
        limits.max_workgroup_size_x < WG
        or limits.max_workgroup_size_y < WG
        or limits.max_invocations_per_workgroup < WG * WG
    ):
        return 0
    return limits.max_workgroup_storage_bytes // (PATCH * PATCH * 4 * precision.itemsize)


def generate(spec: ConvSpec, cache_weights: bool = False, family: str = FAMILY) -> Kernel:
    """Generate the spatial (halo patch) conv for ``spec`` (no fused pool)."""
    if spec.pool:
        raise InvalidArgumentError(
            "the spatial conv has no fused pool; use conv_direct or conv_igemm"
        )
    layout = WeightLayout.OUTPUT_MAJOR
    bindings, decls = _common.conv_bindings(spec)
    consts = {
        "WG": WG,
        "PATCH": PATCH,
        "THREADS": WG * WG,
        "IN_BLOCKS": spec.in_blocks,
        "OUT_BLOCKS": spec.out_blocks,
        "PATCH_SIZE": PATCH * PATCH * spec.in_blocks,
        **({"WEIGHT_CACHE_SIZE": 9 * spec.in_blocks * 4} if cache_weights else {}),
        **_common.source_consts(spec),
    }
    key = _common.conv_key(family, spec, "weights=shared" if cache_weights else "")
    context = _common.conv_common_context(spec, layout)
    if cache_weights:
        context["weight_array"] = "weight_cache"
    enables = _common.enables_for(spec.precision, spec.out_precision)
    source = render(
        "conv_spatial.wgsl",
        header=f"oidn_gpu.kernels.{'final_rgb' if family != FAMILY else 'conv_spatial'} {key}",
        consts=consts,
        enables=enables,
        bindings=decls,
        cache_weights=cache_weights,
        **context,
    )
    grid = _common.pixel_grid(WG, WG, spec.out_blocks)
    return Kernel(
        family,
        key,
        source,
        "main",
        (WG, WG, 1),
        bindings,
        grid,
        trusted=True,
        features=enables,
        workgroup_storage_bytes=storage_bytes(spec, cache_weights),
        params=SHAPE_PARAMS,
        weight_layout=layout,
        precision=spec.precision,
    )


__all__ = ["FAMILY", "Precision", "generate", "max_input_blocks", "storage_bytes"]
