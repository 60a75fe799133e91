"""Transfer functions between image values and network space (OIDN ``core/color.h``).

OIDN feeds its networks perceptually encoded values: HDR colour goes through the
PU curve, LDR linear colour through the sRGB curve, HDR lightmaps through a log
curve; already-encoded and signed data pass unchanged (linear). This module holds
those four curves as vectorized NumPy functions on float32 arrays, the exact
float32 constants OIDN uses (so the WGSL generators print them instead of
retyping them), and the rule that picks the curve for a filter configuration
(section 4.2 of ``shared/reference/oidn-semantics.md``).

Numerics: every add, multiply and divide is a float32 operation, as in OIDN's
ISPC code (no FMA contraction is emulated). The transcendental parts (``pow``,
``log``, ``exp``) are evaluated in float64 and rounded once to float32, i.e.
correctly rounded float32 results in practice. OIDN's CPU device uses ISPC's own
approximations there, so those few results may differ from OIDN by an ULP or two;
the choice here is deterministic on every platform.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from oidn_gpu.errors import InvalidArgumentError

_F32 = np.float32

# PU curve: a fit of the PU2 encoding normalized at 100 cd/m^2 (Aydin et al. 2008).
# Float constants from OIDN core/color.h (PUTransferFunction / pu_forward, pu_inverse).
PU_A = _F32(1.41283765e03)
PU_B = _F32(1.64593172e00)
PU_C = _F32(4.31384981e-01)
PU_D = _F32(-2.94139609e-03)
PU_E = _F32(1.92653254e-01)
PU_F = _F32(6.26026094e-03)
PU_G = _F32(9.98620152e-01)
PU_Y0 = _F32(1.57945760e-06)  # forward: linear segment up to here
PU_Y1 = _F32(3.22087631e-02)  # forward: power segment up to here, log segment above
PU_X0 = _F32(2.23151711e-03)  # inverse: PU(PU_Y0)
PU_X1 = _F32(3.70974749e-01)  # inverse: PU(PU_Y1)
PU_INV_C = _F32(1) / PU_C  # the inverse's exponent, `1.f / c` evaluated in float

# sRGB curve (IEC 61966-2-1), as OIDN core/color.h types it (SRGBTransferFunction); no
# normalization. The decimal constants are shared with the 8-bit file conversion (image/io.py);
# OIDN evaluates them in float.
SRGB_SLOPE = 12.92  # slope of the linear segment
SRGB_SCALE = 1.055
SRGB_OFFSET = 0.055
SRGB_GAMMA = 2.4
SRGB_LINEAR_LIMIT = 0.0031308  # forward: linear segment up to here
SRGB_ENCODED_LIMIT = 0.04045  # inverse: linear segment up to here
SRGB_A = _F32(SRGB_SLOPE)
SRGB_B = _F32(SRGB_SCALE)
SRGB_C = _F32(SRGB_OFFSET)
SRGB_Y0 = _F32(SRGB_LINEAR_LIMIT)
SRGB_X0 = _F32(SRGB_ENCODED_LIMIT)
SRGB_EXPONENT = _F32(1) / _F32(SRGB_GAMMA)  # forward exponent `1.f/2.4f`
SRGB_INV_EXPONENT = _F32(1) / SRGB_EXPONENT  # inverse exponent `1.f/(1.f/2.4f)` = 2.4f

# Normalization point of the PU and Log curves: the largest half value
# (OIDN core/color.h, TransferFunction::yMax).
Y_MAX = _F32(65504.0)


def _pu_raw(y: np.ndarray) -> np.ndarray:
    """The un-normalized PU curve on a float32 array."""
    with np.errstate(all="ignore"):
        linear = y * PU_A
        power = PU_B * _pow(y, PU_C) + PU_D
        logarithmic = PU_E * _log(y + PU_F) + PU_G
    return np.where(y <= PU_Y0, linear, np.where(y <= PU_Y1, power, logarithmic))


def _pu_raw_inverse(x: np.ndarray) -> np.ndarray:
    """The inverse of the un-normalized PU curve on a float32 array."""
    with np.errstate(all="ignore"):
        linear = x / PU_A
        power = _pow((x - PU_D) / PU_B, PU_INV_C)
        logarithmic = _exp((x - PU_G) / PU_E) - PU_F
    return np.where(x <= PU_X0, linear, np.where(x <= PU_X1, power, logarithmic))


def _pow(base: np.ndarray, exponent: np.float32) -> np.ndarray:
    """float32 ``pow``: evaluated in float64, rounded once."""
    return np.power(base.astype(np.float64), np.float64(exponent)).astype(np.float32)


def _log(x: np.ndarray) -> np.ndarray:
    """float32 natural ``log``: evaluated in float64, rounded once."""
    return np.log(x.astype(np.float64)).astype(np.float32)


def _exp(x: np.ndarray) -> np.ndarray:
    """float32 ``exp``: evaluated in float64, rounded once (overflow gives +inf)."""
    with np.errstate(over="ignore"):
        return np.exp(x.astype(np.float64)).astype(np.float32)


# xMax = PU(yMax) evaluated in float (3.135119, bits 0x4048A5CA); normScale = 1/xMax
# computed in double and rounded once (0.31896716, bits 0x3EA34FAA). OIDN core/color.h,
# TransferFunction constructor.
PU_X_MAX = _F32(_pu_raw(np.array([Y_MAX], dtype=np.float32))[0])
PU_NORM_SCALE = _F32(1.0 / float(PU_X_MAX))
PU_RCP_NORM_SCALE = PU_X_MAX

# Log curve (RTLightmap HDR): x = ln(y + 1) * normScale; xMax = ln(yMax + 1) in float
# (11.089882), normScale = 1/xMax rounded once from double (0.09017228). OIDN core/color.h.
LOG_X_MAX = _F32(_log(np.array([Y_MAX + _F32(1)], dtype=np.float32))[0])
LOG_NORM_SCALE = _F32(1.0 / float(LOG_X_MAX))
LOG_RCP_NORM_SCALE = LOG_X_MAX


class Transfer(enum.Enum):
    """The transfer function between image values and network space."""

    LINEAR = "linear"
    SRGB = "srgb"
    PU = "pu"
    LOG = "log"

    def forward(self, y: np.ndarray) -> np.ndarray:
        """Encode image values into network space (see `forward`)."""
        return forward(self, y)

    def inverse(self, x: np.ndarray) -> np.ndarray:
        """Decode network values back to image values (see `inverse`)."""
        return inverse(self, x)


@dataclass(frozen=True)
class PUConstants:
    """The float32 constants of the PU curve, as Python floats (exact float32 values)."""

    a: float
    b: float
    c: float
    d: float
    e: float
    f: float
    g: float
    y0: float
    y1: float
    x0: float
    x1: float
    inv_c: float  # inverse exponent 1/c in float
    y_max: float  # 65504
    x_max: float  # PU(65504) = rcp_norm_scale
    norm_scale: float  # 1/x_max
    rcp_norm_scale: float


@dataclass(frozen=True)
class SRGBConstants:
    """The float32 constants of the sRGB curve, as Python floats."""

    a: float  # 12.92
    b: float  # 1.055
    c: float  # 0.055
    y0: float  # 0.0031308
    x0: float  # 0.04045
    exponent: float  # 1/2.4 in float
    inv_exponent: float  # 1/(1/2.4) in float


@dataclass(frozen=True)
class LogConstants:
    """The float32 constants of the Log curve, as Python floats."""

    y_max: float  # 65504
    x_max: float  # ln(65505) in float = rcp_norm_scale
    norm_scale: float  # 1/x_max
    rcp_norm_scale: float


def pu_constants() -> PUConstants:
    """Return the PU curve's float32 constants (for code generators and tests)."""
    return PUConstants(
        a=float(PU_A),
        b=float(PU_B),
        c=float(PU_C),
        d=float(PU_D),
        e=float(PU_E),
        f=float(PU_F),
        g=float(PU_G),
        y0=float(PU_Y0),
        y1=float(PU_Y1),
        x0=float(PU_X0),
        x1=float(PU_X1),
        inv_c=float(PU_INV_C),
        y_max=float(Y_MAX),
        x_max=float(PU_X_MAX),
        norm_scale=float(PU_NORM_SCALE),
        rcp_norm_scale=float(PU_RCP_NORM_SCALE),
    )


