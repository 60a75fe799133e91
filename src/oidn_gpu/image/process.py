"""OIDN's input and output processing on NumPy arrays (the reference for the GPU kernels).

Input processing turns the user's images into the network input tensor
``[C_in, H, W]`` (``core/input_process.*``, ``devices/cpu/cpu_input_process.isph``);
output processing turns the network output ``[3, H, W]`` back into an image
(``devices/cpu/cpu_output_process.isph``). Sections 4.1 and 4.5-4.7, 5 and 10 of
``shared/reference/oidn-semantics.md`` define them; every step here is a float32
operation in OIDN's order, so the GPU kernels can be tested against it.

Both directions work on any band of rows (or any rectangle), so a caller can
process a large image in chunks to bound memory. Padding to a multiple of 16 and
tiling are the caller's job (see ``image/tiling.py``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from oidn_gpu.errors import InvalidArgumentError, NonFiniteInputWarning
from oidn_gpu.image.transfer import Transfer, forward, inverse, transfer_for

FLT_MAX = np.float32(np.finfo(np.float32).max)  # std::numeric_limits<float>::max()
ONE_THIRD = np.float32(1.0 / 3.0)  # 0.33333334: 1-channel output average (cpu_output_process)
_ZERO = np.float32(0)
_HALF = np.float32(0.5)
_ONE = np.float32(1)
_TWO = np.float32(2)


def warn_if_autoexposure_blackens(color: np.ndarray, scale: float) -> None:
    """Warn (`NonFiniteInputWarning`) when autoexposure returned 0 for ``color``.

    OIDN does the same arithmetic: +Inf pixels (or sums past FLT_MAX) make the
    geometric mean infinite and the scale 0, so the whole output is black. The
    scale is kept, for parity; the warning says how many pixels are not finite.
    """
    if scale != 0.0:
        return
    rgb = np.asarray(color)
    if rgb.ndim == 3:
        rgb = rgb[:, :, :3]
    bad = ~np.isfinite(rgb)
    count = int((bad.any(axis=2) if bad.ndim == 3 else bad).sum())
    cause = (
        f"{count} pixel{'s' if count != 1 else ''} of the color {'are' if count != 1 else 'is'} "
        "not finite (Inf or NaN)"
        if count
        else "the color's values overflow float32 when summed"
    )
    warnings.warn(
        f"autoexposure is 0 because {cause}: the output is black; set input_scale "
        "(--input-scale on the command line) or replace those pixels",
        NonFiniteInputWarning,
        stacklevel=3,
    )


def nonfinite_pixels(pixels: np.ndarray) -> tuple[int, int, int]:
    """``(nan, inf, total)``: pixels with a NaN channel, pixels with an infinite one (and
    no NaN), and all pixels of an HxW or HxWxC image."""
    values = np.asarray(pixels)
    if values.ndim == 2:
        values = values[:, :, None]
    total = values.shape[0] * values.shape[1]
    if values.dtype.kind != "f" or np.isfinite(values).all():
        return 0, 0, total
    nan = np.isnan(values).any(axis=2)
    inf = np.isinf(values).any(axis=2) & ~nan
    return int(nan.sum()), int(inf.sum()), total


def nonfinite_message(what: str, pixels: np.ndarray) -> str | None:
    """A warning naming how many pixels of ``what`` are NaN or infinite, or None.

    Input processing (semantics section 4.5) turns NaN into 0 and clamps infinities to
    the input range (FLT_MAX for HDR, 1 for LDR), as Intel OIDN does; the image is
    denoised all the same.
    """
    nan, inf, total = nonfinite_pixels(pixels)
    if not (nan or inf):
        return None
    parts = [f"{n:,} {kind}" for n, kind in ((nan, "NaN"), (inf, "infinite")) if n]
    return (
        f"{' and '.join(parts)} pixel{'s' if nan + inf != 1 else ''} of {total:,} in the "
        f"{what}: denoised as Intel OIDN does (NaN as 0, infinities clamped to the input "
        "range); fix them in the render"
    )


@dataclass(frozen=True)
class Mode:
    """How the main input is mapped to network space and back.

    Attributes:
        transfer: the transfer function (see `transfer_for`).
        hdr: values are unbounded above (clamp to FLT_MAX) rather than to 1.
        snorm: signed values in [-1, 1] (normal-only RT, directional RTLightmap).
        input_scale: the resolved scale ``s`` (never NaN; autoexposure already
            applied by the caller), stored as a float32 value.
        output_scale: ``1/s`` as a float32 division, or 0 when ``s == 0``
            (``TransferFunction::getOutputScale``); derived, not passed.
    """

    transfer: Transfer
    hdr: bool
    snorm: bool
    input_scale: float = 1.0
    output_scale: float = field(init=False)

    def __post_init__(self) -> None:
        scale = np.float32(self.input_scale)
        if np.isnan(scale):
            raise InvalidArgumentError(
                "input_scale nan must be resolved (autoexposure or 1) before building a mode"
            )
        object.__setattr__(self, "input_scale", float(scale))
        out = _ZERO if scale == 0 else _ONE / scale
        object.__setattr__(self, "output_scale", float(out))

    @property
    def input_range(self) -> tuple[float, float]:
        """The clamp range ``(lo, hi)`` of the scaled main input."""
        return (-1.0 if self.snorm else 0.0, float(FLT_MAX) if self.hdr else 1.0)


def mode_for(
    filter_type: str,
    *,
    hdr: bool = False,
    srgb: bool = False,
    directional: bool = False,
    normal_only: bool = False,
    input_scale: float = 1.0,
) -> Mode:
    """Build the `Mode` of an OIDN filter configuration (semantics sections 4.2 and 12).

    For RT, ``hdr`` is the filter's parameter and ``snorm`` means normal-only
    filtering; for RTLightmap, ``hdr = not directional`` and ``snorm = directional``
    (``hdr``, ``srgb`` and ``normal_only`` are ignored there).

    Raises:
        InvalidArgumentError: for an unknown filter type or a NaN ``input_scale``.
    """
    if filter_type == "RT":
        eff_hdr, snorm = hdr, normal_only
    elif filter_type == "RTLightmap":
        eff_hdr, snorm, srgb = not directional, directional, False
    else:
        raise InvalidArgumentError(
            f"unknown filter type {filter_type!r}; expected 'RT' or 'RTLightmap'"
        )
    transfer = transfer_for(
        filter_type, hdr=eff_hdr, srgb=srgb, snorm=snorm, directional=directional
    )
    return Mode(transfer=transfer, hdr=eff_hdr, snorm=snorm, input_scale=input_scale)


def broadcast_rgb(img: np.ndarray) -> np.ndarray:
    """Read an image as 3 channels, as OIDN does (section 4.1), in float32.

    ``[H, W]`` and ``[H, W, 1]`` become grey (c0, c0, c0), ``[H, W, 2]`` becomes
    (c0, c1, c1) and ``[H, W, 3]`` is kept. Half values widen exactly. A 4th
    (alpha) channel must be stripped by the caller.

    Returns:
        ``[H, W, 3]`` float32 (a new array unless the input already is one).

    Raises:
        InvalidArgumentError: for another shape or a non-float dtype.
    """
    arr = np.asarray(img)
    if arr.dtype not in (np.float16, np.float32, np.float64):
        raise InvalidArgumentError(f"image has dtype {arr.dtype}; expected float16 or float32")
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or not 1 <= arr.shape[2] <= 3:
        raise InvalidArgumentError(
            f"image has shape {np.shape(img)}; expected (H, W) or (H, W, C) with C in 1..3"
        )
    arr = arr.astype(np.float32, copy=False)
    if arr.shape[2] == 1:
        return np.repeat(arr, 3, axis=2)
    if arr.shape[2] == 2:
        return arr[:, :, (0, 1, 1)]
    return arr


def _nan_to_zero(v: np.ndarray) -> np.ndarray:
    """Replace NaN with 0 in place (infinities are kept for the clamp)."""
    v[np.isnan(v)] = _ZERO
    return v


def process_main(img: np.ndarray, mode: Mode) -> np.ndarray:
    """Map the main input to network space: ``[H, W, C]`` -> ``[3, H, W]`` float32.

    Per channel, in OIDN's order: ``v*s``, NaN -> 0, clamp to ``[lo, hi]``,
    ``v*0.5 + 0.5`` if snorm, forward transfer (PU/Log include normScale).
    """
    with np.errstate(over="ignore", invalid="ignore"):  # inf and inf*0 are sanitized next
        v = broadcast_rgb(img) * np.float32(mode.input_scale)  # always a new array
    _nan_to_zero(v)
    lo, hi = mode.input_range
    np.clip(v, np.float32(lo), np.float32(hi), out=v)
    if mode.snorm:
        v = v * _HALF + _HALF
    return np.ascontiguousarray(forward(mode.transfer, v).transpose(2, 0, 1))


def process_albedo(img: np.ndarray) -> np.ndarray:
    """Auxiliary albedo to network space: NaN -> 0, clamp to [0, 1]; ``[3, H, W]``."""
    v = broadcast_rgb(img).copy()
    _nan_to_zero(v)
    np.clip(v, _ZERO, _ONE, out=v)
    return np.ascontiguousarray(v.transpose(2, 0, 1))


def process_normal(img: np.ndarray) -> np.ndarray:
    """Auxiliary normal to network space: NaN -> 0, clamp to [-1, 1], ``v*0.5 + 0.5``."""
    v = broadcast_rgb(img).copy()
    _nan_to_zero(v)
    np.clip(v, -_ONE, _ONE, out=v)
    v = v * _HALF + _HALF
    return np.ascontiguousarray(v.transpose(2, 0, 1))


def check_input_sizes(
    main: np.ndarray, albedo: np.ndarray | None, normal: np.ndarray | None
) -> None:
    """Raise `InvalidArgumentError` when the albedo or normal size differs from the main's."""
    size = np.shape(main)[:2]
    for name, img in (("albedo", albedo), ("normal", normal)):
        if img is not None and np.shape(img)[:2] != size:
            raise InvalidArgumentError(
                f"{name} image size {np.shape(img)[:2]} differs from the main input's {size}"
            )


