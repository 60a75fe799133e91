"""Autoexposure on the GPU: OIDN's input scale of an HDR colour image in two kernels.

The algorithm is `image.autoexposure`'s (OIDN ``core/autoexposure.h``; section 4.4 of
the OIDN semantics): bins of at most 16 x 16 pixels with bounds
``floor(i * H / bins_h)``, the average luminance ``0.212671 r + 0.715160 g +
0.072169 b`` of each bin's sanitized pixels (NaN -> 0, clamped to [0, FLT_MAX]),
and ``key / 2^mean(log2(average))`` over the bins brighter than ``eps``.

- `generate_bins` (`AutoexposureSpec`): one workgroup per bin, grid ``(bins_w,
  bins_h, 1)``; a halving tree sums the bin's 16 x 16 pixel luminances (0 outside
  the bin; pixel ``p = y * 16 + x``, at stride ``s`` from 128 down to 1, ``p += p +
  s``). Each of the 64 invocations takes the pixels ``p, p + 64, p + 128, p + 192``
  and does the strides 128 and 64 in registers, in the same order (``register_levels``
  sets how many levels; every value gives the same bits); the rest runs in workgroup
  memory (64 f32) and invocation 0 stores the average to ``bins[i * bins_w + j]``.
  The colour is read from ``color_image`` (``array<f32>``, or float16 pairs in
  ``array<u32>``) at any offset, pixel and row stride (elements), 1-3 channels
  broadcast as OIDN does. Params `BINS_PARAMS`.
- `generate_scale`: one workgroup of 256 invocations, grid ``(1, 1, 1)``. It sums
  the bins' ``log2`` values over the host's deterministic halving tree (TBB's
  ``parallel_deterministic_reduce`` on the bin grid, see `image.autoexposure`),
  completed with empty ranges to ``max(depth, 12)`` levels (adding an empty range's
  ``+0`` changes no sum). The complete tree splits into chunks of 2^12 leaves taken
  left to right: in a chunk, invocation ``t`` sums the 16-leaf subtree that the
  chunk's path and its 8 bits name in registers (unrolled, left + right), the 256
  sums combine pairwise in workgroup memory, and invocation 0 adds the chunk's sum
  into the tree above the chunks as a binary counter does (one pending left sum per
  level). The counts are integers, summed in any order. Every f32 addition is the
  host's, so only the bins' values (summed in another order within a bin) and
  ``log2``/``exp2`` differ from the host: the scale is within 1e-6 relative of
  `image.autoexposure.autoexposure`. It writes ``frame[0] = s`` and ``frame[1] =
  1 / s`` (0 when ``s == 0``): the denoise passes' frame uniform
  (`spec.FRAME_PARAMS`), bound here as storage. Params `SCALE_PARAMS`.
  ``generate_scale("stack")`` is the same sum with each invocation walking its
  depth-8 node's subtree with an explicit stack (slower where the stack spills to
  memory); both give the same bits.

Constants (bin size, key, eps, luminance weights) come from `image.autoexposure`.
Both kernels keep wgpu's bounds checks (not trusted); they are tiny.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import autoexposure as ae
from oidn_gpu.kernels import _common
from oidn_gpu.kernels.spec import BindingKind, Kernel, ParamField, ParamsLayout
from oidn_gpu.kernels.template import render

BIN = ae.MAX_BIN_SIZE  # one invocation per pixel of a bin: BIN x BIN per workgroup
# Levels of a bin's halving tree each invocation of the bins pass sums in registers: 4 pixels
# and 64 invocations per bin (6 workgroup levels instead of 8); the same bits at any value.
BINS_REGISTER_LEVELS = 2
SCALE_WG_SIZE = 256
SCALE_LEVELS = 8  # log2(SCALE_WG_SIZE): tree levels split among the invocations
SCALE_THREAD_LEVELS = 4  # tree levels each invocation sums in registers (16 leaves)
# The whole tree over at most 4096 x 4096 bins (65536 px per side, filter.MAX_IMAGE_DIM) is
# 12 + 12 levels deep: the explicit stack of "stack" holds its nodes plus the root, and
# "levels" keeps one pending sum per level above its chunks, plus the total.
SCALE_MAX_DEPTH = 24
SCALE_STACK = SCALE_MAX_DEPTH + 2
SCALE_VARIANTS = ("levels", "stack")
MAX_EXPONENT = 128.0  # 2^128 overflows float32: exp2f gives +inf and the scale 0
FLT_MAX = float(np.finfo(np.float32).max)
IMAGE_DTYPES = ("float32", "float16")

_IMAGE_FIELDS = ("offset", "pixel_stride", "row_stride", "channels")
BINS_PARAMS = ParamsLayout(
    tuple(ParamField(f"color_{f}") for f in _IMAGE_FIELDS)
    + tuple(ParamField(n) for n in ("height", "width", "bins_h", "bins_w"))
)
SCALE_PARAMS = ParamsLayout((ParamField("bins_h"), ParamField("bins_w")))


@dataclass(frozen=True)
class AutoexposureSpec:
    """The colour image's element type: ``"float32"`` or ``"float16"`` (read as u32 pairs)."""

    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.dtype not in IMAGE_DTYPES:
            raise InvalidArgumentError(
                f"unsupported autoexposure image dtype {self.dtype!r}; expected 'float32' "
                "or 'float16'"
            )

    def describe(self) -> str:
        return self.dtype


