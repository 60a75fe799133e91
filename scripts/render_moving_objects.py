"""Render animation test sequences with objects that move inside the frame (Mitsuba 3).

The scene of ``scripts/render_sequences.py`` (checkered floor, back wall, spheres and a box
under an area light) at 96 x 64 px, with a static glass sphere (its caustic reaches the
floor only through sampled light paths: fireflies at a few samples per pixel) and two
objects that move every frame:

* a textured cube (an orange and white checkerboard on each face) that slides across the
  scene and turns about its vertical axis, uncovering (disoccluding) what was behind it;
* a small sphere that flies between the light and the floor, so that its shadow moves over
  static surfaces.

Two sequences: ``objects`` (the camera stands still) and ``objects_pan`` (the camera orbits
while the objects move). Each frame is written as ``render_sequences.py`` writes them
(Blender-style multi-layer EXR: ``ViewLayer.Combined`` at ``--spp`` samples with a seed
changing every frame, ``Denoising Albedo``, ``Denoising Normal``, ``Vector`` in Cycles'
convention and ``Depth``), with the converged reference (``--reference-spp``) in
``reference/``, an object-ID pass ``ViewLayer.IndexOB`` (0: static, 1: the cube, 2: the
flying sphere) and ``sequence.json``.

The motion is exact: a primary ray through every pixel centre finds the surface point and
which object it lies on (by rendering each moving object alone); the point is carried by
the inverse of that object's transform in this frame and its transform in the other frame,
and projected with that frame's camera.

    python scripts/render_moving_objects.py                 # tests/data/sequences
    python scripts/render_moving_objects.py --width 192 --height 128 --out /tmp/objects

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

import render_sequences as rs
import sequence_render as sr

SEQUENCE_NAMES = ("objects", "objects_pan")
MOVERS = ("cube", "flyer")  # object IDs 1 and 2


@dataclass(frozen=True)
class Animation:
    """The camera's position and each moving object's to-world matrix at frame t."""

    camera_origin: Callable[[float], tuple[float, float, float]]
    movers: dict[str, Callable[[float], np.ndarray]]


def _cube_matrix(mi, t: float, middle: float) -> np.ndarray:
    x = 0.22 * (t - middle)  # scene units a frame: about 4 px at 96 px
    transform = (
        mi.ScalarTransform4f().translate([x, 0.3, 0.75]).rotate([0, 1, 0], 14.0 * t).scale(0.3)
    )
    return np.array(transform.matrix, np.float64)


def _flyer_matrix(mi, t: float, middle: float) -> np.ndarray:
    s = t - middle
    centre = [0.6 - 0.16 * s, 1.35 + 0.05 * s, 0.55 + 0.06 * s]
    return np.array(mi.ScalarTransform4f().translate(centre).scale(0.22).matrix, np.float64)


def animation(mi, name: str, frames: int) -> Animation:
    middle = (frames - 1) / 2.0
    movers = {
        "cube": lambda t: _cube_matrix(mi, t, middle),
        "flyer": lambda t: _flyer_matrix(mi, t, middle),
    }
    if name == "objects":
        return Animation(lambda t: sr.orbit_origin(0.0), movers)
    if name == "objects_pan":
        return Animation(lambda t: sr.orbit_origin(-1.2 * (t - middle)), movers)
    raise ValueError(f"unknown sequence {name!r}; expected one of {', '.join(SEQUENCE_NAMES)}")


def mover_shapes(mi, anim: Animation, t: float) -> dict:
    checker = {
        "type": "checkerboard",
        "color0": {"type": "rgb", "value": [0.85, 0.35, 0.05]},
        "color1": {"type": "rgb", "value": [0.85, 0.85, 0.8]},
        "to_uv": mi.ScalarTransform3f().scale([4.0, 4.0]),
    }
    return {
        "cube": {
            "type": "cube",
            "to_world": mi.ScalarTransform4f(anim.movers["cube"](t)),
            "bsdf": {"type": "diffuse", "reflectance": checker},
        },
        "flyer": {
            "type": "sphere",
            "to_world": mi.ScalarTransform4f(anim.movers["flyer"](t)),
            "bsdf": rs.diffuse((0.9, 0.9, 0.9)),
        },
    }


def scene_dict(
    mi,
    anim: Animation,
    t: float,
    width: int,
    height: int,
    integrator: dict,
    *,
    only: str | None = None,
) -> dict:
    """The scene at frame t; ``only`` keeps just that moving object (for its ID pass)."""
    d: dict = {
        "type": "scene",
        "integrator": integrator,
        "sensor": sr.sensor(mi, anim.camera_origin(t), width, height),
    }
    movers = mover_shapes(mi, anim, t)
    if only is not None:
        d[only] = movers[only]
        return d
    d.update(rs.static_shapes(mi))
    d["glass"] = {
        "type": "sphere",
        "center": [1.15, 0.28, 1.1],
        "radius": 0.28,
        "bsdf": {"type": "dielectric", "int_ior": 1.5},
    }
    d["env"] = {"type": "constant", "radiance": {"type": "rgb", "value": [0.25, 0.3, 0.4]}}
    d.update(movers)
    return d


def exact_motion(mi, anim: Animation, t: int, width: int, height: int) -> dict[str, np.ndarray]:
    """Backward and forward motion (H, W, 2, pixels, EXR coordinates), depth and object IDs
    of frame t."""
    scene = mi.load_dict(scene_dict(mi, anim, t, width, height, {"type": "path"}))
    points, dist = sr.primary_hits(mi, scene, width, height)
    here, depth = sr.seen_at(mi, anim.camera_origin(t), points, dist, width, height)
    ids = np.zeros((height, width), np.int32)
    for index, name in enumerate(MOVERS, start=1):
        alone = mi.load_dict(scene_dict(mi, anim, t, width, height, {"type": "path"}, only=name))
        _, mover_dist = sr.primary_hits(mi, alone, width, height)
        ids[sr.on_object(dist, mover_dist)] = index
    out: dict[str, np.ndarray] = {}
    for key, other in (("backward", t - 1), ("forward", t + 1)):
        moved = points.copy()
        for index, name in enumerate(MOVERS, start=1):
            carry = anim.movers[name](other) @ np.linalg.inv(anim.movers[name](t))
            mask = ids == index
            h = np.concatenate([moved[mask], np.ones((int(mask.sum()), 1))], axis=-1)
            moved[mask] = (h @ carry.T)[:, :3]
        there, _ = sr.project(mi, anim.camera_origin(other), moved, width, height)
        out[key] = there - here  # exactly 0 where neither the point nor the camera moves
    out["depth"] = depth
    out["ids"] = ids
    return out


def render(mi, anim, t: int, args, integrator: dict, spp: int, seed: int) -> np.ndarray:
    scene = mi.load_dict(scene_dict(mi, anim, t, args.width, args.height, integrator))
    return np.array(mi.render(scene, spp=spp, seed=seed), np.float32)


def render_sequence(mi, name: str, out: Path, args: argparse.Namespace) -> dict:
    anim = animation(mi, name, args.frames)
    offset = 5000 + 1000 * SEQUENCE_NAMES.index(name)
    aov = {
        "type": "aov",
        "aovs": "albedo:albedo,nn:sh_normal",
        "integrator": {"type": "path", "max_depth": 6},
    }

    def render_one(i: int) -> tuple[list[sr.Plane], np.ndarray]:
        values = render(mi, anim, i, args, aov, args.spp, offset + i)
        frame = {
            "color": values[..., 0:3],
            "alpha": np.ones(values.shape[:2], np.float32),
            "albedo": values[..., 3:6],
            "normal": values[..., 6:9],
        }
        motion = exact_motion(mi, anim, i, args.width, args.height)
        planes = sr.frame_planes(frame, motion)
        planes.append((f"{sr.VIEW_LAYER}.IndexOB", ("X",), motion["ids"], "half"))
        path_tracer = {"type": "path", "max_depth": 6}
        reference = render(mi, anim, i, args, path_tracer, args.reference_spp, 100000 + offset + i)
        return planes, reference[..., 0:3]

    sr.write_frames(out / name, args.frames, render_one)
    meta = sr.sequence_meta(
        mi,
        name,
        (args.width, args.height),
        args,
        offset,
        script="scripts/render_moving_objects.py",
        object_id=f"{sr.VIEW_LAYER}.IndexOB (0 static, 1 cube, 2 flying sphere)",
    )
    sr.write_meta(out / name, meta)
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=96)
    parser.add_argument("--height", type=int, default=64)
    sr.add_arguments(parser, SEQUENCE_NAMES, frames=10)
    return sr.render_all(parser.parse_args(argv), render_sequence)


if __name__ == "__main__":
    raise SystemExit(main())
