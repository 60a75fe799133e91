"""Render the animation test sequences with Mitsuba 3, with exact motion vectors.

Three sequences of a small diffuse scene (a checkered floor, a back wall, a few spheres and
a box under an area light):

* ``static``: the camera and every object stand still; only the sampler's seed changes.
* ``orbit``: the camera orbits the scene's centre (the background moves about 1 pixel a
  frame at 64 px).
* ``moving``: the camera stands still and a sphere moves across the scene, uncovering
  (disoccluding) the background behind it.

Each frame is written the way Blender Cycles writes a multi-layer EXR (half floats, ZIP):
``ViewLayer.Combined`` (R, G, B, A: the noisy beauty at ``--spp`` samples, its seed changing
every frame), ``ViewLayer.Denoising Albedo`` (R, G, B), ``ViewLayer.Denoising Normal``
(X, Y, Z, world space), ``ViewLayer.Vector`` (X, Y, Z, W) and ``ViewLayer.Depth`` (Z, 32-bit
float: the distance along the camera's view axis, 1e10 where a ray leaves the scene).
The converged reference (``--reference-spp`` samples, other seeds) goes to
``reference/frame.NNNN.exr`` (R, G, B), and ``sequence.json`` describes the sequence.

The Vector pass follows Cycles (``intern/cycles/kernel/geom/primitive.h``,
``primitive_motion_vector``): in raster pixels, whose origin is the bottom-left corner with
y pointing up (Cycles ``camera.cpp``: raster y runs from the view plane's bottom), X, Y =
position in the previous frame - position in this frame, and Z, W = position in this
frame - position in the next frame. In an EXR's pixel coordinates (y down) the backward
motion (where this pixel was in the previous frame, relative to it) is therefore (X, -Y)
and the forward motion (where it will be in the next frame) is (-Z, W).

The motion is exact: Mitsuba has no motion pass, so a primary ray through every pixel
centre finds the surface point, which is carried by the inverse of its object's transform
in this frame and its transform in the other frame, and projected with that frame's camera.

    python scripts/render_sequences.py                      # tests/data/sequences (64x64)
    python scripts/render_sequences.py --size 256 --frames 24 --out /tmp/sequences_256

Needs ``pip install mitsuba`` (the ``render`` extra); runs in Mitsuba's ``scalar_rgb``
variant, so it needs no LLVM or GPU.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sequence_render as sr

SEQUENCE_NAMES = ("static", "orbit", "moving")


@dataclass(frozen=True)
class Animation:
    """Where the camera is and how the moving sphere lies at a (possibly fractional) frame."""

    camera_origin: Callable[[float], tuple[float, float, float]]
    mover_center: Callable[[float], tuple[float, float, float]] | None


def animation(name: str, frames: int) -> Animation:
    """The sequence's motion; speeds are in scene units (or degrees) per frame, so a larger
    benchmark sequence moves as many pixels per frame relative to its size."""
    if name == "static":
        return Animation(lambda t: sr.orbit_origin(0.0), None)
    if name == "orbit":
        step = 1.0  # degrees a frame: the background moves about 1.2 px a frame at 64 px
        return Animation(lambda t: sr.orbit_origin(-step * (t - frames / 2.0)), None)
    if name == "moving":
        speed, middle = 0.2, (frames - 1) / 2.0  # scene units a frame: about 3 px at 64 px
        return Animation(
            lambda t: sr.orbit_origin(0.0), lambda t: (speed * (t - middle), 0.42, 0.9)
        )
    raise ValueError(f"unknown sequence {name!r}; expected one of {', '.join(SEQUENCE_NAMES)}")


# --- the scene ----------------------------------------------------------------------------------


def diffuse(rgb: tuple[float, float, float]) -> dict:
    return {"type": "diffuse", "reflectance": {"type": "rgb", "value": list(rgb)}}


def static_shapes(mi) -> dict:
    """Every shape that never moves."""
    transform = mi.ScalarTransform4f
    checker = {
        "type": "checkerboard",
        "color0": {"type": "rgb", "value": [0.15, 0.15, 0.17]},
        "color1": {"type": "rgb", "value": [0.75, 0.72, 0.65]},
        "to_uv": mi.ScalarTransform3f().scale([12.0, 12.0]),
    }
    return {
        "floor": {
            "type": "rectangle",
            "to_world": transform().rotate([1, 0, 0], -90).scale(6.0),
            "bsdf": {"type": "diffuse", "reflectance": checker},
        },
        "wall": {
            "type": "rectangle",
            "to_world": transform().translate([0, 3.0, -2.5]).scale(6.0),
            "bsdf": diffuse((0.55, 0.6, 0.7)),
        },
        "red": {
            "type": "sphere",
            "center": [-0.9, 0.5, -0.6],
            "radius": 0.5,
            "bsdf": diffuse((0.8, 0.15, 0.1)),
        },
        "box": {
            "type": "cube",
            "to_world": transform().translate([0.9, 0.4, -0.7]).rotate([0, 1, 0], 30).scale(0.4),
            "bsdf": diffuse((0.2, 0.3, 0.8)),
        },
        "small": {
            "type": "sphere",
            "center": [0.1, 0.25, 0.2],
            "radius": 0.25,
            "bsdf": diffuse((0.9, 0.85, 0.2)),
        },
        "light": {
            "type": "rectangle",
            "to_world": transform().translate([0.5, 3.2, 1.0]).rotate([1, 0, 0], 90).scale(0.8),
            "emitter": {"type": "area", "radiance": {"type": "rgb", "value": [18.0, 17.0, 15.0]}},
        },
    }


def mover_shape(mi, center: tuple[float, float, float]) -> dict:
    return {
        "type": "sphere",
        "center": list(center),
        "radius": 0.42,
        "bsdf": diffuse((0.2, 0.75, 0.3)),
    }


def scene_dict(
    mi, anim: Animation, t: float, size: int, integrator: dict, *, with_static: bool = True
) -> dict:
    d: dict = {
        "type": "scene",
        "integrator": integrator,
        "sensor": sr.sensor(mi, anim.camera_origin(t), size, size),
    }
    if with_static:
        d.update(static_shapes(mi))
        d["env"] = {"type": "constant", "radiance": {"type": "rgb", "value": [0.25, 0.3, 0.4]}}
    if anim.mover_center is not None:
        d["mover"] = mover_shape(mi, anim.mover_center(t))
    return d


# --- exact motion -------------------------------------------------------------------------------


def exact_motion(mi, anim: Animation, t: int, size: int) -> dict[str, np.ndarray]:
    """Backward and forward motion (H, W, 2, pixels, EXR coordinates) and depth of frame t."""
    scene = mi.load_dict(scene_dict(mi, anim, t, size, {"type": "path"}))
    points, dist = sr.primary_hits(mi, scene, size, size)
    here, depth = sr.seen_at(mi, anim.camera_origin(t), points, dist, size, size)
    on_mover = np.zeros((size, size), bool)
    if anim.mover_center is not None:
        only = mi.load_dict(scene_dict(mi, anim, t, size, {"type": "path"}, with_static=False))
        _, mover_dist = sr.primary_hits(mi, only, size, size)
        on_mover = sr.on_object(dist, mover_dist)
    out: dict[str, np.ndarray] = {}
    for key, other in (("backward", t - 1), ("forward", t + 1)):
        moved = points.copy()
        if anim.mover_center is not None:
            shift = np.subtract(anim.mover_center(other), anim.mover_center(t))
            moved[on_mover] += shift
        there, _ = sr.project(mi, anim.camera_origin(other), moved, size, size)
        # Relative to the projected position (within 1e-3 px of the pixel centre, checked
        # by `seen_at`), so that a point and camera that do not move get exactly 0.
        out[key] = there - here
    out["depth"] = depth
    return out


# --- rendering and writing ----------------------------------------------------------------------


def render_frame(mi, anim: Animation, t: int, size: int, spp: int, seed: int) -> dict:
    integrator = {
        "type": "aov",
        "aovs": "albedo:albedo,nn:sh_normal",
        "integrator": {"type": "path", "max_depth": 6},
    }
    scene = mi.load_dict(scene_dict(mi, anim, t, size, integrator))
    values = np.array(mi.render(scene, spp=spp, seed=seed), np.float32)
    # The aov integrator's channels with an "rgb" film: R, G, B, albedo.(R, G, B), nn.(X, Y, Z).
    if values.shape[-1] != 9:
        raise RuntimeError(f"Mitsuba rendered {values.shape[-1]} channels; expected 9")
    # Every pixel sees a surface or the environment: the alpha is 1, as Cycles writes it.
    return {
        "color": values[..., 0:3],
        "alpha": np.ones(values.shape[:2], np.float32),
        "albedo": values[..., 3:6],
        "normal": values[..., 6:9],
    }


def render_reference(mi, anim: Animation, t: int, size: int, spp: int, seed: int) -> np.ndarray:
    scene = mi.load_dict(scene_dict(mi, anim, t, size, {"type": "path", "max_depth": 6}))
    return np.array(mi.render(scene, spp=spp, seed=seed), np.float32)[..., 0:3]


def render_sequence(mi, name: str, out: Path, args: argparse.Namespace) -> dict:
    anim = animation(name, args.frames)
    offset = 1000 * (1 + SEQUENCE_NAMES.index(name))

    def render(i: int) -> tuple[list[sr.Plane], np.ndarray]:
        frame = render_frame(mi, anim, i, args.size, args.spp, seed=offset + i)
        motion = exact_motion(mi, anim, i, args.size)
        seed = 100000 + offset + i
        reference = render_reference(mi, anim, i, args.size, args.reference_spp, seed=seed)
        return sr.frame_planes(frame, motion), reference

    sr.write_frames(out / name, args.frames, render)
    meta = sr.sequence_meta(mi, name, (args.size, args.size), args, offset)
    sr.write_meta(out / name, meta)
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=64, help="width and height in pixels")
    sr.add_arguments(parser, SEQUENCE_NAMES, frames=12)
    return sr.render_all(parser.parse_args(argv), render_sequence)


if __name__ == "__main__":
    raise SystemExit(main())
