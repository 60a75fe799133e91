"""Temporal stability of a denoised sequence, against its converged reference (NumPy).

Motion is in the canonical form of `oidn_gpu.image.motion`: H x W x 2 float32 backward
motion in pixels, ``(x, y)`` in frame t lay at ``(x + mx, y + my)`` in frame t-1 (x right,
y down).

* `warp` carries frame t-1 into frame t by the backward motion (bilinear, edge taps
  clamped) and says which pixels it could carry (their previous position lies on screen and
  their motion is finite).
* `disocclusion_mask` finds the pixels of frame t that were not visible in frame t-1:
  off screen, or hidden behind something else (the previous frame's forward motion does not
  lead back to them, or, without forward motion, their depth disagrees).
* `temporal_instability`: the mean over frames of the root-mean-square of
  ``(D_t - warp(D_t-1)) - (R_t - warp(R_t-1))`` over the pixels carried, relative to the
  reference's own root-mean-square: the frame-to-frame change the denoised sequence has and
  the converged reference does not (flicker). A sequence equal to its reference scores 0.
* `relative_l2` and `psnr` per frame against the reference, and `sequence_metrics`, which
  also gives both restricted to the disoccluded pixels (where history cannot help and ghosts
  show).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Forward-backward consistency: a pixel whose round trip t -> t-1 -> t misses it by more
# than this many pixels was hidden in frame t-1.
ROUND_TRIP_TOLERANCE_PX = 0.5
# Without forward motion: relative depth difference above which a pixel counts as hidden.
DEPTH_TOLERANCE = 0.05


def _check_motion(image: np.ndarray, motion: np.ndarray) -> None:
    if motion.ndim != 3 or motion.shape[2] != 2 or motion.shape[:2] != image.shape[:2]:
        raise ValueError(
            f"motion has shape {motion.shape}; expected {(*image.shape[:2], 2)} "
            "(H x W x 2, backward motion in pixels) to match the image"
        )


def sample_bilinear(image: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``image`` (H x W or H x W x C) at pixel coordinates ``x``, ``y`` (pixel (i, j) at
    x = j, y = i), bilinear, taps outside the image clamped to its edge. NaN positions give 0."""
    h, w = image.shape[:2]
    x = np.nan_to_num(x, nan=0.0, posinf=w - 1, neginf=0.0)
    y = np.nan_to_num(y, nan=0.0, posinf=h - 1, neginf=0.0)
    x = np.clip(x, 0.0, w - 1)
    y = np.clip(y, 0.0, h - 1)
    x0 = np.floor(x).astype(np.intp)
    y0 = np.floor(y).astype(np.intp)
    x1 = np.minimum(x0 + 1, w - 1)
    y1 = np.minimum(y0 + 1, h - 1)
    fx = (x - x0).astype(np.float32)
    fy = (y - y0).astype(np.float32)
    if image.ndim == 3:
        fx = fx[..., None]
        fy = fy[..., None]
    top = image[y0, x0] * (1 - fx) + image[y0, x1] * fx
    bottom = image[y1, x0] * (1 - fx) + image[y1, x1] * fx
    return (top * (1 - fy) + bottom * fy).astype(np.float32)


