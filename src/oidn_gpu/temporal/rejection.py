"""Pass 1b and 1c of `oidn_gpu.temporal.passes.reproject` (NumPy): the history dropped
where the light changed (`reject_changes`) and the noisy input's history dropped near
disocclusions (`drop_near_disocclusions`), each with its test apart (`light_changed`,
`near_disocclusions`) for `oidn_gpu.TemporalAovDenoiser`, which applies the beauty's
decisions to its light-path passes."""

from __future__ import annotations

import numpy as np

from oidn_gpu.temporal.layout import (
    REPROJECTION_INPUT_SCALE,
    REPROJECTION_OUTPUT_COUNT,
    REPROJECTION_VALID,
    SIGNAL_CHANNELS,
    STATE_COUNT,
    STATE_OUTPUT,
    luminance,
)
from oidn_gpu.temporal.params import TemporalParams

CHANGE_RADIUS = 2  # the light-change test's window is 5x5
MAX_CHANGE_LUMINANCE = 1.0e18  # its luminances are clamped to +-this


def drop_near_disocclusions(
    signal: np.ndarray, reprojection: np.ndarray, params: TemporalParams
) -> np.ndarray:
    """Pass 1c: the noisy input's history dropped (the frame's own signal with its fireflies
    limited, `limited_signal`, n = 1) within
    `~TemporalParams.disocclusion_margin` pixels (Chebyshev distance) of a pixel without
    history; the output's history is kept. Measured on tests/data/sequences/moving: the
    newly visible pixels, denoised beside accumulated input, came out 0.58 dB below
    per-frame denoising; with a 16-pixel margin 0.08 dB (docs/benchmarks.md)."""
    if params.disocclusion_margin == 0:
        return reprojection
    return drop_input_history(signal, reprojection, near_disocclusions(reprojection, params))


def near_disocclusions(reprojection: np.ndarray, params: TemporalParams) -> np.ndarray:
    """``[H, W]`` bool: the pixels `drop_near_disocclusions` drops the input history of
    (none where `~TemporalParams.disocclusion_margin` is 0)."""
    rejected = reprojection[:, :, REPROJECTION_VALID] < np.float32(0.5)
    if params.disocclusion_margin == 0:
        return np.zeros_like(rejected)
    return near_pixels(rejected, params.disocclusion_margin)


def drop_input_history(
    signal: np.ndarray, reprojection: np.ndarray, near: np.ndarray
) -> np.ndarray:
    """The reprojection with the frame's own signal (fireflies limited) and n = 1 where
    ``near`` (`near_disocclusions`)."""
    out = reprojection.copy()
    own = limited_signal(signal, reprojection)
    out[:, :, :SIGNAL_CHANNELS] = np.where(near[:, :, None], own, out[:, :, :SIGNAL_CHANNELS])
    out[:, :, STATE_COUNT] = np.where(near, np.float32(1), out[:, :, STATE_COUNT])
    return out


def limited_signal(signal: np.ndarray, reprojection: np.ndarray) -> np.ndarray:
    """The frame's signal with its color scaled by the reprojection's firefly factor."""
    out = signal.copy()
    scale = reprojection[:, :, REPROJECTION_INPUT_SCALE]
    out[:, :, 0:3] = signal[:, :, 0:3] * scale[:, :, None]
    return out


def near_pixels(mask: np.ndarray, radius: int) -> np.ndarray:
    """``[H, W]`` bool: within ``radius`` pixels (Chebyshev distance) of a True of ``mask``
    (a square dilation, rows then columns)."""
    height, width = mask.shape
    rows = np.zeros_like(mask)
    padded = np.pad(mask, ((0, 0), (radius, radius)))
    for d in range(2 * radius + 1):
        rows |= padded[:, d : d + width]
    out = np.zeros_like(mask)
    padded = np.pad(rows, ((radius, radius), (0, 0)))
    for d in range(2 * radius + 1):
        out |= padded[d : d + height, :]
    return out


def reject_changes(
    signal: np.ndarray, reprojection: np.ndarray, params: TemporalParams
) -> np.ndarray:
    """Pass 1b: the input history dropped (n = 1) and the output's cut to
    `~TemporalParams.change_output_history` frames where the light changed: where the mean
    luminance of the frame's noisy color (its fireflies limited) over the `CHANGE_RADIUS`
    window differs from that of the reprojected previous output by more than
    `~TemporalParams.change_sigmas` standard errors of the noisy mean (a moving shadow, a
    light switched on: what depth and normals cannot see)."""
    if params.change_sigmas == 0:
        return reprojection
    return cut_changes(signal, reprojection, light_changed(signal, reprojection, params), params)


def light_changed(
    signal: np.ndarray, reprojection: np.ndarray, params: TemporalParams
) -> np.ndarray:
    """``[H, W]`` bool: the pixels whose light changed (`reject_changes`' test; none where
    `~TemporalParams.change_sigmas` is 0). It reads only the reprojection's channels that
    `reject_changes` and `drop_near_disocclusions` keep, so it holds after them too."""
    f32 = np.float32
    valid = reprojection[:, :, REPROJECTION_VALID] > f32(0.5)
    if params.change_sigmas == 0:
        return np.zeros_like(valid)
    # bounded, so that squares and window sums stay finite in float32
    top = f32(MAX_CHANGE_LUMINANCE)
    scale = reprojection[:, :, REPROJECTION_INPUT_SCALE]
    current = np.clip(luminance(signal[:, :, 0:3]) * scale, -top, top)
    previous = np.clip(luminance(reprojection[:, :, STATE_OUTPUT : STATE_OUTPUT + 3]), -top, top)
    mean, squares = _box(current), _box(current * current)
    mean_previous = _box(previous)
    side = f32(2 * CHANGE_RADIUS + 1)
    error = np.sqrt(np.maximum(squares - mean * mean, f32(0))) / side
    return (np.abs(mean - mean_previous) > f32(params.change_sigmas) * error) & valid


def cut_changes(
    signal: np.ndarray, reprojection: np.ndarray, changed: np.ndarray, params: TemporalParams
) -> np.ndarray:
    """The reprojection with the frame's own signal, n = 1 and the output's history cut to
    `~TemporalParams.change_output_history` frames where ``changed`` (`light_changed`)."""
    f32 = np.float32
    out = reprojection.copy()
    out[:, :, :SIGNAL_CHANNELS] = np.where(changed[:, :, None], signal, out[:, :, :SIGNAL_CHANNELS])
    out[:, :, STATE_COUNT] = np.where(changed, f32(1), out[:, :, STATE_COUNT])
    kept = np.minimum(out[:, :, REPROJECTION_OUTPUT_COUNT], f32(params.change_output_history))
    out[:, :, REPROJECTION_OUTPUT_COUNT] = np.where(
        changed, kept, out[:, :, REPROJECTION_OUTPUT_COUNT]
    )
    return out


def _box(image: np.ndarray) -> np.ndarray:
    """The mean of ``[H, W]`` over the `CHANGE_RADIUS` window (edges repeated; sums in
    row-major order, times the reciprocal of the count)."""
    r = CHANGE_RADIUS
    height, width = image.shape
    padded = np.pad(image, ((r, r), (r, r)), mode="edge")
    total = np.zeros_like(image)
    for dy in range(2 * r + 1):
        for dx in range(2 * r + 1):
            total = total + padded[dy : dy + height, dx : dx + width]
    return total * np.float32(1.0 / (2 * r + 1) ** 2)
