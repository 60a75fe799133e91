"""The temporal passes: reprojection with history rejection, accumulation, and the clamped
output blend: the NumPy implementation every backend is tested against.

Two passes run per frame around the usual denoise (`oidn_gpu.TemporalDenoiser` runs the
loop) on host float32 arrays in the channel layouts of `oidn_gpu.temporal.layout` (motion,
guide, signal, state, reprojection), which a backend's kernels (WGSL, Triton, torch) index
the same way. This module is the temporal mode's face for the backends (imported as
``tp``): it also re-exports the layouts and their packing (`layout`), `TemporalParams`
(`params`) and the rejection steps of pass 1 (`rejection`).

`reproject` (pass 1) reads the previous state at ``(x + mx, y + my)``: of the four
bilinear taps, each counts only when it lies on screen and its guide agrees with the pixel's
(`tap_tests`: depth within `TemporalParams.depth_tolerance` relative for the accumulated
input, and also normals within `~TemporalParams.normal_tolerance` of ``1 - cos`` and albedo
within `~TemporalParams.albedo_tolerance` for the output history, and with depth, where
the tap's depth moved by more than `SURFACE_DEPTH`, normals within `SILHOUETTE_NORMAL_COS`
for it (a silhouette just in front of a surface); without depth, normal and albedo decide
both); the bilinear weights of those that count are renormalized, per group
of channels; when all four count, the sharper Catmull-Rom interpolation of the 4x4 taps
around them is used instead, clamped to the four taps' range. Non-finite or huge motion,
and a weight sum under `MIN_TAP_WEIGHT`, reject the history of the pixel (disocclusion,
off screen). Where the motion is whole pixels (within
`~TemporalParams.subpixel_tolerance`), the accumulated signal is
``lerp(history, signal, 1 / n)`` with ``n = min(history length + 1, history)``: a running
mean over at most `TemporalParams.history` frames, exponential after that; elsewhere it is
the frame's own signal (n = 1): resampled noise is spatially correlated, and the network
would keep it as detail. Wherever there is history the new color is first limited to
`~TemporalParams.firefly_ratio` times its luminance (the accumulated input's where it holds
2 frames or more, else the reprojected previous output's), so that a firefly of one frame
does not reach the network whole. Its output, ``[H, W, REPROJECTION_CHANNELS]``: the
accumulated signal (9), n (1), the previous temporal output reprojected (3), 1 where history
was used else 0 (1), the output's history length ``min(previous + 1, 1 / output_blend)``
(1; 1 where rejected), and the factor in (0, 1] by which the frame's color was limited as
a firefly (1). `reproject` is `gather` followed by `reject_changes`,
which drops the input history and cuts the output's to
`~TemporalParams.change_output_history` frames where the frame's local mean luminance
(fireflies limited) departs from the reprojected output's by more than
`~TemporalParams.change_sigmas` standard errors: light that changed on still geometry (a
moving shadow), which depth cannot see, and then `drop_near_disocclusions`, which drops
the noisy input's history (fireflies limited) within `~TemporalParams.disocclusion_margin`
pixels of a pixel without history.

`stabilize` (pass 2) takes the frame denoised from the accumulated signal and blends the
reprojected previous output into it, clamped to the neighbourhood of the pixel in the
denoised frame (``clamp``: ``"minmax"`` of the ``(2 r + 1)^2`` window, ``"variance"``:
mean +- `~TemporalParams.clamp_gamma` standard deviations, ``"none"``) so that history
that no longer fits (lighting changes, missed disocclusions) cannot ghost. The current
frame weighs one over the output's history length: at least ``output_blend``, and 1
(the denoised frame itself) where the history was rejected.

Every value is finite after each pass: non-finite input colors are sanitized as OIDN does
(NaN -> 0) and clamped to +-`MAX_SIGNAL`, and a non-finite denoised pixel is passed through
with no history mixed in.
"""

from __future__ import annotations

import numpy as np

from oidn_gpu.temporal.layout import (
    GATHERED,
    GUIDE_CHANNELS,
    GUIDE_UNKNOWN,
    LUMINANCE,
    MAX_SIGNAL,
    REPROJECTION_CHANNELS,
    REPROJECTION_INPUT_SCALE,
    REPROJECTION_OUTPUT_COUNT,
    REPROJECTION_VALID,
    SIGNAL_CHANNELS,
    STATE_CHANNELS,
    STATE_COUNT,
    STATE_OUTPUT,
    STATE_OUTPUT_COUNT,
    empty_state,
    history_fraction,
    luminance,
    next_state,
    pack_guide,
    pack_signal,
)
from oidn_gpu.temporal.params import CLAMPS, MAX_DISOCCLUSION_MARGIN, TemporalParams
from oidn_gpu.temporal.rejection import (
    CHANGE_RADIUS,
    MAX_CHANGE_LUMINANCE,
    cut_changes,
    drop_input_history,
    drop_near_disocclusions,
    light_changed,
    limited_signal,
    near_disocclusions,
    near_pixels,
    reject_changes,
)