def previous_positions(motion: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each pixel of frame t lay in frame t-1, in pixel coordinates (x, y)."""
    h, w = motion.shape[:2]
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    return xs + motion[..., 0], ys + motion[..., 1]


def warp(previous: np.ndarray, motion: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Frame t-1 carried into frame t by the backward motion.

    Returns:
        ``(warped, valid)``: the warped image (float32, shape of ``previous``) and an H x W
        bool mask of the pixels whose previous position lies inside the image (within half a
        pixel of its outer pixel centres) and whose motion is finite. Invalid pixels hold
        the clamped edge sample (or 0 for non-finite motion); do not use them.
    """
    _check_motion(previous, motion)
    x, y = previous_positions(motion)
    h, w = previous.shape[:2]
    finite = np.isfinite(motion).all(axis=-1)
    with np.errstate(invalid="ignore"):
        inside = (x >= -0.5) & (x <= w - 0.5) & (y >= -0.5) & (y <= h - 0.5)
    warped = sample_bilinear(np.asarray(previous, np.float32), x, y)
    warped[~finite] = 0.0
    return warped, finite & inside


def disocclusion_mask(
    motion: np.ndarray,
    *,
    previous_forward: np.ndarray | None = None,
    depth: np.ndarray | None = None,
    previous_depth: np.ndarray | None = None,
) -> np.ndarray:
    """H x W bool: the pixels of frame t that frame t-1 did not show.

    A pixel is disoccluded when its previous position is off screen or its motion is not
    finite; with ``previous_forward`` (frame t-1's forward motion, pixels, to frame t) when
    the previous frame's surface at that position does not move back onto it (it belonged
    to something in front); else with both depths when they differ by more than
    `DEPTH_TOLERANCE` relative (a camera moving along its axis changes depths too, so the
    forward motion is the better test).
    """
    _, valid = warp(np.zeros(motion.shape[:2], np.float32), motion)
    hidden = ~valid
    x, y = previous_positions(motion)
    h, w = motion.shape[:2]
    xi = np.clip(np.nan_to_num(np.rint(x)), 0, w - 1).astype(np.intp)
    yi = np.clip(np.nan_to_num(np.rint(y)), 0, h - 1).astype(np.intp)
    if previous_forward is not None:
        _check_motion(motion[..., 0], previous_forward)
        ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
        back_x = x + previous_forward[yi, xi, 0]
        back_y = y + previous_forward[yi, xi, 1]
        with np.errstate(invalid="ignore"):
            miss = np.hypot(back_x - xs, back_y - ys) > ROUND_TRIP_TOLERANCE_PX
        hidden |= miss | ~np.isfinite(back_x)
    elif depth is not None and previous_depth is not None:
        before = previous_depth[yi, xi]
        with np.errstate(invalid="ignore", divide="ignore"):
            hidden |= ~(np.abs(before - depth) <= DEPTH_TOLERANCE * np.abs(depth))
    return hidden


def _rms(values: np.ndarray, mask: np.ndarray | None = None) -> float:
    if mask is not None:
        values = values[mask]
    if values.size == 0:
        return float("nan")
    return float(np.sqrt(np.mean(np.square(values, dtype=np.float64))))


def relative_l2(output: np.ndarray, reference: np.ndarray, mask: np.ndarray | None = None) -> float:
    """``||output - reference|| / ||reference||`` over the pixels of ``mask`` (all if None)."""
    denominator = _rms(reference, mask)
    return _rms(output - reference, mask) / denominator if denominator > 0 else float("nan")


def psnr(output: np.ndarray, reference: np.ndarray, mask: np.ndarray | None = None) -> float:
    """Peak signal-to-noise ratio in dB, the peak being the reference's largest value
    (1 for display-range images; HDR references use their own peak)."""
    peak = max(float(np.max(reference)), 1e-12)
    error = _rms(output - reference, mask)
    if math.isnan(error):
        return float("nan")
    return float("inf") if error == 0 else 20.0 * math.log10(peak / error)


def frame_instability(
    output: np.ndarray,
    previous_output: np.ndarray,
    reference: np.ndarray,
    previous_reference: np.ndarray,
    motion: np.ndarray,
) -> float:
    """The root-mean-square flicker of one frame pair relative to the reference's RMS."""
    warped_output, valid = warp(previous_output, motion)
    warped_reference, _ = warp(previous_reference, motion)
    flicker = (output - warped_output) - (reference - warped_reference)
    denominator = _rms(reference, valid)
    return _rms(flicker, valid) / denominator if denominator > 0 else float("nan")


def temporal_instability(
    outputs: Sequence[np.ndarray],
    references: Sequence[np.ndarray],
    motions: Sequence[np.ndarray],
) -> float:
    """Mean of `frame_instability` over frames 1..N-1 (``motions[t]`` is frame t's
    backward motion; ``motions[0]`` is not used)."""
    if not len(outputs) == len(references) == len(motions):
        raise ValueError(
            f"got {len(outputs)} outputs, {len(references)} references and {len(motions)} "
            "motions; expected one of each per frame"
        )
    if len(outputs) < 2:
        raise ValueError(f"temporal instability needs at least 2 frames, got {len(outputs)}")
    values = [
        frame_instability(outputs[t], outputs[t - 1], references[t], references[t - 1], motions[t])
        for t in range(1, len(outputs))
    ]
    return float(np.mean(values))


@dataclass(frozen=True)
class SequenceMetrics:
    """What `sequence_metrics` measures: per-frame values and their summaries."""

    instability: float
    relative_l2: tuple[float, ...]
    psnr_db: tuple[float, ...]
    disoccluded_psnr_db: float  # all frames' disoccluded pixels together; NaN if none
    disoccluded_pixels: tuple[int, ...]

    @property
    def mean_relative_l2(self) -> float:
        return float(np.mean(self.relative_l2))

    @property
    def mean_psnr_db(self) -> float:
        return float(np.mean(self.psnr_db))


def sequence_metrics(
    outputs: Sequence[np.ndarray],
    references: Sequence[np.ndarray],
    motions: Sequence[np.ndarray],
    disoccluded: Sequence[np.ndarray | None],
) -> SequenceMetrics:
    """Temporal instability, per-frame relative L2 and PSNR, and the PSNR of the disoccluded
    pixels of all frames together (``disoccluded[t]``, from `disocclusion_mask`; None for
    frame 0), its peak the largest reference value of the sequence."""
    rel = tuple(relative_l2(o, r) for o, r in zip(outputs, references, strict=True))
    db = tuple(psnr(o, r) for o, r in zip(outputs, references, strict=True))
    errors: list[np.ndarray] = []
    counts: list[int] = []
    for output, reference, mask in zip(outputs, references, disoccluded, strict=True):
        counts.append(0 if mask is None else int(mask.sum()))
        if counts[-1]:
            errors.append((output - reference)[mask].reshape(-1))
    if errors:
        peak = max(max(float(np.max(r)) for r in references), 1e-12)
        error = _rms(np.concatenate(errors))
        dis_db = float("inf") if error == 0 else 20.0 * math.log10(peak / error)
    else:
        dis_db = float("nan")
    return SequenceMetrics(
        instability=temporal_instability(outputs, references, motions),
        relative_l2=rel,
        psnr_db=db,
        disoccluded_psnr_db=dis_db,
        disoccluded_pixels=tuple(counts),
    )
