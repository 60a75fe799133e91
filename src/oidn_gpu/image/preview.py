"""Side-by-side preview PNGs (noisy | denoised) for people to look at.

Tonemapping (documented, simple, and the same one the shared test scenes use for
their previews and metrics, so images are comparable):

* Linear data (float files): y = max(e * x, 0), t = (y / (1 + y)) ** (1 / 2.2),
  i.e. Reinhard then gamma 2.2, with the exposure e = 2 ** round(log2(0.18 / L))
  where L is the mean Rec. 709 luminance of the *noisy* image (e = 1 when L is 0
  or not finite). Both halves use the same e.
* sRGB-encoded data (8-bit files): shown as stored, clamped to [0, 1].

With a display and view (`oidn_gpu.image.color.ColorOptions`), both halves are shown
through OpenColorIO instead (`oidn_gpu.image.color.to_display`), with no exposure.

One-channel images are shown grey, two-channel ones as (c0, c1, c1) like OIDN
broadcasts them; alpha is ignored. The halves are separated by a dark gutter. The
written preview is labelled: "noisy" and "denoised" at the top of each half, and how it
is shown (the display and view, or the tonemap) at the bottom, where it is large enough
for the text (`LABEL_MIN_PX`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.color import ColorOptions, to_display
from oidn_gpu.image.image_types import oiio as _oiio
from oidn_gpu.image.io import LINEAR_ENCODING, SRGB_ENCODING, write_image_atomic

MIDDLE_GREY = 0.18  # target mean luminance of the exposure rule
DISPLAY_GAMMA = 2.2
GUTTER_PX = 4
GUTTER_VALUE = 0.1
REC709_LUMA = np.array([0.2126, 0.7152, 0.0722], dtype=np.float32)
LABEL_MIN_PX = (48, 96)  # height and half width under which a preview is not labelled


def _rgb(pixels: np.ndarray) -> np.ndarray:
    arr = np.asarray(pixels, dtype=np.float32)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    channels = arr.shape[2]
    if channels in (2, 4):  # value channels + alpha, or 2-channel data; see module doc
        if channels == 4:
            return arr[:, :, :3]
        return np.concatenate([arr[:, :, :2], arr[:, :, 1:2]], axis=2)
    if channels == 1:
        return np.repeat(arr, 3, axis=2)
    return arr[:, :, :3]


def exposure_for(pixels: np.ndarray) -> float:
    """e = 2 ** round(log2(0.18 / mean luminance)), or 1 for black or non-finite images."""
    rgb = np.nan_to_num(_rgb(pixels), nan=0.0, posinf=0.0, neginf=0.0)
    luminance = float(np.mean(rgb @ REC709_LUMA))
    if not math.isfinite(luminance) or luminance <= 0.0:
        return 1.0
    return float(2.0 ** round(math.log2(MIDDLE_GREY / luminance)))


def tonemap(pixels: np.ndarray, *, exposure: float, encoding: str) -> np.ndarray:
    """Display values in [0, 1] per the module doc."""
    rgb = np.nan_to_num(_rgb(pixels), nan=0.0, posinf=1e30, neginf=0.0)
    if encoding == SRGB_ENCODING:
        return np.clip(rgb, 0.0, 1.0)
    if encoding != LINEAR_ENCODING:
        raise InvalidArgumentError(f"unknown encoding {encoding!r}; expected 'linear' or 'srgb'")
    y = np.maximum(rgb * np.float32(exposure), 0.0)
    return np.power(y / (1.0 + y), 1.0 / DISPLAY_GAMMA).astype(np.float32)


def side_by_side(
    noisy: np.ndarray,
    denoised: np.ndarray,
    *,
    encoding: str,
    color: ColorOptions | None = None,
    space: str | None = None,
) -> np.ndarray:
    """The H x (2W + gutter) x 3 display image noisy | denoised; through ``color``'s
    display and view when it has one (``space``: the colour space of both images)."""
    if np.shape(noisy)[:2] != np.shape(denoised)[:2]:
        raise InvalidArgumentError(
            f"noisy {np.shape(noisy)[:2]} and denoised {np.shape(denoised)[:2]} sizes differ"
        )
    if color is not None and color.shown:
        if space is None or color.view is None or color.display is None:
            raise InvalidArgumentError("a preview through a display needs its view and space")
        left = to_display(noisy, space, color.display, color.view)
        right = to_display(denoised, space, color.display, color.view)
    else:
        exposure = exposure_for(noisy) if encoding == LINEAR_ENCODING else 1.0
        left = tonemap(noisy, exposure=exposure, encoding=encoding)
        right = tonemap(denoised, exposure=exposure, encoding=encoding)
    gutter = np.full((left.shape[0], GUTTER_PX, 3), GUTTER_VALUE, dtype=np.float32)
    return np.concatenate([left, gutter, right], axis=1)


def shown_as(noisy: np.ndarray, *, encoding: str, color: ColorOptions | None = None) -> str:
    """How a preview is shown, in words (its bottom label)."""
    if color is not None and color.shown:
        return f"{color.display} / {color.view}"
    if encoding != LINEAR_ENCODING:
        return "as stored (sRGB)"
    return f"Reinhard, gamma 2.2, exposure x{exposure_for(noisy):g}"


def label(image: np.ndarray, top: tuple[str, str], bottom: str) -> np.ndarray:
    """``image`` (noisy | denoised) with ``top`` written at the top of each half and
    ``bottom`` at the bottom left (OpenImageIO's ``render_text`` and its own font), each
    text white over a dark shadow; unchanged when too small for text (`LABEL_MIN_PX`)."""
    height, width = image.shape[:2]
    half = (width - GUTTER_PX) // 2
    if height < LABEL_MIN_PX[0] or half < LABEL_MIN_PX[1]:
        return image
    oiio = _oiio()
    size = int(min(max(height // 24, 12), 32))
    buf = oiio.ImageBuf(np.ascontiguousarray(image, dtype=np.float32))
    margin = max(size // 3, 3)
    places = [
        (margin, margin + size, top[0]),
        (half + GUTTER_PX + margin, margin + size, top[1]),
        (margin, height - margin, bottom),
    ]
    for x, y, text in places:
        fitted = _fitting_size(oiio, text, size, width - x - margin)
        for dx, dy, value in ((1, 1, 0.0), (0, 0, 1.0)):
            oiio.ImageBufAlgo.render_text(buf, x + dx, y + dy, text, fitted, "", (value,) * 3)
    oiio.geterror()  # a missing font leaves the image as it is; nothing to report
    return np.asarray(buf.get_pixels(oiio.FLOAT), dtype=np.float32).reshape(image.shape)


def _fitting_size(oiio: Any, text: str, size: int, room: int) -> int:
    """The largest font size up to ``size`` (at least 8) at which ``text`` fits ``room``
    pixels."""
    while size > 8 and oiio.ImageBufAlgo.text_size(text, size).width > room:
        size -= 1
    return size


def write_side_by_side(
    path: str | os.PathLike[str],
    noisy: np.ndarray,
    denoised: np.ndarray,
    *,
    encoding: str,
    color: ColorOptions | None = None,
    space: str | None = None,
) -> Path:
    """Write noisy | denoised, shown as the module doc says and labelled, as an 8-bit
    image (atomically).

    The display values are already display-encoded, so they are written as
    sRGB data (no further transfer).
    """
    image = side_by_side(noisy, denoised, encoding=encoding, color=color, space=space)
    image = label(image, ("noisy", "denoised"), shown_as(noisy, encoding=encoding, color=color))
    return write_image_atomic(path, image, encoding=SRGB_ENCODING, pixel_format="uint8")
