"""Spatial conv: each 8x8 workgroup loads its input halo patch (all input blocks) once.

Invocation ``(lx, ly)`` of workgroup ``(wx, wy, ob)`` computes output pixel
``(8 P wx + lx + 8 p, 8 wy + ly)`` of output block ``ob`` for ``p < P``
(``pixels``: 1, 2 or 4, along x): for each of its pixels, bias, then 9 taps x IB
blocks read from the workgroup patch, accumulated as in `conv_direct` (fp16: in f32
with ``f32_sum``, else a 4-term f16 partial per input vec4, folded into f32). With
several pixels, the 4 weight vec4s of one (tap, input block) are loaded once and feed
every pixel; each pixel keeps its own accumulator and its summation order, so the bits
do not depend on ``pixels``. Decoder sources (upsampled or not) are gathered while the patch is
filled. With ``cache_weights`` the output block's ``9 * IB * 4`` weight vec4s are
staged in workgroup memory too (used by `final_rgb`).

Shared memory: the ``(8 P + 2) x 10`` patch of ``IB`` vec4s per pixel (`PatchLayout`),
dense, or with ``padded`` at an odd pixel stride (``IB + 1`` when ``IB`` is even), so the
8 invocations of a workgroup row read 8 different banks, and in fp16 at a row stride of
8 modulo 16 vec4s, so the next row reads the other 8 (see `patch_layout`); + ``36 * IB``
vec4s with cached weights. `generate` refuses a patch over `gemm_tile.MAX_TILE_STORAGE_BYTES` (and
over ``limits`` when given); callers choose a variant that fits (`storage_bytes`,
`max_input_blocks`). No fused pool. Weights: output-major. Grid
``(ceil(W / (8 P)), ceil(H / 8), OB)``; params ``{height, width}`` (output = conv
resolution). Trusted: patch loads are guarded by the tensor bounds, patch and cache
indices are bounded by their loop limits (a pixel past the right edge still reads
inside the patch, whose last column is ``8 P + 1``), and every store follows the early
bounds return (after the barrier) and, for pixels after the first, its own x test.
"""

from __future__ import annotations

from dataclasses import dataclass

from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError
from oidn_gpu.kernels import _common
from oidn_gpu.kernels.gemm import FINAL_PIXELS
from oidn_gpu.kernels.gemm_tile import MAX_TILE_STORAGE_BYTES
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


# Workgroup memory on NVIDIA GPUs: 32 banks of 4 bytes (CUDA C++ Programming Guide, "Shared
# Memory" of compute capability 5.x and later), i.e. 16 vec4<f16> elements; a warp's 8-byte
# loads are served in two halves of 16 invocations, two rows of an 8-wide workgroup.
BANK_VEC4_F16 = 16
HALF_BANKS_VEC4_F16 = BANK_VEC4_F16 // 2


@dataclass(frozen=True)
class PatchLayout:
    """Where the patch keeps pixel ``(row, col)``'s block ``ib``:
    ``row * row_stride + col * pixel_stride + ib`` (vec4 elements)."""

    width: int  # patch pixels per row, 8 P + 2
    in_blocks: int
    pixel_stride: int
    row_stride: int

    @property
    def size(self) -> int:
        """vec4 elements the patch array holds (the last row's padding included)."""
        return PATCH * self.row_stride

    @property
    def dense(self) -> bool:
        return (self.pixel_stride, self.row_stride) == (
            self.in_blocks,
            self.width * self.in_blocks,
        )


def patch_layout(spec: ConvSpec, pixels: int = 1, padded: bool = False) -> PatchLayout:
    """The patch of ``pixels`` per invocation, dense or ``padded``.

    Padded: the pixel stride is odd (``IB + 1`` when ``IB`` is even), so 8 neighbouring
    pixels fall in 8 different bank groups; in fp16 the row stride is also 8 modulo 16
    elements, so the second row of a half-warp falls in the other 8 (for an odd pixel
    stride s, ``{s j mod 16, j < 8}`` and that set plus 8 are complements).
    """
    width = WG * pixels + 2
    stride = spec.in_blocks + 1 if padded and spec.in_blocks % 2 == 0 else spec.in_blocks
    row = width * stride
    if padded and spec.precision is Precision.FP16:
        row += (HALF_BANKS_VEC4_F16 - row) % BANK_VEC4_F16
    return PatchLayout(width, spec.in_blocks, stride, row)


