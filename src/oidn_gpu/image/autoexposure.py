"""Autoexposure: OIDN's automatic input scale for HDR images, bit-exact in float32.

OIDN (``core/autoexposure.h``, ``devices/cpu/cpu_autoexposure.{cpp,ispc}``) splits
the image into bins of at most 16 x 16 pixels, averages the luminance in each bin,
and returns ``key / 2^mean(log2(bin averages))`` over the bins brighter than
``eps``: the key value divided by the geometric mean luminance. See section 4.4 of
``shared/reference/oidn-semantics.md``.

The result depends on the order of float32 additions, and OIDN's CPU device sums
with the SIMD width of the ISA it picks on the host (`host_isa`): AVX-512 (16
lanes), AVX2 (8) or SSE4 (8 lanes in two 4-wide registers). This module reproduces
each exactly (`ISAS`):

* within a bin, each row's (at most 16) columns are visited ``L`` at a time, so
  lane ``k`` accumulates columns ``k, k + L, ...`` of each row, rows in order;
  the lanes are then summed in the order of ISPC's ``reduce_add`` on that target
  (see `_reduce_lanes`) and the total is divided by the pixel count;
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
code compiles it: on AVX2 and AVX-512 with FMA contraction, ``fma(0.072169, b,
fma(0.212671, r, 0.715160 g))`` (emulated exactly here), on SSE4 (no FMA) with
every product and sum rounded. The lane orders and the luminance contraction were
determined by matching OIDN 2.5.1's output bit for bit on each ISA (``tests/unit/
test_autoexposure.py``, ``tests/data/autoexposure/``); section 4.4 of the semantics
document describes the lane reduction as plain pairwise halving, which is 1 ULP off
on some bin widths.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from oidn_gpu.errors import InvalidArgumentError

MAX_BIN_SIZE = 16  # AutoexposureParams::maxBinSize (OIDN core/autoexposure.h)
KEY = np.float32(0.18)  # AutoexposureParams::key: target geometric mean luminance
EPS = np.float32(1e-8)  # AutoexposureParams::eps: bins at or below this are skipped
FLT_MAX = np.float32(np.finfo(np.float32).max)

# Luminance weights (OIDN core/color.h, luminance()).
LUMINANCE_R = np.float32(0.212671)
LUMINANCE_G = np.float32(0.715160)
LUMINANCE_B = np.float32(0.072169)

BAND_PX = 1 << 20
"""Pixels sanitized and turned into luminance at a time (whole rows of bins): the
temporaries of one band are about 18 bytes a pixel, 18 MiB here."""


ISA_ENV = "OIDN_GPU_CPU_ISA"
"""Environment variable naming the ISA whose addition order to follow (see `host_isa`)."""


@dataclass(frozen=True)
class CpuIsa:
    """One ISPC target of OIDN 2.5.1's CPU device: how it sums a bin's luminance."""

    name: str
    simd_lanes: int  # ISPC programCount: the lanes of one vector
    register_lanes: int  # float lanes of one hardware register (a vector may span two)
    fma: bool  # whether the luminance's multiply-adds are fused


# OIDN 2.5.1 ships ISPC kernels for SSE4, AVX2 and AVX-512 (SKX) and ISPC picks one at
# run time from the CPU's features. The widths, the register split and the FMA choice
# were determined by matching OIDN's scales bit for bit (tests/data/autoexposure/):
# its SSE4 build runs 8 lanes in two 4-wide registers, without FMA.
ISAS = {
    "avx512": CpuIsa("avx512", 16, 16, fma=True),
    "avx2": CpuIsa("avx2", 8, 8, fma=True),
    "sse4": CpuIsa("sse4", 8, 4, fma=False),
}

# CPU features each ISPC target needs (AVX-512 "SKX": F, CD, DQ, BW and VL), as Linux's
# /proc/cpuinfo names them.
_AVX512_FLAGS = frozenset({"avx512f", "avx512cd", "avx512dq", "avx512bw", "avx512vl"})
_AVX2_FLAGS = frozenset({"avx2", "fma"})


_F32_MIN_NORMAL = 2.0**-126  # below this, float32 spacing is fixed (denormals)
_LOW_BITS_MASK = np.uint64((1 << 29) - 1)  # float64 mantissa bits dropped by float32
_HALFWAY_BITS = np.uint64(1 << 28)  # ...that put a float64 exactly between two float32


def _isa_from_flags(flags: frozenset[str]) -> CpuIsa:
    if _AVX512_FLAGS.issubset(flags):
        return ISAS["avx512"]
    if _AVX2_FLAGS.issubset(flags):
        return ISAS["avx2"]
    return ISAS["sse4"]


def _cpu_flags() -> frozenset[str] | None:
    """The CPU's features in /proc/cpuinfo spelling (lowercase), or None if unknown.

    NumPy's run-time dispatcher already probed them (CPUID and the OS's register
    state, on every OS); /proc/cpuinfo is the fallback on Linux.
    """
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as features
        except ImportError:
            features = None
    if features:
        names = {name.lower() for name, present in features.items() if present}
        return frozenset(names | ({"fma"} if "fma3" in names else set()))
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return None


@functools.lru_cache(maxsize=1)
def _detected_isa() -> CpuIsa:
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686", "x86"):
        # OIDN's CPU device on ARM runs ISPC's NEON target (neon-i32x4 assumed, FMA);
        # this order is inferred from the x86 ones, not checked against OIDN on ARM.
        return CpuIsa("neon", 4, 4, fma=True)
    flags = _cpu_flags()
    return ISAS["sse4"] if flags is None else _isa_from_flags(flags)


def host_isa() -> CpuIsa:
    """The ISPC target OIDN's CPU device runs on this host, whose addition order we follow.

    ``OIDN_GPU_CPU_ISA=avx512|avx2|sse4`` overrides the detection (to match OIDN on
    another machine).

    Raises:
        InvalidArgumentError: the variable names an unknown ISA.
    """
    name = os.environ.get(ISA_ENV, "").strip().lower()
    if not name:
        return _detected_isa()
    return _isa_named(name, f"{ISA_ENV}={name!r}")


def _isa_named(name: str, what: str) -> CpuIsa:
    isa = ISAS.get(name)
    if isa is None:
        raise InvalidArgumentError(f"unknown CPU ISA {what}; expected 'avx512', 'avx2' or 'sse4'")
    return isa


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


def luminance(rgb: np.ndarray, *, fma: bool = True) -> np.ndarray:
    """Luminance of sanitized RGB values ``[..., 3]`` float32, as OIDN's CPU computes it.

    With ``fma`` (AVX2, AVX-512) the sum ``R r + G g + B b`` is contracted into two
    fused multiply-adds; without (SSE4) every product and sum rounds.
    """
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    if not fma:
        return (r * LUMINANCE_R + g * LUMINANCE_G) + b * LUMINANCE_B
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


def _reduce_lanes(lanes: np.ndarray, register_lanes: int) -> np.ndarray:
    """Sum the lanes ``[..., L]`` in the order of ISPC's ``reduce_add`` on that target.

    A vector spanning several registers (SSE4's 8 lanes in two 4-wide registers)
    first adds its registers lane by lane. Within a register, adjacent pairs are
    added twice, so each group of 4 lanes (128 bits) becomes ``(l0+l1) + (l2+l3)``;
    then the group sums: 4 of them (AVX-512) as ``(g0+g2) + (g1+g3)``, 2 (AVX2) as
    ``g0 + g1``. These orders were found by matching OIDN 2.5.1's autoexposure bit
    for bit on AVX-512, AVX2 and (emulated) SSE4 CPUs.
    """
    registers = lanes[..., 0:register_lanes]
    for start in range(register_lanes, lanes.shape[-1], register_lanes):
        registers = registers + lanes[..., start : start + register_lanes]
    pairs = registers[..., 0::2] + registers[..., 1::2]
    groups = pairs[..., 0::2] + pairs[..., 1::2]  # [..., register_lanes / 4]
    if groups.shape[-1] == 4:
        groups = groups[..., 0:2] + groups[..., 2:4]
    if groups.shape[-1] == 2:
        groups = groups[..., 0:1] + groups[..., 1:2]
    return groups[..., 0]


def _bin_averages(color: np.ndarray, isa: CpuIsa) -> np.ndarray:
    """Average luminance per bin of ``color [H, W, C]``, ``[nbH, nbW]`` float32.

    The image is sanitized and its luminance computed one band of bin rows at a time
    (about `BAND_PX` pixels), so the temporaries stay small whatever the image size;
    both are per pixel and each bin lies in one band, so the bands change no bit.
    """
    height, width = color.shape[:2]
    nb_h = -(-height // MAX_BIN_SIZE)
    nb_w = -(-width // MAX_BIN_SIZE)
    rows = _bin_bounds(height, nb_h)
    cols = _bin_bounds(width, nb_w)
    band_bins = max(1, BAND_PX // (MAX_BIN_SIZE * width))
    averages = np.empty((nb_h, nb_w), np.float32)
    for first in range(0, nb_h, band_bins):
        last = min(first + band_bins, nb_h)
        y0, y1 = int(rows[first]), int(rows[last])
        lum = luminance(_sanitized_rgb(color[y0:y1]), fma=isa.fma)
        averages[first:last] = _band_bin_averages(lum, rows[first : last + 1] - y0, cols, isa)
    return averages


def _band_bin_averages(
    lum: np.ndarray, rows: np.ndarray, cols: np.ndarray, isa: CpuIsa
) -> np.ndarray:
    """Average luminance per bin of ``lum`` (bin bounds ``rows``, ``cols``), in OIDN's
    addition order.

    Within a bin, ISPC's ``foreach`` over the (at most 16) columns of a row runs
    ``ceil(bin width / L)`` vector iterations, the last one masked, so lane ``k``
    adds columns ``k, k + L, ...`` of each row, rows in order.
    """
    simd_lanes = isa.simd_lanes
    height, width = lum.shape
    nb_h, nb_w = len(rows) - 1, len(cols) - 1
    bin_h = np.diff(rows)
    bin_w = np.diff(cols)

    lane = np.arange(simd_lanes)
    acc = np.zeros((nb_h, nb_w, simd_lanes), dtype=np.float32)
    for r in range(int(bin_h.max())):
        row_on = bin_h > r
        src_rows = np.minimum(rows[:-1] + r, height - 1)
        row_lum = lum[src_rows, :]  # [nbH, W]
        for start in range(0, int(bin_w.max()), simd_lanes):
            offset = start + lane  # [L]: the bin column each lane reads in this iteration
            col_on = offset[None, :] < bin_w[:, None]  # [nbW, L]
            src_cols = np.minimum(cols[:-1, None] + offset[None, :], width - 1)
            contrib = row_lum[:, src_cols]  # [nbH, nbW, L]
            on = row_on[:, None, None] & col_on[None, :, :]
            acc += np.where(on, contrib, np.float32(0))  # +0.0 leaves a masked lane unchanged

    totals = _reduce_lanes(acc, isa.register_lanes)
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


def autoexposure(color: np.ndarray, *, isa: str | CpuIsa | None = None) -> float:
    """Compute OIDN's autoexposure input scale for an HDR colour image.

    Args:
        color: ``[H, W]`` or ``[H, W, C]`` with C in 1..3 (a 4th alpha channel must be
            stripped by the caller), float16 or float32. 2-channel images are read as
            (c0, c1, c1), 1-channel as grey.
        isa: ``"avx512"``, ``"avx2"`` or ``"sse4"`` (or a `CpuIsa`): follow the addition
            order of OIDN's CPU device on that ISA; None (default): the one it runs on
            this host (`host_isa`).

    Returns:
        The scale ``s`` (a float32 value as a Python float); 1.0 when no bin has a mean
        luminance above 1e-8 or the image is empty.

    Raises:
        InvalidArgumentError: for a wrong shape or dtype, or an unknown ISA.
    """
    if isa is None:
        target = host_isa()
    elif isinstance(isa, CpuIsa):
        target = isa
    else:
        target = _isa_named(isa, repr(isa))
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
        averages = _bin_averages(arr, target)
        valid = averages > EPS
        logs = _log2_f32(np.where(valid, averages, np.float32(1)))
        total, count = _tree_reduce(logs, valid)
        if count == 0:
            return 1.0
        mean = np.float32(total / np.float32(count))
        return float(KEY / _exp2_f32(mean))