__all__ = [
    "CHANGE_RADIUS",
    "CLAMPS",
    "GATHERED",
    "GUIDE_CHANNELS",
    "GUIDE_UNKNOWN",
    "LUMINANCE",
    "MAX_CHANGE_LUMINANCE",
    "MAX_DISOCCLUSION_MARGIN",
    "MAX_SIGNAL",
    "MIN_NORMAL_LENGTH",
    "MIN_TAP_WEIGHT",
    "REPROJECTION_CHANNELS",
    "REPROJECTION_INPUT_SCALE",
    "REPROJECTION_OUTPUT_COUNT",
    "REPROJECTION_VALID",
    "SIGNAL_CHANNELS",
    "SILHOUETTE_NORMAL_COS",
    "STATE_CHANNELS",
    "STATE_COUNT",
    "STATE_OUTPUT",
    "STATE_OUTPUT_COUNT",
    "SURFACE_DEPTH",
    "NumpyTemporalPasses",
    "TemporalParams",
    "catmull_rom_weights",
    "cut_changes",
    "drop_input_history",
    "drop_near_disocclusions",
    "empty_state",
    "gather",
    "history_fraction",
    "light_changed",
    "limited_signal",
    "luminance",
    "motion_is_usable",
    "near_disocclusions",
    "near_pixels",
    "neighbourhood_bounds",
    "next_state",
    "pack_guide",
    "pack_signal",
    "reject_changes",
    "reproject",
    "stabilize",
    "tap_tests",
]

# A pixel whose on-screen, agreeing taps weigh less than this has no history: half the
# bilinear footprint, so that a pixel on a disocclusion's edge does not take its history
# from one far tap (measured: tests/data/sequences/orbit, docs/benchmarks.md).
MIN_TAP_WEIGHT = 0.5
# Zero normals (background, no geometry) are told apart from real ones by this length.
MIN_NORMAL_LENGTH = 1.0e-3
# With depth, a tap whose depth is within SURFACE_DEPTH (relative) of the pixel's is its own
# surface; one farther away (yet within `TemporalParams.depth_tolerance`) serves the output
# history only where the normals are within SILHOUETTE_NORMAL_COS (60 degrees): a silhouette
# in front of a surface just behind it, which the depth tolerance cannot tell apart (the
# glass sphere's edge over the floor under a pan, tests/data/sequences/objects_pan,
# docs/benchmarks.md). The renderers' noisy normals never drop the history of a surface
# whose depth stays put.
SURFACE_DEPTH = 0.005
SILHOUETTE_NORMAL_COS = 0.5


def _depth_agrees(guide: np.ndarray, prev: np.ndarray, tolerance: np.float32) -> np.ndarray:
    """Whether each pixel's depth and the tap's previous depth are within ``tolerance``
    relative (``[H, W]`` bool)."""
    d, p = guide[:, :, 0], prev[:, :, 0]
    near = np.abs(d - p) <= tolerance * np.maximum(np.abs(d), np.abs(p))
    return near | (d == p)


def _normals_agree(guide: np.ndarray, prev: np.ndarray, cos_min: np.float32) -> np.ndarray:
    """Whether each pixel's normal and the tap's previous one are within the angle whose
    cosine is ``cos_min``, and both or neither are zero (``[H, W]`` bool)."""
    n, p = guide[:, :, 1:4], prev[:, :, 1:4]
    ln = np.sqrt(_dot3(n, n))
    lp = np.sqrt(_dot3(p, p))
    aligned = _dot3(n, p) >= cos_min * (ln * lp)
    small = np.float32(MIN_NORMAL_LENGTH)
    return aligned & ((ln > small) == (lp > small))


