"""Per-frame error and temporal instability of a denoised sequence against its reference.

Instability: the mean over frames of ``|(D_t - warp(D_t-1)) - (R_t - warp(R_t-1))|``
(RMS over the pixels whose motion comes from on screen and is not disoccluded) relative to
the RMS of ``R_t``: the flicker the reference does not have. PSNR on ``x / (1 + x)``
tone-mapped values (peak 1).
"""

from __future__ import annotations

import numpy as np


def warp(image: np.ndarray, motion: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The previous frame's ``image`` bilinearly at ``(x + mx, y + my)`` and where that
    point is on screen."""
    height, width = image.shape[:2]
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    px, py = cols + motion[..., 0], rows + motion[..., 1]
    inside = (px >= 0) & (px <= width - 1) & (py >= 0) & (py <= height - 1)
    px, py = np.clip(px, 0, width - 1), np.clip(py, 0, height - 1)
    x0 = np.minimum(np.floor(px).astype(int), width - 2)
    y0 = np.minimum(np.floor(py).astype(int), height - 2)
    fx, fy = (px - x0)[..., None], (py - y0)[..., None]
    out = (
        image[y0, x0] * (1 - fx) * (1 - fy)
        + image[y0, x0 + 1] * fx * (1 - fy)
        + image[y0 + 1, x0] * (1 - fx) * fy
        + image[y0 + 1, x0 + 1] * fx * fy
    )
    return out, inside


def instability(outputs, frames) -> float:
    values = []
    for t in range(1, len(frames)):
        motion = frames[t].motion
        dw, inside = warp(outputs[t - 1][..., :3], motion)
        rw, _ = warp(frames[t - 1].reference, motion)
        keep = inside & ~frames[t].disoccluded
        flicker = (outputs[t][..., :3] - dw) - (frames[t].reference - rw)
        ref = frames[t].reference
        values.append(np.sqrt(np.mean(flicker[keep] ** 2)) / np.sqrt(np.mean(ref[keep] ** 2)))
    return float(np.mean(values))


def _tonemap(x):
    x = np.maximum(np.asarray(x, np.float64), 0)
    return x / (1 + x)


def psnr(outputs, frames, mask_of=None) -> float:
    """Mean squared error over all frames (or the masked pixels) as PSNR in dB."""
    errors, count = 0.0, 0
    for out, frame in zip(outputs, frames, strict=True):
        diff = (_tonemap(out[..., :3]) - _tonemap(frame.reference)) ** 2
        if mask_of is not None:
            diff = diff[mask_of(frame)]
        errors += float(diff.sum())
        count += diff.size
    return float(10 * np.log10(1.0 / max(errors / max(count, 1), 1e-20)))
