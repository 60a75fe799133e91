"""Autoexposure: OIDN's automatic input scale for HDR images, bit-exact in float32.

OIDN (``core/autoexposure.h``, ``devices/cpu/cpu_autoexposure.{cpp,ispc}``) splits
the image into bins of at most 16 x 16 pixels, averages the luminance in each bin,
and returns ``key / 2^mean(log2(bin averages))`` over the bins brighter than
``eps``: the key value divided by the geometric mean luminance. See section 4.4 of
``shared/reference/oidn-semantics.md``.

The result depends on the order of float32 additions, which this module
reproduces exactly for OIDN's CPU device on AVX-512 (16 SIMD lanes):

* within a bin, lane ``k`` accumulates column ``beginW + k`` row by row (bins are
  at most 16 wide, so each lane owns one column); the 16 lanes are then summed in
  the order of ISPC's AVX-512 ``reduce_add`` (adjacent pairs twice, then the four
  partial sums as ``(g0 + g2) + (g1 + g3)``; see `_reduce_lanes`) and the total is
  divided by the pixel count;
* across bins, a deterministic recursive halving tree (TBB
  ``parallel_deterministic_reduce`` over a ``blocked_range2d`` with grain 1) adds
  ``(sum of log2, count)`` pairs, split on columns when the range has fewer rows
  than columns, else on rows;
* ``log2f``/``exp2f`` are the C library's, as in OIDN: called through ctypes
  from the platform's libm when it has them (glibc's are not always correctly
  rounded: about 0.03% of random arguments differ by one ULP from the exact
  result, which made ``s`` one ULP off OIDN's on 1 of ~140 random test images
  before this), else evaluated in float64 and rounded once to float32.

The luminance ``0.212671 r + 0.715160 g + 0.072169 b`` is computed as OIDN's ISPC
code compiles it, with FMA contraction: ``fma(0.072169, b, fma(0.212671, r,
0.715160 g))``, emulated exactly here. The lane order and the luminance contraction
were determined by matching OIDN 2.5.1's output bit for bit (``tests/unit/
test_autoexposure.py``); section 4.4 of the semantics document describes the lane
reduction as plain pairwise halving, which is 1 ULP off on some bin widths.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

import numpy as np

from oidn_gpu.errors import InvalidArgumentError

MAX_BIN_SIZE = 16  # AutoexposureParams::maxBinSize (OIDN core/autoexposure.h)
KEY = np.float32(0.18)  # AutoexposureParams::key: target geometric mean luminance
EPS = np.float32(1e-8)  # AutoexposureParams::eps: bins at or below this are skipped
SIMD_LANES = 16  # ISPC programCount on AVX-512 (OIDN's CPU device on this target)
FLT_MAX = np.float32(np.finfo(np.float32).max)

# Luminance weights (OIDN core/color.h, luminance()).
LUMINANCE_R = np.float32(0.212671)
LUMINANCE_G = np.float32(0.715160)
LUMINANCE_B = np.float32(0.072169)


_F32_MIN_NORMAL = 2.0**-126  # below this, float32 spacing is fixed (denormals)
_LOW_BITS_MASK = np.uint64((1 << 29) - 1)  # float64 mantissa bits dropped by float32
_HALFWAY_BITS = np.uint64(1 << 28)  # ...that put a float64 exactly between two float32


def _fma32(a: np.ndarray, b: np.float32, c: np.ndarray) -> np.ndarray:
    """float32 fused multiply-add ``a*b + c`` with a single rounding.

    The float64 product of two float32 values is exact, so only the float64 sum
    ``p + c`` rounds before the final rounding to float32. That double rounding
    can differ from one rounding only where the float64 sum lands exactly halfway
    between two float32 values (or in the float32 denormal range); those rare
    elements are redone with the exact residual of the float64 sum (TwoSum).
    """
    product = a.astype(np.float64) * np.float64(b)
    addend = c.astype(np.float64)
    total = product + addend
    rounded = total.astype(np.float32)
    suspect = (total.view(np.uint64) & _LOW_BITS_MASK) == _HALFWAY_BITS
    suspect |= np.abs(total) < _F32_MIN_NORMAL
    if np.any(suspect):
        idx = np.nonzero(suspect)
        rounded[idx] = _fma32_exact(product[idx], addend[idx], total[idx])
    return rounded


def _fma32_exact(product: np.ndarray, addend: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Round ``product + addend`` (float64, ``total`` their float64 sum) once to float32."""
    virtual = total - product
    residual = (product - (total - virtual)) + (addend - virtual)  # TwoSum: exact error
    rounded = total.astype(np.float32)
    diff = total - rounded.astype(np.float64)
    toward = np.where(diff > 0, np.inf, -np.inf).astype(np.float32)
    other = np.nextafter(rounded, toward)
    halfway = (diff != 0) & (np.abs(other.astype(np.float64) - total) == np.abs(diff))
    # At a halfway point the exact sum is nearer to `other` when the residual points
    # the same way as `other` does from `rounded`.
    fix = halfway & (np.sign(residual) == np.sign(diff))
    return np.where(fix, other, rounded)