def _aux_agrees(guide: np.ndarray, prev: np.ndarray, params: TemporalParams) -> np.ndarray:
    """Whether each pixel's normal and albedo and the tap's previous ones agree (those
    given; ``[H, W]`` bool)."""
    f32 = np.float32
    ok = np.ones(guide.shape[:2], bool)
    if params.use_normal:
        ok &= _normals_agree(guide, prev, f32(1.0 - params.normal_tolerance))
    if params.use_albedo:
        a, p = guide[:, :, 4:7], prev[:, :, 4:7]
        diff = np.maximum(
            np.maximum(np.abs(a[:, :, 0] - p[:, :, 0]), np.abs(a[:, :, 1] - p[:, :, 1])),
            np.abs(a[:, :, 2] - p[:, :, 2]),
        )
        ok &= diff <= f32(params.albedo_tolerance)
    return ok


def tap_tests(guide: np.ndarray, prev: np.ndarray, params: TemporalParams):
    """``(geometry, output)`` ``[H, W]`` bool: whether a tap's history may be used for the
    accumulated input (depth where given, else normal and albedo) and for the output
    (that and normal and albedo; with depth, also the normals where the depth moved by
    more than `SURFACE_DEPTH`: `SILHOUETTE_NORMAL_COS`). Renderers' albedo and normal are
    as noisy as the color: with depth, they only decide the output history, whose loss
    costs little."""
    f32 = np.float32
    known = (guide[:, :, GUIDE_UNKNOWN] == f32(0)) & (prev[:, :, GUIDE_UNKNOWN] == f32(0))
    aux = _aux_agrees(guide, prev, params)
    if not params.use_depth:
        geometry = known & aux
        return geometry, geometry
    geometry = known & _depth_agrees(guide, prev, f32(params.depth_tolerance))
    surface = _depth_agrees(guide, prev, f32(SURFACE_DEPTH))
    facing = _normals_agree(guide, prev, f32(SILHOUETTE_NORMAL_COS))
    return geometry, geometry & aux & (surface | facing)


def _dot3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a[:, :, 0] * b[:, :, 0] + a[:, :, 1] * b[:, :, 1] + a[:, :, 2] * b[:, :, 2]


def motion_is_usable(motion: np.ndarray) -> np.ndarray:
    """Where the motion is finite and lands within an image-size distance of the pixel."""
    height, width = motion.shape[:2]
    limit = np.float32(height + width)
    with np.errstate(invalid="ignore"):
        return (np.abs(motion[:, :, 0]) <= limit) & (np.abs(motion[:, :, 1]) <= limit)


def catmull_rom_weights(t: np.ndarray) -> tuple[np.ndarray, ...]:
    """The Catmull-Rom weights of the taps at -1, 0, 1, 2 for a fraction ``t`` (float32)."""
    f32 = np.float32
    t2 = t * t
    return (
        t * (f32(-0.5) + t * (f32(1) - f32(0.5) * t)),
        f32(1) + t2 * (f32(-2.5) + f32(1.5) * t),
        t * (f32(0.5) + t * (f32(2) - f32(1.5) * t)),
        t2 * (f32(-0.5) + f32(0.5) * t),
    )


def reproject(
    motion: np.ndarray,
    guide: np.ndarray,
    prev_guide: np.ndarray,
    signal: np.ndarray,
    prev_state: np.ndarray,
    params: TemporalParams,
) -> np.ndarray:
    """Pass 1 (see the module docstring): the ``[H, W, REPROJECTION_CHANNELS]`` result
    (`gather`, then `reject_changes`, then `drop_near_disocclusions`)."""
    gathered = gather(motion, guide, prev_guide, signal, prev_state, params)
    return drop_near_disocclusions(signal, reject_changes(signal, gathered, params), params)