def storage_bytes(
    spec: ConvSpec, cache_weights: bool = False, pixels: int = 1, padded: bool = False
) -> int:
    """Workgroup memory the kernel declares for ``spec``."""
    vec = 4 * spec.precision.itemsize
    patch = patch_layout(spec, pixels, padded).size * vec
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


def _checked_storage(
    spec: ConvSpec, cache_weights: bool, pixels: int, padded: bool, limits: DeviceLimits | None
) -> int:
    """The kernel's workgroup storage in bytes, after checking ``generate``'s arguments."""
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
            f"workgroup storage > max {cap}; "
            + ("use fewer pixels per invocation" if pixels > 1 else "use the direct conv")
        )
    return need


def _consts(
    spec: ConvSpec, patch: PatchLayout, pixels: int, wide: bool, cache_weights: bool
) -> dict[str, object]:
    """The WGSL constants; the one-pixel dense patch keeps the original ones."""
    return {
        "WG": WG,
        "PATCH": PATCH,
        "THREADS": WG * WG,
        "IN_BLOCKS": spec.in_blocks,
        "OUT_BLOCKS": spec.out_blocks,
        "PATCH_SIZE": patch.size,
        **(
            {
                "PIXELS": pixels,
                "TILE_W": WG * pixels,
                "PATCH_W": patch.width,
                "PIXEL_STRIDE": patch.pixel_stride,
                "ROW_STRIDE": patch.row_stride,
                "PATCH_ELEMENTS": patch.width * PATCH * spec.in_blocks,
            }
            if wide
            else {}
        ),
        **({"WEIGHT_CACHE_SIZE": 9 * spec.in_blocks * 4} if cache_weights else {}),
        **_common.source_consts(spec),
    }


def generate(
    spec: ConvSpec,
    cache_weights: bool = False,
    family: str = FAMILY,
    *,
    pixels: int = 1,
    padded: bool = False,
    limits: DeviceLimits | None = None,
    f32_sum: bool = False,
) -> Kernel:
    """Generate the spatial (halo patch) conv for ``spec`` (no fused pool).

    Args:
        spec: the conv.
        cache_weights: stage the output block's weights in workgroup memory too.
        family: the kernel's family name (`final_rgb` passes its own).
        pixels: output pixels per invocation (1, 2 or 4), ``WG`` apart along x.
        padded: spread the patch over the banks (`patch_layout`).
        limits: the device; its workgroup storage bounds the patch.
        f32_sum: sum fp16 products in f32 rather than in 4-term f16 partials.

    Raises:
        InvalidArgumentError: a fused pool, or ``pixels`` not 1, 2 or 4.
        UnsupportedDeviceError: the workgroup memory exceeds the device's, or 48 KiB.
    """
    need = _checked_storage(spec, cache_weights, pixels, padded, limits)
    layout = WeightLayout.OUTPUT_MAJOR
    bindings, decls = _common.conv_bindings(spec)
    patch = patch_layout(spec, pixels, padded)
    # The one-pixel dense patch keeps the original constants and text; a wide or padded
    # patch names its width, strides and element count.
    wide = pixels > 1 or not patch.dense
    consts = _consts(spec, patch, pixels, wide, cache_weights)
    extra = ["weights=shared"] if cache_weights else []
    extra += [f"pixels={pixels}"] if pixels > 1 else []
    extra += [] if patch.dense else ["patch=padded"]
    extra += _common.f32_sum_key(spec, f32_sum)
    key = _common.conv_key(family, spec, " ".join(extra))
    context = _common.conv_common_context(spec, layout, f32_sum)
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
        padded=not patch.dense,
        pixels=[
            {
                "acc": f"acc{p}",
                "patch_index": f"pb + {WG * p * patch.pixel_stride}u + ib" if p else "pb + ib",
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
    "PatchLayout",
    "Precision",
    "generate",
    "max_input_blocks",
    "patch_layout",
    "storage_bytes",
    "storage_cap",
]