def luminance(rgb: np.ndarray) -> np.ndarray:
    """Luminance of sanitized RGB values ``[..., 3]`` float32, as OIDN's CPU computes it."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return _fma32(b, LUMINANCE_B, _fma32(r, LUMINANCE_R, g * LUMINANCE_G))


def _sanitized_rgb(color: np.ndarray) -> np.ndarray:
    """Broadcast to RGB, map NaN to 0 and clamp to [0, FLT_MAX], in float32."""
    channels = color.shape[2]
    rgb = color.astype(np.float32, copy=True)
    if channels == 1:
        rgb = np.repeat(rgb, 3, axis=2)
    elif channels == 2:
        rgb = rgb[:, :, (0, 1, 1)]
    np.nan_to_num(rgb, copy=False, nan=0.0, posinf=FLT_MAX, neginf=0.0)
    np.clip(rgb, np.float32(0), FLT_MAX, out=rgb)
    return rgb


def _bin_bounds(size: int, count: int) -> np.ndarray:
    """Bin boundaries ``floor(i*size/count)`` for i = 0..count (integer division)."""
    return (np.arange(count + 1, dtype=np.int64) * size) // count


def _reduce_lanes(lanes: np.ndarray) -> np.ndarray:
    """Sum 16 lanes ``[..., 16]`` in the order of OIDN's ISPC ``reduce_add`` (AVX-512).

    Adjacent pairs first, twice (each 128-bit group of 4 lanes summed as
    ``(l0+l1) + (l2+l3)``), then the four group sums as ``(g0+g2) + (g1+g3)``.
    This order was found by matching OIDN 2.5.1's autoexposure bit for bit.
    """
    pairs = lanes[..., 0::2] + lanes[..., 1::2]  # [..., 8]
    groups = pairs[..., 0::2] + pairs[..., 1::2]  # [..., 4]
    halves = groups[..., 0:2] + groups[..., 2:4]  # [..., 2]
    return halves[..., 0] + halves[..., 1]


def _bin_averages(lum: np.ndarray) -> np.ndarray:
    """Average luminance per bin, ``[nbH, nbW]`` float32, in OIDN's addition order."""
    height, width = lum.shape
    nb_h = -(-height // MAX_BIN_SIZE)
    nb_w = -(-width // MAX_BIN_SIZE)
    rows = _bin_bounds(height, nb_h)
    cols = _bin_bounds(width, nb_w)
    bin_h = np.diff(rows)
    bin_w = np.diff(cols)

    # Lane sums: one lane per column of a bin, rows added in order. acc[i, w] is the
    # lane of column w in bin row i.
    acc = np.zeros((nb_h, width), dtype=np.float32)
    for r in range(int(bin_h.max())):
        active = bin_h > r
        src_rows = np.minimum(rows[:-1] + r, height - 1)
        contrib = np.where(active[:, None], lum[src_rows, :], np.float32(0))
        acc += contrib  # adding +0.0 to an inactive lane leaves it unchanged

    # Gather the 16 lanes of each bin, zeros for lanes past the bin width.
    lane = np.arange(SIMD_LANES)
    lane_cols = cols[:-1, None] + lane[None, :]  # [nbW, 16]
    lane_on = lane[None, :] < bin_w[:, None]
    lanes = acc[:, np.minimum(lane_cols, width - 1)]  # [nbH, nbW, 16]
    lanes = np.where(lane_on[None, :, :], lanes, np.float32(0))
    totals = _reduce_lanes(lanes)
    counts = (bin_h[:, None] * bin_w[None, :]).astype(np.float32)
    return totals / counts


@functools.lru_cache(maxsize=1)
def _libm() -> tuple[Callable[[float], float], Callable[[float], float]] | None:
    """The C library's float ``log2f``/``exp2f`` (what OIDN calls), or None if absent."""
    name = ctypes.util.find_library("m")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name)
        log2f, exp2f = lib.log2f, lib.exp2f
    except (OSError, AttributeError):
        return None
    for func in (log2f, exp2f):
        func.restype = ctypes.c_float
        func.argtypes = (ctypes.c_float,)
    return log2f, exp2f


def _log2_f32(x: np.ndarray) -> np.ndarray:
    """float32 log2 of every element: libm's ``log2f``, else float64 rounded once."""
    libm = _libm()
    if libm is None:
        return np.log2(x.astype(np.float64)).astype(np.float32)
    log2f = libm[0]
    return np.array([log2f(v) for v in x.ravel().tolist()], np.float32).reshape(x.shape)


def _exp2_f32(x: np.float32) -> np.float32:
    """float32 exp2: libm's ``exp2f``, else float64 rounded once."""
    libm = _libm()
    if libm is None:
        with np.errstate(over="ignore"):
            return np.float32(np.exp2(np.float64(x)))
    return np.float32(libm[1](float(x)))


def _tree_reduce(logs: np.ndarray, valid: np.ndarray) -> tuple[np.float32, int]:
    """Sum the per-bin ``log2`` values over the deterministic halving tree.

    A range with fewer rows than columns splits its columns at ``c0 + ncols // 2``,
    otherwise its rows at ``r0 + nrows // 2``; leaves are single bins and partial
    sums are combined as ``left + right`` in float32.
    """
    values = np.where(valid, logs, np.float32(0)).astype(np.float32)
    counts = valid.astype(np.int64)

    def reduce(r0: int, r1: int, c0: int, c1: int) -> tuple[np.float32, int]:
        nrows, ncols = r1 - r0, c1 - c0
        if nrows == 1 and ncols == 1:
            return values[r0, c0], int(counts[r0, c0])
        if nrows < ncols:
            mid = c0 + ncols // 2
            left = reduce(r0, r1, c0, mid)
            right = reduce(r0, r1, mid, c1)
        else:
            mid = r0 + nrows // 2
            left = reduce(r0, mid, c0, c1)
            right = reduce(mid, r1, c0, c1)
        return left[0] + right[0], left[1] + right[1]

    return reduce(0, values.shape[0], 0, values.shape[1])


def autoexposure(color: np.ndarray) -> float:
    """Compute OIDN's autoexposure input scale for an HDR colour image.

    Args:
        color: ``[H, W]`` or ``[H, W, C]`` with C in 1..3 (a 4th alpha channel must be
            stripped by the caller), float16 or float32. 2-channel images are read as
            (c0, c1, c1), 1-channel as grey.

    Returns:
        The scale ``s`` (a float32 value as a Python float); 1.0 when no bin has a mean
        luminance above 1e-8 or the image is empty.

    Raises:
        InvalidArgumentError: for a wrong shape or dtype.
    """
    arr = np.asarray(color)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or not 1 <= arr.shape[2] <= 3:
        raise InvalidArgumentError(
            f"autoexposure image has shape {arr.shape}; expected (H, W) or (H, W, 1..3)"
        )
    if arr.dtype not in (np.float16, np.float32):
        raise InvalidArgumentError(
            f"autoexposure image has dtype {arr.dtype}; expected float16 or float32"
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        return 1.0
    # Near-FLT_MAX inputs overflow the float32 sums to +inf, as they do in OIDN
    # (the scale then becomes 0).
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        lum = luminance(_sanitized_rgb(arr))
        averages = _bin_averages(lum)
        valid = averages > EPS
        logs = _log2_f32(np.where(valid, averages, np.float32(1)))
        total, count = _tree_reduce(logs, valid)
        if count == 0:
            return 1.0
        mean = np.float32(total / np.float32(count))
        return float(KEY / _exp2_f32(mean))