def bin_grid(height: int, width: int) -> tuple[int, int]:
    """``(bins_h, bins_w)``: OIDN's bin counts of a ``height x width`` image."""
    return -(-height // BIN), -(-width // BIN)


def image_binding_type(dtype: str) -> str:
    """The WGSL element type an image of ``dtype`` is bound as (float16 pairs in u32)."""
    return "u32" if dtype == "float16" else "f32"


def half_constants(dtypes: tuple[str, ...]) -> dict[str, object]:
    """The constants of ``image_read.wgsl``'s float16 widening, when an image is float16:
    the value of a subnormal half's mantissa unit (2^-24) and the exponent bias change
    from float16 (15) to float32 (127)."""
    if "float16" not in dtypes:
        return {}
    return {"HALF_SUBNORMAL_UNIT": 2.0**-24, "HALF_TO_F32_BIAS": 127 - 15}


def _strides(size: int) -> list[int]:
    """Halving tree strides over ``size`` (a power of two) lanes: size/2, ..., 1."""
    out = []
    stride = size // 2
    while stride >= 1:
        out.append(stride)
        stride //= 2
    return out


def _register_sum(levels: int, size: int) -> str:
    """The WGSL sum of ``p0 .. p(2^levels - 1)`` (pixel ``x + k * size / 2^levels``) that
    the halving tree over ``size`` lanes forms at lane ``x`` after its first ``levels``
    strides (size/2 first): ``V_s(a) = V_2s(a) + V_2s(a + s)``, ``V_size(a)`` the pixel."""
    lanes = size >> levels

    def value(stride: int, offset: int) -> str:
        if stride == size:
            return f"p{offset // lanes}"
        return f"({value(2 * stride, offset)} + {value(2 * stride, offset + stride)})"

    text = value(lanes, 0)
    return text[1:-1] if levels else text


def generate_bins(spec: AutoexposureSpec, register_levels: int = BINS_REGISTER_LEVELS) -> Kernel:
    """Per-bin average luminance (see module doc).

    ``register_levels`` (0-4): the first levels of each bin's halving tree that every
    invocation sums in registers (2^levels pixels each; BIN * BIN / 2^levels invocations per
    workgroup); every value gives the same bits.

    Bindings: ``color_image``, ``bins``, ``params``.
    """
    if not 0 <= register_levels <= 4:
        raise InvalidArgumentError(
            f"autoexposure bins register_levels is {register_levels}; expected 0 to 4"
        )
    key = f"autoexposure-bins[{spec.describe()},r{register_levels}]"
    wg_size = (BIN * BIN) >> register_levels
    bindings, decls = _common.make_bindings(
        [
            ("color_image", BindingKind.STORAGE_READ, image_binding_type(spec.dtype)),
            ("bins", BindingKind.STORAGE_READ_WRITE, "f32"),
            ("params", BindingKind.UNIFORM, ""),
        ]
    )
    consts: dict[str, object] = {
        "BIN": BIN,
        "WG_SIZE": wg_size,
        "FLT_MAX": FLT_MAX,
        "LUMINANCE_R": float(ae.LUMINANCE_R),
        "LUMINANCE_G": float(ae.LUMINANCE_G),
        "LUMINANCE_B": float(ae.LUMINANCE_B),
        **half_constants((spec.dtype,)),
    }
    source = render(
        "autoexposure_bins.wgsl",
        header=f"oidn_gpu.kernels.autoexposure.generate_bins {key}",
        consts=consts,
        params_struct=BINS_PARAMS.wgsl(),
        bindings=decls,
        transfer="linear",
        images=[{"name": "color", "buffer": "color_image", "f16": spec.dtype == "float16"}],
        any_f16=spec.dtype == "float16",
        pixel_steps=list(range(1 << register_levels)),
        rows_per_step=wg_size // BIN,
        register_sum=_register_sum(register_levels, BIN * BIN),
        strides=_strides(wg_size),
    )
    return Kernel(
        "autoexposure-bins",
        key,
        source,
        "main",
        (BIN, wg_size // BIN, 1),
        bindings,
        _bins_grid,
        workgroup_storage_bytes=4 * wg_size,
        params=BINS_PARAMS,
    )


def _bins_grid(channels: int, bins_h: int, bins_w: int) -> tuple[int, int, int]:
    return (bins_w, bins_h, 1)


def _single_group(channels: int, height: int, width: int) -> tuple[int, int, int]:
    return (1, 1, 1)


def generate_scale(variant: str = "levels", thread_levels: int = SCALE_THREAD_LEVELS) -> Kernel:
    """The scale from the bin averages (see module doc).

    ``variant``: ``"levels"`` (chunks of the tree combined level by level, the default) or
    ``"stack"`` (each invocation walks its subtree with an explicit stack); the same bits.
    ``thread_levels``: tree levels each invocation of ``"levels"`` sums in registers (1-6).

    Bindings: ``bins``, ``frame`` (storage), ``params``.
    """
    if variant not in SCALE_VARIANTS:
        raise InvalidArgumentError(
            f"unknown autoexposure scale variant {variant!r}; expected 'levels' or 'stack'"
        )
    if not 1 <= thread_levels <= 6:
        raise InvalidArgumentError(
            f"autoexposure scale thread_levels is {thread_levels}; expected 1 to 6"
        )
    if variant == "stack":
        key = "autoexposure-scale[f32,stack]"
    else:
        key = f"autoexposure-scale[f32,levels{thread_levels}]"
    bindings, decls = _common.make_bindings(
        [
            ("bins", BindingKind.STORAGE_READ, "f32"),
            ("frame", BindingKind.STORAGE_READ_WRITE, "f32"),
            ("params", BindingKind.UNIFORM, ""),
        ]
    )
    consts: dict[str, object] = {
        "WG_SIZE": SCALE_WG_SIZE,
        "LEVELS": SCALE_LEVELS,
        "KEY": float(ae.KEY),
        "EPS": float(ae.EPS),
        "MAX_EXPONENT": MAX_EXPONENT,
    }
    storage = 8 * SCALE_WG_SIZE
    if variant == "stack":
        consts["STACK"] = SCALE_STACK
    else:
        pending = SCALE_MAX_DEPTH - SCALE_LEVELS - thread_levels + 1
        consts["THREAD_LEVELS"] = thread_levels
        consts["PENDING"] = pending
        storage += 4 * pending
    source = render(
        "autoexposure_scale.wgsl" if variant == "levels" else "autoexposure_scale_stack.wgsl",
        header=f"oidn_gpu.kernels.autoexposure.generate_scale {key}",
        consts=consts,
        params_struct=SCALE_PARAMS.wgsl(),
        bindings=decls,
        strides=list(reversed(_strides(SCALE_WG_SIZE))),
        thread_levels=thread_levels,
        subtree_levels=list(range(1, thread_levels + 1)),
    )
    return Kernel(
        "autoexposure-scale",
        key,
        source,
        "main",
        (SCALE_WG_SIZE, 1, 1),
        bindings,
        _single_group,
        workgroup_storage_bytes=storage,
        params=SCALE_PARAMS,
    )