def gather(
    motion: np.ndarray,
    guide: np.ndarray,
    prev_guide: np.ndarray,
    signal: np.ndarray,
    prev_state: np.ndarray,
    params: TemporalParams,
) -> np.ndarray:
    """Pass 1a: the previous state reprojected, rejected and accumulated."""
    height, width = motion.shape[:2]
    f32 = np.float32
    usable = motion_is_usable(motion)
    rows, cols = np.meshgrid(
        np.arange(height, dtype=f32), np.arange(width, dtype=f32), indexing="ij"
    )
    px = cols + np.where(usable, motion[:, :, 0], f32(0))
    py = rows + np.where(usable, motion[:, :, 1], f32(0))
    x0, y0 = np.floor(px), np.floor(py)
    fx, fy = px - x0, py - y0
    x0i, y0i = x0.astype(np.int64), y0.astype(np.int64)
    taps = (
        (0, 0, (f32(1) - fx) * (f32(1) - fy)),
        (1, 0, fx * (f32(1) - fy)),
        (0, 1, (f32(1) - fx) * fy),
        (1, 1, fx * fy),
    )
    totals = [np.zeros((height, width), f32), np.zeros((height, width), f32)]
    taken = [0, 0]
    gathered = np.zeros((height, width, GATHERED), f32)
    low = np.full((height, width, GATHERED), np.inf, f32)
    high = np.full((height, width, GATHERED), -np.inf, f32)
    for dx, dy, weight in taps:
        xs, ys = x0i + dx, y0i + dy
        inside = (xs >= 0) & (xs < width) & (ys >= 0) & (ys < height)
        xc, yc = np.clip(xs, 0, width - 1), np.clip(ys, 0, height - 1)
        prev = prev_state[yc, xc, :GATHERED]
        base = usable & inside & (prev[:, :, STATE_COUNT] > f32(0))
        oks = [base & test for test in tap_tests(guide, prev_guide[yc, xc], params)]
        ws = [np.where(ok, weight, f32(0)) for ok in oks]
        for group in (0, 1):
            totals[group] = totals[group] + ws[group]
            taken[group] = taken[group] + oks[group].astype(np.int32)
        gathered = gathered + _by_group(ws[0], ws[1]) * prev
        low, high = np.minimum(low, prev), np.maximum(high, prev)
    valid, valid_out = (t >= f32(MIN_TAP_WEIGHT) for t in totals)
    divisor = _by_group(
        *(np.where(v, t, f32(1)) for v, t in zip((valid, valid_out), totals, strict=True))
    )
    history = gathered / divisor
    # All four taps agree: the sharper Catmull-Rom of the 4x4 taps around them, clamped to
    # the four taps' range (so its negative lobes cannot ring).
    cubic = _catmull_rom(prev_state, x0i, y0i, fx, fy)
    cubic = np.minimum(np.maximum(cubic, low), high)
    history = np.where(_by_group(taken[0] == 4, taken[1] == 4), cubic, history)
    return _accumulate(signal, history, valid, valid_out, fx, fy, params)


def _accumulate(signal, history, valid, valid_out, fx, fy, params) -> np.ndarray:
    """The reprojection from the gathered history: the signal accumulated, n, the
    previous output, the validity flags and the output's history length."""
    f32 = np.float32
    height, width = valid.shape
    # The noisy input is accumulated only where the motion is whole pixels (static
    # scenes): resampled noise is correlated, and the network keeps it as detail.
    tol = f32(params.subpixel_tolerance)
    whole = (np.minimum(fx, f32(1) - fx) <= tol) & (np.minimum(fy, f32(1) - fy) <= tol)
    accumulates = valid & whole
    count = np.minimum(history[:, :, STATE_COUNT] + f32(1), f32(params.history))
    count = np.where(accumulates, count, f32(1))
    alpha = f32(1) / count
    acc = history[:, :, :SIGNAL_CHANNELS]
    scale = _firefly_scale(signal, history, valid, valid_out, accumulates, params)
    signal = signal.copy()
    signal[:, :, 0:3] = signal[:, :, 0:3] * scale[:, :, None]
    acc = acc + (signal - acc) * alpha[:, :, None]
    acc = np.where((accumulates & (count > f32(1)))[:, :, None], acc, signal)
    out = np.zeros((height, width, REPROJECTION_CHANNELS), f32)
    out[:, :, :SIGNAL_CHANNELS] = acc
    out[:, :, STATE_COUNT] = count
    out[:, :, STATE_OUTPUT : STATE_OUTPUT + 3] = np.where(
        valid_out[:, :, None], history[:, :, STATE_OUTPUT : STATE_OUTPUT + 3], f32(0)
    )
    out[:, :, REPROJECTION_VALID] = valid.astype(f32)
    out_count = np.minimum(
        history[:, :, STATE_OUTPUT_COUNT] + f32(1), f32(1) / f32(max(params.output_blend, 1e-6))
    )
    out[:, :, REPROJECTION_OUTPUT_COUNT] = np.where(valid_out, out_count, f32(1))
    out[:, :, REPROJECTION_INPUT_SCALE] = scale
    return out


def _by_group(signal_part: np.ndarray, output_part: np.ndarray) -> np.ndarray:
    """``[H, W, GATHERED]``: the first per signal channel and its count, the second per
    output channel and its count."""
    return np.concatenate(
        [
            np.repeat(signal_part[:, :, None], STATE_OUTPUT, axis=2),
            np.repeat(output_part[:, :, None], GATHERED - STATE_OUTPUT, axis=2),
        ],
        axis=2,
    )