def srgb_constants() -> SRGBConstants:
    """Return the sRGB curve's float32 constants."""
    return SRGBConstants(
        a=float(SRGB_A),
        b=float(SRGB_B),
        c=float(SRGB_C),
        y0=float(SRGB_Y0),
        x0=float(SRGB_X0),
        exponent=float(SRGB_EXPONENT),
        inv_exponent=float(SRGB_INV_EXPONENT),
    )


def log_constants() -> LogConstants:
    """Return the Log curve's float32 constants."""
    return LogConstants(
        y_max=float(Y_MAX),
        x_max=float(LOG_X_MAX),
        norm_scale=float(LOG_NORM_SCALE),
        rcp_norm_scale=float(LOG_RCP_NORM_SCALE),
    )


def _as_f32(values: np.ndarray) -> np.ndarray:
    arr = np.asarray(values)
    return arr if arr.dtype == np.float32 else arr.astype(np.float32)


def forward(transfer: Transfer, y: np.ndarray) -> np.ndarray:
    """Encode image values ``y`` into network space, elementwise, in float32.

    PU and Log include the multiplication by their ``normScale``. Inputs are
    expected to be sanitized already (no NaN, clamped); other values follow the
    formulas (e.g. negative values give NaN on the power/log segments).

    Args:
        transfer: which curve.
        y: array of any shape; converted to float32.

    Returns:
        A new float32 array of the same shape (``y`` itself for LINEAR float32 input).
    """
    y = _as_f32(y)
    if transfer is Transfer.LINEAR:
        return y
    if transfer is Transfer.PU:
        with np.errstate(over="ignore"):
            return _pu_raw(y) * PU_NORM_SCALE
    if transfer is Transfer.SRGB:
        with np.errstate(all="ignore"):
            curve = SRGB_B * _pow(y, SRGB_EXPONENT) - SRGB_C
            return np.where(y <= SRGB_Y0, y * SRGB_A, curve)
    if transfer is Transfer.LOG:
        with np.errstate(all="ignore"):
            return _log(y + _F32(1)) * LOG_NORM_SCALE
    raise InvalidArgumentError(f"unknown transfer function {transfer!r}")