def build_input(
    main: np.ndarray,
    albedo: np.ndarray | None,
    normal: np.ndarray | None,
    mode: Mode,
    *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Build the network input tensor for a band or rectangle of the image.

    Args:
        main: the main input ``[H, W]`` or ``[H, W, C]`` (color, or the aux image
            filtered alone), float16/float32.
        albedo: auxiliary albedo given together with color, or None.
        normal: auxiliary normal given together with color (and albedo), or None.
        mode: the processing mode of the main input.
        out: optional ``[C_in, H, W]`` float32 destination (e.g. a view into a
            padded tile buffer); written and returned.

    Returns:
        ``[C_in, H, W]`` float32 with ``C_in = 3 * number of images``, channels
        ordered main, albedo, normal.

    Raises:
        InvalidArgumentError: for mismatched sizes or a wrong ``out`` shape.
    """
    check_input_sizes(main, albedo, normal)
    parts = [process_main(main, mode)]
    height, width = parts[0].shape[1:]
    for img, fn in ((albedo, process_albedo), (normal, process_normal)):
        if img is not None:
            parts.append(fn(img))
    channels = 3 * len(parts)
    if out is None:
        out = np.empty((channels, height, width), dtype=np.float32)
    elif out.shape != (channels, height, width) or out.dtype != np.float32:
        raise InvalidArgumentError(
            f"out has shape {out.shape} and dtype {out.dtype}; expected "
            f"{(channels, height, width)} float32"
        )
    for i, part in enumerate(parts):
        out[3 * i : 3 * i + 3] = part
    return out


def finish_output(y: np.ndarray, mode: Mode, out_channels: int) -> np.ndarray:
    """Map the network output back to image values (semantics section 5).

    Per pixel, in OIDN's order: NaN -> 0, clamp to [0, FLT_MAX], inverse
    transfer, average ``(r + g + b) * 0.33333334`` if ``out_channels == 1``,
    ``max(v*2 - 1, -1)`` if snorm, ``min(v, 1)`` if not hdr, times the output
    scale; the first ``out_channels`` channels are kept.

    Args:
        y: network output ``[3, H, W]`` (or more channels; only 0..2 are read).
        mode: the processing mode used for the input.
        out_channels: channel count of the output image, 1..3.

    Returns:
        ``[H, W, out_channels]`` float32.

    Raises:
        InvalidArgumentError: for a bad ``out_channels`` or ``y`` shape.
    """
    if out_channels not in (1, 2, 3):
        raise InvalidArgumentError(f"out_channels is {out_channels}; expected 1, 2 or 3")
    if y.ndim != 3 or y.shape[0] < 3:
        raise InvalidArgumentError(f"network output has shape {y.shape}; expected (3, H, W)")
    v = np.array(y[:3], dtype=np.float32)  # copy: sanitized in place
    _nan_to_zero(v)
    np.clip(v, _ZERO, FLT_MAX, out=v)
    v = inverse(mode.transfer, v)
    if out_channels == 1:
        v = ((v[0] + v[1]) + v[2])[None] * ONE_THIRD
    with np.errstate(over="ignore", invalid="ignore"):
        if mode.snorm:
            v = np.maximum(v * _TWO - _ONE, -_ONE)
        if not mode.hdr:
            v = np.minimum(v, _ONE)
        v = v * np.float32(mode.output_scale)
    return np.ascontiguousarray(v[:out_channels].transpose(1, 2, 0))