def _firefly_scale(signal, history, valid, valid_out, accumulates, params) -> np.ndarray:
    """``[H, W]``: the factor that brings the frame's color down to ``firefly_ratio`` times
    its history's luminance (1 where it is not brighter, or has no history): the
    accumulated input where it accumulates over at least 2 frames of history, else the
    reprojected previous output where the output's history is kept."""
    f32 = np.float32
    if params.firefly_ratio == 0:
        return np.ones(valid.shape, f32)
    l_in = luminance(signal[:, :, 0:3])
    inputs = accumulates & (history[:, :, STATE_COUNT] >= f32(2))
    guide = np.where(
        inputs,
        luminance(history[:, :, 0:3]),
        luminance(history[:, :, STATE_OUTPUT : STATE_OUTPUT + 3]),
    )
    limit = f32(params.firefly_ratio) * guide
    clip = (inputs | valid_out) & (limit > f32(0)) & (l_in > limit)
    return np.where(clip, limit / np.where(clip, l_in, f32(1)), f32(1)).astype(f32)


def _catmull_rom(state, x0, y0, fx, fy) -> np.ndarray:
    """The 4x4 Catmull-Rom interpolation of the state's `GATHERED` channels at ``(x0 + fx,
    y0 + fy)``, coordinates clamped to the image (rows outer, columns inner)."""
    height, width = state.shape[:2]
    wx, wy = catmull_rom_weights(fx), catmull_rom_weights(fy)
    out = np.zeros((*fx.shape, GATHERED), np.float32)
    for j in range(4):
        yc = np.clip(y0 + (j - 1), 0, height - 1)
        for i in range(4):
            xc = np.clip(x0 + (i - 1), 0, width - 1)
            out = out + (wy[j] * wx[i])[:, :, None] * state[yc, xc, :GATHERED]
    return out


def neighbourhood_bounds(
    denoised: np.ndarray, params: TemporalParams
) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` per pixel and channel of the clamp window in ``denoised`` ``[H, W, 3]``
    (edge pixels repeated past the border; window sums in row-major order)."""
    r = params.clamp_radius
    height, width = denoised.shape[:2]
    padded = np.pad(denoised, ((r, r), (r, r), (0, 0)), mode="edge")
    windows = [
        padded[dy : dy + height, dx : dx + width]
        for dy in range(2 * r + 1)
        for dx in range(2 * r + 1)
    ]
    if params.clamp == "variance":
        f32 = np.float32
        total = np.zeros_like(denoised)
        squares = np.zeros_like(denoised)
        for window in windows:
            total = total + window
            squares = squares + window * window
        inv = f32(1.0 / len(windows))
        mean = total * inv
        sigma = np.sqrt(np.maximum(squares * inv - mean * mean, f32(0)))
        spread = f32(params.clamp_gamma) * sigma
        return mean - spread, mean + spread
    low, high = windows[0], windows[0]
    for window in windows[1:]:
        low, high = np.minimum(low, window), np.maximum(high, window)
    return low, high


def stabilize(denoised: np.ndarray, reprojection: np.ndarray, params: TemporalParams) -> np.ndarray:
    """Pass 2 (see the module docstring): the temporal output ``[H, W, 3]`` float32."""
    f32 = np.float32
    den = np.ascontiguousarray(denoised[:, :, :3], dtype=f32)
    finite = np.isfinite(den)
    safe = np.where(finite, den, f32(0))
    history = reprojection[:, :, STATE_OUTPUT : STATE_OUTPUT + 3]
    if params.clamp != "none":
        low, high = neighbourhood_bounds(safe, params)
        history = np.minimum(np.maximum(history, low), high)
    beta = f32(1) / reprojection[:, :, REPROJECTION_OUTPUT_COUNT]
    out = history + (safe - history) * beta[:, :, None]
    out = np.where((beta >= f32(1))[:, :, None], safe, out)  # no history: exactly the frame
    return np.where(finite, out, den).astype(f32)


class NumpyTemporalPasses:
    """The temporal passes on host arrays with NumPy (the reference backend's; the oracle)."""

    name = "numpy"

    def reproject(self, motion, guide, prev_guide, signal, prev_state, params):
        return reproject(motion, guide, prev_guide, signal, prev_state, params)

    def stabilize(self, denoised, reprojection, params):
        return stabilize(denoised, reprojection, params)

    def close(self) -> None:
        pass
