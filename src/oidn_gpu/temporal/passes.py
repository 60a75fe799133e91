"""The temporal passes: reprojection with history rejection, accumulation, and the clamped
output blend; `TemporalParams` and the NumPy implementation every backend is tested against.

Two passes run per frame around the usual denoise (`oidn_gpu.TemporalDenoiser` runs the
loop). Images are host float32 arrays in fixed channel layouts, so a backend's kernels
(WGSL, torch) index them the same way:

* ``motion`` ``[H, W, 2]``: backward motion in pixels: pixel ``(x, y)`` of frame t was at
  ``(x + mx, y + my)`` in frame t-1 (pixel centres at integer coordinates here).
* ``guide`` ``[H, W, GUIDE_CHANNELS]``: depth, normal (3), albedo (3), and 1 where any of
  them was NaN (which never agrees) else 0: what decides whether history may be used
  (`TemporalParams.use_depth` and friends say which parts exist). Infinite values are
  clamped to +-`MAX_SIGNAL`, so a background at infinite depth agrees with itself.
* ``signal`` ``[H, W, SIGNAL_CHANNELS]``: the frame's noisy color, albedo, normal (zeros for
  an image not given): what is accumulated.
* ``state`` ``[H, W, STATE_CHANNELS]``: the history after a frame: accumulated signal (9),
  its history length (1; 0 = no history), the temporal output (3), its history length (1),
  unused (2).

`reproject` (pass 1) reads the previous state at ``(x + mx, y + my)``: of the four
bilinear taps, each counts only when it lies on screen and its guide agrees with the pixel's
(`tap_tests`: depth within `TemporalParams.depth_tolerance` relative for the accumulated
input, and also normals within `~TemporalParams.normal_tolerance` of ``1 - cos`` and albedo
within `~TemporalParams.albedo_tolerance` for the output history; without depth, normal and
albedo decide both); the bilinear weights of those that count are renormalized, per group
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

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from oidn_gpu.errors import InvalidArgumentError

GUIDE_CHANNELS = 8
SIGNAL_CHANNELS = 9
STATE_CHANNELS = 16
REPROJECTION_CHANNELS = 16
# Channel offsets, shared by the kernels (WGSL constants, torch slices).
STATE_COUNT = 9  # history length in the state, n in the reprojection
STATE_OUTPUT = 10  # temporal output (state), reprojected previous output (reprojection)
REPROJECTION_VALID = 13
STATE_OUTPUT_COUNT = 13  # output history length (state)
REPROJECTION_OUTPUT_COUNT = 14  # its new value (reprojection)
REPROJECTION_INPUT_SCALE = 15  # the factor the frame's color was limited by (reprojection)
GATHERED = 14  # state channels reprojected
GUIDE_UNKNOWN = 7  # 1: the guide had a NaN here
# A pixel whose on-screen, agreeing taps weigh less than this has no history: half the
# bilinear footprint, so that a pixel on a disocclusion's edge does not take its history
# from one far tap (measured: tests/data/sequences/orbit, docs/benchmarks.md).
MIN_TAP_WEIGHT = 0.5
# Input values are clamped to +-MAX_SIGNAL, so sums of four taps stay finite in float32.
MAX_SIGNAL = 1.0e30
# Zero normals (background, no geometry) are told apart from real ones by this length.
MIN_NORMAL_LENGTH = 1.0e-3
CLAMPS = ("minmax", "variance", "none")
CHANGE_RADIUS = 2  # the light-change test's window is 5x5
MAX_CHANGE_LUMINANCE = 1.0e18  # its luminances are clamped to +-this
MAX_DISOCCLUSION_MARGIN = 64  # pixels
LUMINANCE = (0.212671, 0.715160, 0.072169)  # OIDN's (core/color.h), as image.autoexposure


@dataclass(frozen=True)
class TemporalParams:
    """The temporal mode's parameters (OIDN-style names).

    Attributes:
        history: frames of noisy input averaged at most (1: none, per-frame input).
        output_blend: the least weight of the current denoised frame in the output blend,
            in (0, 1] (1: no output blend).
        clamp: ``"minmax"``, ``"variance"`` or ``"none"``: how the reprojected output is
            clamped to the current denoised frame's neighbourhood.
        clamp_radius: the neighbourhood is ``(2 r + 1)^2`` pixels (1: 3x3).
        clamp_gamma: standard deviations of the ``"variance"`` clamp.
        depth_tolerance: relative depth difference beyond which history is rejected.
        normal_tolerance: ``1 - cos`` of the normals' angle beyond which it is rejected.
        albedo_tolerance: largest albedo channel difference for which it is kept.
        cut_threshold: fraction of pixels rejected at which a frame counts as a camera
            cut and the history restarts.
        change_sigmas: the noisy input's history is dropped where the frame's local mean
            differs from the reprojected output's by more than this many standard errors
            (lighting changes; 0: off).
        change_output_history: where that test fires, the output blend's history is cut
            to this many frames (the denoised frame weighs at least one over it) rather
            than dropped, so that a false alarm of the test on noise does not flicker
            (1: dropped).
        firefly_ratio: a new color brighter than this many times its pixel's history is
            scaled down to it before the network sees it, so that a firefly in one frame
            does not become a blob: the accumulated input where it holds 2 frames or more,
            else the previous temporal output reprojected (0: off).
        subpixel_tolerance: the noisy input is accumulated only where the motion is
            within this many pixels of whole pixels (0.5: everywhere); resampled noise is
            correlated, which the network keeps as detail.
        disocclusion_margin: the noisy input's history is also dropped within this many
            pixels of a pixel whose history was rejected (a disocclusion, an edge coming
            on screen), so that the network sees a newly visible surface beside input of
            the same noise level rather than much cleaner accumulated surroundings (it
            then denoises it less); the output blend keeps its history there (0: off).
        use_depth, use_normal, use_albedo: which guide channels exist (set per sequence
            from the images given).
    """

    history: int = 8
    output_blend: float = 0.3
    clamp: str = "variance"
    clamp_radius: int = 2
    clamp_gamma: float = 3.0
    depth_tolerance: float = 0.05
    normal_tolerance: float = 0.1
    albedo_tolerance: float = 0.1
    cut_threshold: float = 0.9
    change_sigmas: float = 2.0
    change_output_history: float = 1.5
    firefly_ratio: float = 8.0
    subpixel_tolerance: float = 0.05
    disocclusion_margin: int = 16
    use_depth: bool = True
    use_normal: bool = True
    use_albedo: bool = True

    names: ClassVar[tuple[str, ...]] = (
        "history",
        "output_blend",
        "clamp",
        "clamp_radius",
        "clamp_gamma",
        "depth_tolerance",
        "normal_tolerance",
        "albedo_tolerance",
        "cut_threshold",
        "subpixel_tolerance",
        "firefly_ratio",
        "change_sigmas",
        "change_output_history",
        "disocclusion_margin",
    )

    def __post_init__(self) -> None:
        _check_int("history", self.history, 1, 1 << 20)
        _check_int("clamp_radius", self.clamp_radius, 0, 8)
        _check_int("disocclusion_margin", self.disocclusion_margin, 0, MAX_DISOCCLUSION_MARGIN)
        if not (isinstance(self.output_blend, (int, float)) and self.output_blend > 0):
            raise InvalidArgumentError(
                f"temporal output_blend is {self.output_blend!r}; expected a number in (0, 1]"
            )
        if self.clamp not in CLAMPS:
            raise InvalidArgumentError(
                f"temporal clamp {self.clamp!r} is not one of {', '.join(map(repr, CLAMPS))}"
            )
        for name, top in (
            ("output_blend", 1.0),
            ("clamp_gamma", 100.0),
            ("depth_tolerance", 1e30),
            ("normal_tolerance", 2.0),
            ("albedo_tolerance", 1e30),
            ("cut_threshold", 1.0),
            ("change_sigmas", 100.0),
            ("firefly_ratio", 1e30),
            ("subpixel_tolerance", 0.5),
            ("change_output_history", 1e6),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
                raise InvalidArgumentError(f"temporal {name} is {value!r}; expected a number")
            if not 0.0 <= float(value) <= top:
                raise InvalidArgumentError(
                    f"temporal {name} is {value!r}; expected a number in [0, {top:g}]"
                )
        if self.change_output_history < 1:
            raise InvalidArgumentError(
                f"temporal change_output_history is {self.change_output_history!r}; expected "
                "a number of frames >= 1"
            )

    def with_guides(self, *, depth: bool, normal: bool, albedo: bool) -> TemporalParams:
        """These parameters with the guide channels that a sequence has."""
        return dataclasses.replace(self, use_depth=depth, use_normal=normal, use_albedo=albedo)


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer))
        or not (low <= value <= high)
    ):
        raise InvalidArgumentError(
            f"temporal {name} is {value!r}; expected an integer in [{low}, {high}]"
        )


# --- packing (host, shared by every backend) ------------------------------------------------


def pack_signal(color: np.ndarray, albedo: np.ndarray | None, normal: np.ndarray | None):
    """The ``signal`` layout of one frame: color, albedo, normal, each broadcast to 3
    channels, NaN -> 0 and clamped to +-`MAX_SIGNAL`."""
    height, width = color.shape[:2]
    signal = np.zeros((height, width, SIGNAL_CHANNELS), np.float32)
    for offset, image in ((0, color), (3, albedo), (6, normal)):
        if image is not None:
            signal[:, :, offset : offset + 3] = _rgb(image)
    np.nan_to_num(signal, copy=False, nan=0.0, posinf=MAX_SIGNAL, neginf=-MAX_SIGNAL)
    np.clip(signal, -MAX_SIGNAL, MAX_SIGNAL, out=signal)
    return signal


def pack_guide(depth: np.ndarray | None, albedo: np.ndarray | None, normal: np.ndarray | None):
    """The ``guide`` layout of one frame (zeros for what is not given)."""
    source = (
        next(a for a in (depth, albedo, normal) if a is not None)
        if any(a is not None for a in (depth, albedo, normal))
        else None
    )
    if source is None:
        raise InvalidArgumentError("a temporal guide needs depth, albedo or normal")
    height, width = np.asarray(source).shape[:2]
    guide = np.zeros((height, width, GUIDE_CHANNELS), np.float32)
    if depth is not None:
        d = np.asarray(depth, np.float32)
        guide[:, :, 0] = d if d.ndim == 2 else d[:, :, 0]
    if normal is not None:
        guide[:, :, 1:4] = _rgb(normal)
    if albedo is not None:
        guide[:, :, 4:7] = _rgb(albedo)
    values = guide[:, :, :GUIDE_UNKNOWN]
    guide[:, :, GUIDE_UNKNOWN] = np.isnan(values).any(axis=2)
    np.nan_to_num(values, copy=False, nan=0.0, posinf=MAX_SIGNAL, neginf=-MAX_SIGNAL)
    np.clip(values, -MAX_SIGNAL, MAX_SIGNAL, out=values)
    return guide


def _rgb(image: np.ndarray) -> np.ndarray:
    arr = np.asarray(image, np.float32)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    arr = arr[:, :, :3]
    return np.broadcast_to(arr, (*arr.shape[:2], 3)) if arr.shape[2] == 1 else arr


def empty_state(height: int, width: int) -> np.ndarray:
    """The state before the first frame: no history anywhere."""
    return np.zeros((height, width, STATE_CHANNELS), np.float32)


def next_state(reprojection: np.ndarray, output: np.ndarray) -> np.ndarray:
    """The state after a frame: its accumulated signal and n, and its temporal output."""
    state = np.zeros(reprojection.shape[:2] + (STATE_CHANNELS,), np.float32)
    state[:, :, : STATE_COUNT + 1] = reprojection[:, :, : STATE_COUNT + 1]
    state[:, :, STATE_OUTPUT_COUNT] = reprojection[:, :, REPROJECTION_OUTPUT_COUNT]
    state[:, :, STATE_OUTPUT : STATE_OUTPUT + 3] = np.nan_to_num(
        output[:, :, :3], nan=0.0, posinf=MAX_SIGNAL, neginf=-MAX_SIGNAL
    )
    return state


def history_fraction(reprojection: np.ndarray) -> float:
    """Fraction of pixels that kept their history in a `reproject` result."""
    return float(np.mean(reprojection[:, :, REPROJECTION_VALID] > 0.5))


# --- the NumPy passes (the oracle) ----------------------------------------------------------


def _depth_agrees(guide: np.ndarray, prev: np.ndarray, params: TemporalParams) -> np.ndarray:
    """Whether each pixel's depth and the tap's previous depth agree (``[H, W]`` bool)."""
    f32 = np.float32
    d, p = guide[:, :, 0], prev[:, :, 0]
    near = np.abs(d - p) <= f32(params.depth_tolerance) * np.maximum(np.abs(d), np.abs(p))
    return near | (d == p)


def _aux_agrees(guide: np.ndarray, prev: np.ndarray, params: TemporalParams) -> np.ndarray:
    """Whether each pixel's normal and albedo and the tap's previous ones agree (those
    given; ``[H, W]`` bool)."""
    f32 = np.float32
    ok = np.ones(guide.shape[:2], bool)
    if params.use_normal:
        n, p = guide[:, :, 1:4], prev[:, :, 1:4]
        ln = np.sqrt(_dot3(n, n))
        lp = np.sqrt(_dot3(p, p))
        aligned = _dot3(n, p) >= f32(1.0 - params.normal_tolerance) * (ln * lp)
        ok &= aligned & ((ln > f32(MIN_NORMAL_LENGTH)) == (lp > f32(MIN_NORMAL_LENGTH)))
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
    (that and normal and albedo). Renderers' albedo and normal are as noisy as the color:
    with depth, they only decide the output history, whose loss costs little."""
    f32 = np.float32
    known = (guide[:, :, GUIDE_UNKNOWN] == f32(0)) & (prev[:, :, GUIDE_UNKNOWN] == f32(0))
    aux = _aux_agrees(guide, prev, params)
    if not params.use_depth:
        geometry = known & aux
        return geometry, geometry
    geometry = known & _depth_agrees(guide, prev, params)
    return geometry, geometry & aux


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
    divisor = _by_group(*(np.where(v, t, f32(1)) for v, t in zip((valid, valid_out), totals)))
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


def luminance(rgb: np.ndarray) -> np.ndarray:
    """OIDN's luminance of ``[H, W, 3]`` (``image.autoexposure``'s weights)."""
    f32 = np.float32
    r, g, b = LUMINANCE
    return f32(r) * rgb[:, :, 0] + f32(g) * rgb[:, :, 1] + f32(b) * rgb[:, :, 2]


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
    out = np.zeros(fx.shape + (GATHERED,), np.float32)
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
