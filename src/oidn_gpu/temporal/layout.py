"""The temporal passes' channel layouts and their packing on the host (every backend's).

Images are host float32 arrays in fixed channel layouts, so a backend's kernels (WGSL,
Triton, torch) index them the same way:

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
* the reprojection ``[H, W, REPROJECTION_CHANNELS]`` (`oidn_gpu.temporal.passes`' pass 1):
  the accumulated signal (9), n (1), the previous temporal output reprojected (3), 1 where
  history was used else 0 (1), the output's history length (1), and the factor in (0, 1]
  by which the frame's color was limited as a firefly (1).
"""

from __future__ import annotations

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
# Input values are clamped to +-MAX_SIGNAL, so sums of four taps stay finite in float32.
MAX_SIGNAL = 1.0e30
LUMINANCE = (0.212671, 0.715160, 0.072169)  # OIDN's (core/color.h), as image.autoexposure


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
    state = np.zeros((*reprojection.shape[:2], STATE_CHANNELS), np.float32)
    state[:, :, : STATE_COUNT + 1] = reprojection[:, :, : STATE_COUNT + 1]
    state[:, :, STATE_OUTPUT_COUNT] = reprojection[:, :, REPROJECTION_OUTPUT_COUNT]
    state[:, :, STATE_OUTPUT : STATE_OUTPUT + 3] = np.nan_to_num(
        output[:, :, :3], nan=0.0, posinf=MAX_SIGNAL, neginf=-MAX_SIGNAL
    )
    return state


def history_fraction(reprojection: np.ndarray) -> float:
    """Fraction of pixels that kept their history in a `reproject` result."""
    return float(np.mean(reprojection[:, :, REPROJECTION_VALID] > 0.5))


def luminance(rgb: np.ndarray) -> np.ndarray:
    """OIDN's luminance of ``[H, W, 3]`` (``image.autoexposure``'s weights)."""
    f32 = np.float32
    r, g, b = LUMINANCE
    return f32(r) * rgb[:, :, 0] + f32(g) * rgb[:, :, 1] + f32(b) * rgb[:, :, 2]
