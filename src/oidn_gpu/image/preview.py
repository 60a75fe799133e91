"""Side-by-side preview PNGs (noisy | denoised) for people to look at.

Tonemapping (documented, simple, and the same one the shared test scenes use for
their previews and metrics, so images are comparable):

* Linear data (float files): y = max(e * x, 0), t = (y / (1 + y)) ** (1 / 2.2),
  i.e. Reinhard then gamma 2.2, with the exposure e = 2 ** round(log2(0.18 / L))
  where L is the mean Rec. 709 luminance of the *noisy* image (e = 1 when L is 0
  or not finite). Both halves use the same e.
* sRGB-encoded data (8-bit files): shown as stored, clamped to [0, 1].

One-channel images are shown grey, two-channel ones as (c0, c1, c1) like OIDN
broadcasts them; alpha is ignored. The halves are separated by a dark gutter.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.io import LINEAR_ENCODING, SRGB_ENCODING, write_image_atomic

MIDDLE_GREY = 0.18  # target mean luminance of the exposure rule
DISPLAY_GAMMA = 2.2
GUTTER_PX = 4
GUTTER_VALUE = 0.1
REC709_LUMA = np.array([0.2126, 0.7152, 0.0722], dtype=np.float32)


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


def side_by_side(noisy: np.ndarray, denoised: np.ndarray, *, encoding: str) -> np.ndarray:
    """The H x (2W + gutter) x 3 display image noisy | denoised."""
    if np.shape(noisy)[:2] != np.shape(denoised)[:2]:
        raise InvalidArgumentError(
            f"noisy {np.shape(noisy)[:2]} and denoised {np.shape(denoised)[:2]} sizes differ"
        )
    exposure = exposure_for(noisy) if encoding == LINEAR_ENCODING else 1.0
    left = tonemap(noisy, exposure=exposure, encoding=encoding)
    right = tonemap(denoised, exposure=exposure, encoding=encoding)
    gutter = np.full((left.shape[0], GUTTER_PX, 3), GUTTER_VALUE, dtype=np.float32)
    return np.concatenate([left, gutter, right], axis=1)


def write_side_by_side(
    path: str | os.PathLike[str], noisy: np.ndarray, denoised: np.ndarray, *, encoding: str
) -> Path:
    """Write noisy | denoised, tonemapped, as an 8-bit image (atomically).

    The display values are already display-encoded, so they are written as
    sRGB data (no further transfer).
    """
    image = side_by_side(noisy, denoised, encoding=encoding)
    return write_image_atomic(path, image, encoding=SRGB_ENCODING, pixel_format="uint8")
