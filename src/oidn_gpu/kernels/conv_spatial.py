"""Spatial conv: each 8x8 workgroup loads its input halo patch (all input blocks) once.

Invocation ``(lx, ly)`` of workgroup ``(wx, wy, ob)`` computes output pixel
``(8 P wx + lx + 8 p, 8 wy + ly)`` of output block ``ob`` for ``p < P``
(``pixels``: 1, 2 or 4, along x): for each of its pixels, bias, then 9 taps x IB
blocks read from the workgroup patch, accumulated as in `conv_direct` (fp16: 4-term
f16 partial per input vec4, folded into f32). With several pixels, the 4 weight
vec4s of one (tap, input block) are loaded once and feed every pixel; each pixel
keeps its own accumulator and its summation order, so the bits do not depend on
``pixels``. Decoder sources (upsampled or not) are gathered while the patch is
filled. With ``cache_weights`` the output block's ``9 * IB * 4`` weight vec4s are
staged in workgroup memory too (used by `final_rgb`).

Shared memory: the ``(8 P + 2) x 10`` patch of ``IB`` vec4s per pixel, at a pixel
stride of ``IB`` vec4s, or with ``padded`` of ``IB + 1`` when ``IB`` is even (an odd
stride puts neighbouring pixels' blocks in different banks); + ``36 * IB`` vec4s with
cached weights. `generate` refuses a patch over `gemm.MAX_TILE_STORAGE_BYTES` (and
over ``limits`` when given); callers choose a variant that fits (`storage_bytes`,
`max_input_blocks`). No fused pool. Weights: output-major. Grid
``(ceil(W / (8 P)), ceil(H / 8), OB)``; params ``{height, width}`` (output = conv
resolution). Trusted: patch loads are guarded by the tensor bounds, patch and cache
indices are bounded by their loop limits (a pixel past the right edge still reads
inside the patch, whose last column is ``8 P + 1``), and every store follows the early
bounds return (after the barrier) and, for pixels after the first, its own x test.
"""

from __future__ import annotations

from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError
from oidn_gpu.kernels import _common
from oidn_gpu.kernels.gemm import FINAL_PIXELS, MAX_TILE_STORAGE_BYTES
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


def pixel_stride(in_blocks: int, padded: bool = False) -> int:
    """vec4s from one patch pixel to the next: ``IB``, or with ``padded`` the next odd count."""
    return in_blocks + 1 if padded and in_blocks % 2 == 0 else in_blocks


def storage_bytes(
    spec: ConvSpec, cache_weights: bool = False, pixels: int = 1, padded: bool = False
) -> int:
    """Workgroup memory the kernel declares for ``spec``."""
    vec = 4 * spec.precision.itemsize
    patch = (WG * pixels + 2) * PATCH * pixel_stride(spec.in_blocks, padded) * vec
    cache = 9 * spec.in_blocks * 4 * vec if cache_weights else 0
    return patch + cache


def storage_cap(limits: DeviceLimits | None) -> int:
    """The most workgroup memory a spatial kernel may declare on a device with ``limits``."""
    if limits is None:
        return MAX_TILE_STORAGE_BYTES
    return min(limits.max_workgroup_storage_bytes, MAX_TILE_STORAGE_BYTES)


def max_input_blocks(precision: Precision, limits: DeviceLimits) -> int:
    """The most input blocks whose halo patch fits ``limits`` (0: the 8x8 workgroup does not)."""
    if (
        limits.max_workgroup_size_x < WG
        or limits.max_workgroup_size_y < WG
        or limits.max_invocations_per_workgroup < WG * WG
    ):
        return 0
    return storage_cap(limits) // (PATCH * PATCH * 4 * precision.itemsize)


def generate(
    spec: ConvSpec,
    cache_weights: bool = False,
    family: str = FAMILY,
    *,
    pixels: int = 1,
    padded: bool = False,
    limits: DeviceLimits | None = None,
) -> Kernel:
    """Generate the spatial (halo patch) conv for ``spec`` (no fused pool).

    Args:
        spec: the conv.
        cache_weights: stage the output block's weights in workgroup memory too.
        family: the kernel's family name (`final_rgb` passes its own).
        pixels: output pixels per invocation (1, 2 or 4), ``WG`` apart along x.
        padded: an odd pixel stride in the patch (see module doc).
        limits: the device; its workgroup storage bounds the patch.

    Raises:
        InvalidArgumentError: a fused pool, or ``pixels`` not 1, 2 or 4.
        UnsupportedDeviceError: the workgroup memory exceeds the device's, or 48 KiB.
    """
    if spec.pool:
        raise InvalidArgumentError(
            "the spatial conv has no fused pool; use conv_direct or conv_igemm"
        )
    if isinstance(pixels, bool) or pixels not in FINAL_PIXELS:
        raise InvalidArgumentError(
            f"invalid pixels per invocation {pixels!r}; allowed values: "
            f"{', '.join(map(str, FINAL_PIXELS))}"
        )
    need = storage_bytes(spec, cache_weights, pixels, padded)
    cap = storage_cap(limits)
    if need > cap:
        raise UnsupportedDeviceError(
            f"the spatial conv's {WG * pixels + 2}x{PATCH} patch of {spec.in_blocks} input "
            f"blocks{' and its cached weights' if cache_weights else ''} need {need} bytes of "
            f"workgroup storage > max {cap}; use fewer pixels per invocation"
        )
    layout = WeightLayout.OUTPUT_MAJOR
    bindings, decls = _common.conv_bindings(spec)
    stride = pixel_stride(spec.in_blocks, padded)
    # The original one-pixel, dense-patch kernel keeps its constants and text; the wide or
    # padded patch names its width, stride and element count.
    wide = pixels > 1 or stride != spec.in_blocks
    patch_w = WG * pixels + 2
    consts = {
        "WG": WG,
        "PATCH": PATCH,
        "THREADS": WG * WG,
        "IN_BLOCKS": spec.in_blocks,
        "OUT_BLOCKS": spec.out_blocks,
        "PATCH_SIZE": patch_w * PATCH * stride,
        **(
            {
                "PIXELS": pixels,
                "TILE_W": WG * pixels,
                "PATCH_W": patch_w,
                "PIXEL_STRIDE": stride,
                "PATCH_ELEMENTS": patch_w * PATCH * spec.in_blocks,
            }
            if wide
            else {}
        ),
        **({"WEIGHT_CACHE_SIZE": 9 * spec.in_blocks * 4} if cache_weights else {}),
        **_common.source_consts(spec),
    }
    extra = ["weights=shared"] if cache_weights else []
    extra += [f"pixels={pixels}"] if pixels > 1 else []
    extra += ["patch=padded"] if stride != spec.in_blocks else []
    key = _common.conv_key(family, spec, " ".join(extra))
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
        wide=wide,
        padded=stride != spec.in_blocks,
        pixels=[
            {
                "acc": f"acc{p}",
                "patch_index": f"pb + {WG * p * stride}u + ib" if p else "pb + ib",
                "dx": WG * p,
                "first": p == 0,
            }
            for p in range(pixels)
        ],
        **context,
    )
    grid = _common.pixel_grid(WG * pixels, WG, spec.out_blocks)
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
        workgroup_storage_bytes=need,
        params=SHAPE_PARAMS,
        weight_layout=layout,
        precision=spec.precision,
    )


__all__ = [
    "FAMILY",
    "Precision",
    "generate",
    "max_input_blocks",
    "pixel_stride",
    "storage_bytes",
    "storage_cap",
]
