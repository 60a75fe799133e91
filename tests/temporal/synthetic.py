"""Synthetic animation sequences with exact motion, depth and a noise-free reference.

A procedural scene (a textured, lit plane with edges, and optionally a sphere moving in
front of it) evaluated analytically at 2x2 points per pixel, so the reference of every
frame is exact whatever the motion. The noisy color is the reference times Monte-Carlo-like
noise (a gamma-distributed sample mean of ``spp`` samples, a few fireflies), seeded per
frame; the albedo gets a little noise, the normal and depth none.

Kinds: ``"static"`` (only the noise changes), ``"pan"`` (the camera moves by a fractional
number of pixels per frame), ``"object"`` (a sphere crosses a static background:
disocclusion) and ``"contact"`` (the same sphere just in front of the background, 2-5%
nearer: a silhouette that the depth tolerance cannot tell from the surface behind it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

BACKGROUND_DEPTH = 10.0
OBJECT_DEPTH = 3.0
PAN_PX = (0.7, 0.3)  # camera motion per frame (the background moves by minus this)
OBJECT_PX = (2.5, 0.5)  # the sphere's motion per frame on screen
OBJECT_RADIUS = 11.0
CONTACT_DEPTH = 9.8  # the "contact" sphere's depth, just in front of the background


@dataclass(frozen=True)
class Frame:
    color: np.ndarray
    albedo: np.ndarray
    normal: np.ndarray
    depth: np.ndarray
    motion: np.ndarray
    reference: np.ndarray
    object_mask: np.ndarray  # pixels of the moving object (object sequences)
    disoccluded: np.ndarray  # background pixels that the object covered in the previous frame


def item(frame: Any, number: int | None = None, **change: Any) -> dict[str, Any]:
    """A frame (a `Frame` or a `TemporalFrame`) as `TemporalDenoiser.denoise` keywords and a
    `denoise_many` item: its images, motion, depth and ``number``; ``change`` replaces some."""
    return {
        "color": frame.color,
        "albedo": frame.albedo,
        "normal": frame.normal,
        "motion": frame.motion,
        "depth": frame.depth,
        "frame": number,
        **change,
    }


def _scene(x: np.ndarray, y: np.ndarray, t: int, kind: str, size: int):
    """Albedo, shading, normal, depth and object coverage at screen points (x, y)."""
    ox, oy = (PAN_PX[0] * t, PAN_PX[1] * t) if kind == "pan" else (0.0, 0.0)
    u, v = x + ox, y + oy
    checker = ((np.floor(u / 9) + np.floor(v / 9)) % 2) * 0.25
    base = 0.35 + 0.2 * np.sin(u * 0.31) * np.cos(v * 0.23) + checker
    albedo = np.stack([base, base * 0.8 + 0.1, base * 0.6 + 0.05], axis=-1)
    shading = 1.2 + 0.6 * np.sin(u * 0.05 + v * 0.04)
    normal = np.zeros((*x.shape, 3))
    normal[..., 2] = 1.0
    depth = BACKGROUND_DEPTH + 0.01 * v
    covered = np.zeros(x.shape, bool)
    if kind in ("object", "contact"):
        cx, cy = 8.0 + OBJECT_PX[0] * t, size * 0.45 + OBJECT_PX[1] * t
        dx, dy = (x - cx) / OBJECT_RADIUS, (y - cy) / OBJECT_RADIUS
        r2 = dx * dx + dy * dy
        covered = r2 < 1.0
        nz = np.sqrt(np.clip(1.0 - r2, 0.0, 1.0))
        sphere_normal = np.stack([dx, dy, nz], axis=-1)
        normal = np.where(covered[..., None], sphere_normal, normal)
        albedo = np.where(covered[..., None], np.array([0.8, 0.25, 0.1]), albedo)
        shading = np.where(covered, 0.4 + 1.6 * np.clip(nz - 0.3 * dx, 0, None), shading)
        bulge = OBJECT_RADIUS * (0.05 if kind == "object" else 0.005) * nz
        depth = np.where(
            covered, (OBJECT_DEPTH if kind == "object" else CONTACT_DEPTH) - bulge, depth
        )
    return albedo, shading, normal, depth, covered


def _render(t: int, kind: str, size: int):
    """Pixel averages over 2x2 points (albedo, radiance, normal), the centre's depth and
    coverage."""
    rows, cols = np.meshgrid(
        np.arange(size, dtype=np.float64), np.arange(size, dtype=np.float64), indexing="ij"
    )
    radiance = np.zeros((size, size, 3))
    albedo = np.zeros((size, size, 3))
    normal = np.zeros((size, size, 3))
    for sy in (-0.25, 0.25):
        for sx in (-0.25, 0.25):
            a, s, n, _, _ = _scene(cols + sx, rows + sy, t, kind, size)
            radiance += a * s[..., None] / 4
            albedo += a / 4
            normal += n / 4
    _, _, _, depth, covered = _scene(cols, rows, t, kind, size)
    return radiance, albedo, normal, depth, covered


def _motion(t: int, kind: str, size: int, covered: np.ndarray) -> np.ndarray:
    motion = np.zeros((size, size, 2))
    if kind == "pan":
        motion[..., 0], motion[..., 1] = PAN_PX
    elif kind in ("object", "contact"):
        motion[covered] = (-OBJECT_PX[0], -OBJECT_PX[1])
    return motion


def sequence(
    kind: str,
    frames: int = 8,
    size: int = 64,
    spp: int = 4,
    seed: int = 0,
    firefly_rate: float = 0.003,
):
    """The frames of one synthetic sequence (see the module docstring)."""
    out = []
    previous_cover = None
    for t in range(frames):
        radiance, albedo, normal, depth, covered = _render(t, kind, size)
        rng = np.random.default_rng([seed, t])
        gain = rng.gamma(spp, 1.0 / spp, (size, size, 1)) * rng.gamma(
            8 * spp, 1.0 / (8 * spp), (size, size, 3)
        )
        fireflies = rng.random((size, size, 1)) < firefly_rate
        gain = np.where(fireflies, gain * 25.0, gain)
        color = radiance * gain
        noisy_albedo = np.clip(albedo + rng.normal(0, 0.02, albedo.shape), 0, 1)
        disoccluded = np.zeros((size, size), bool)
        if previous_cover is not None:
            disoccluded = previous_cover & ~covered
        previous_cover = covered
        out.append(
            Frame(
                color=color.astype(np.float32),
                albedo=noisy_albedo.astype(np.float32),
                normal=normal.astype(np.float32),
                depth=depth.astype(np.float32),
                motion=_motion(t, kind, size, covered).astype(np.float32),
                reference=radiance.astype(np.float32),
                object_mask=covered,
                disoccluded=disoccluded,
            )
        )
    return out


def shifted_noise_sequence(frames: int, size: int, motion_px: tuple[float, float], seed: int):
    """A noise image under a camera moving by ``motion_px`` per frame (integers: rounded):
    ``(colors, motion)``, the backward motion ``+motion_px`` everywhere."""
    rng = np.random.default_rng(seed)
    base = rng.random((size + frames * 8, size + frames * 8, 3)).astype(np.float32)
    colors = []
    for t in range(frames):
        x0, y0 = round(motion_px[0] * t), round(motion_px[1] * t)
        colors.append(np.ascontiguousarray(base[y0 : y0 + size, x0 : x0 + size]))
    motion = np.empty((size, size, 2), np.float32)
    motion[..., 0], motion[..., 1] = motion_px
    return colors, motion


def run_passes(passes, frames, params, check=None):
    """Every frame through a backend's temporal ``passes`` with 0.9 times the reprojected
    color standing in for the denoiser: ``[(reprojection, output)]`` per frame.
    ``check(reprojection, next_state)``, if given, sees each frame's results."""
    from oidn_gpu.temporal import passes as tp

    state, prev_guide, results = None, None, []
    for f in frames:
        guide = tp.pack_guide(f.depth, f.albedo, f.normal)
        signal = tp.pack_signal(f.color, f.albedo, f.normal)
        if state is None:
            state, prev_guide = tp.empty_state(*f.color.shape[:2]), guide
        rep = passes.reproject(f.motion, guide, prev_guide, signal, state, params)
        out = passes.stabilize(rep[..., :3] * np.float32(0.9), rep, params)
        state, prev_guide = tp.next_state(rep, out), guide
        if check is not None:
            check(rep, state)
        results.append((rep, out))
    return results