def inverse(transfer: Transfer, x: np.ndarray) -> np.ndarray:
    """Decode network values ``x`` back to image values, elementwise, in float32.

    PU first multiplies by ``rcpNormScale``; Log computes ``exp(x * xMax) - 1``.

    Args:
        transfer: which curve.
        x: array of any shape; converted to float32.

    Returns:
        A new float32 array of the same shape (``x`` itself for LINEAR float32 input).
    """
    x = _as_f32(x)
    if transfer is Transfer.LINEAR:
        return x
    if transfer is Transfer.PU:
        with np.errstate(over="ignore"):
            return _pu_raw_inverse(x * PU_RCP_NORM_SCALE)
    if transfer is Transfer.SRGB:
        with np.errstate(all="ignore"):
            curve = _pow((x + SRGB_C) / SRGB_B, SRGB_INV_EXPONENT)
        return np.where(x <= SRGB_X0, x / SRGB_A, curve)
    if transfer is Transfer.LOG:
        with np.errstate(over="ignore"):
            return _exp(x * LOG_RCP_NORM_SCALE) - _F32(1)
    raise InvalidArgumentError(f"unknown transfer function {transfer!r}")


def transfer_for(
    filter_type: str,
    *,
    hdr: bool = False,
    srgb: bool = False,
    snorm: bool = False,
    directional: bool = False,
) -> Transfer:
    """Pick OIDN's transfer function for a filter configuration (semantics section 4.2).

    RT (``RTFilter::newTransferFunc``): Linear if ``srgb`` or normal-only
    filtering (``snorm``), else PU if ``hdr``, else sRGB. RTLightmap
    (``RTLightmapFilter::newTransferFunc``): Linear if ``directional``, else Log.

    Raises:
        InvalidArgumentError: for an unknown filter type.
    """
    if filter_type == "RT":
        if srgb or snorm:
            return Transfer.LINEAR
        return Transfer.PU if hdr else Transfer.SRGB
    if filter_type == "RTLightmap":
        return Transfer.LINEAR if directional else Transfer.LOG
    raise InvalidArgumentError(
        f"unknown filter type {filter_type!r}; expected 'RT' or 'RTLightmap'"
    )
