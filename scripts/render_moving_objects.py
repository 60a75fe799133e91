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
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import render_sequences as rs

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
        return Animation(lambda t: rs._orbit_origin(0.0), movers)
    if name == "objects_pan":
        return Animation(lambda t: rs._orbit_origin(-1.2 * (t - middle)), movers)
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
            "bsdf": rs._diffuse((0.9, 0.9, 0.9)),
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
        "sensor": {
            "type": "perspective",
            "fov": rs.FIELD_OF_VIEW_DEG,
            "fov_axis": "x",
            "to_world": rs.camera_transform(mi, anim.camera_origin(t)),
            "sampler": {"type": "independent", "sample_count": 1},
            "film": {
                "type": "hdrfilm",
                "width": width,
                "height": height,
                "rfilter": {"type": "box"},
                "pixel_format": "rgb",
            },
        },
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


def primary_hits(mi, scene, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """World positions (H, W, 3) seen through the pixel centres and the ray distances (H, W),
    inf where a ray leaves the scene (then the position is far along it)."""
    sensor = scene.sensors()[0]
    points = np.empty((height, width, 3), np.float64)
    dist = np.full((height, width), np.inf)
    for y in range(height):
        for x in range(width):
            film = mi.ScalarPoint2f((x + 0.5) / width, (y + 0.5) / height)
            ray, _ = sensor.sample_ray(0.0, 0.5, film, mi.ScalarPoint2f(0.5, 0.5))
            si = scene.ray_intersect(ray)
            if si.is_valid():
                points[y, x] = si.p
                dist[y, x] = si.t
            else:
                points[y, x] = np.asarray(ray.o) + 1.0e6 * np.asarray(ray.d)
    return points, dist


def project(mi, origin, points: np.ndarray, width: int, height: int):
    """Pixel coordinates (x right, y down, pixel centres at +0.5) of world points seen by the
    camera at ``origin`` (field of view across x), and their depth along its view axis."""
    world_to_camera = np.array(rs.camera_transform(mi, origin).inverse().matrix, np.float64)
    homogeneous = np.concatenate([points, np.ones((*points.shape[:-1], 1))], axis=-1)
    cam = homogeneous @ world_to_camera.T
    z = cam[..., 2]
    scale = 0.5 * width / math.tan(math.radians(rs.FIELD_OF_VIEW_DEG) / 2.0)
    # Mitsuba's camera space has +x to the image's left and +y up.
    sx = 0.5 * width - scale * cam[..., 0] / z
    sy = 0.5 * height - scale * cam[..., 1] / z
    return np.stack([sx, sy], axis=-1), z


def exact_motion(mi, anim: Animation, t: int, width: int, height: int) -> dict[str, np.ndarray]:
    """Backward and forward motion (H, W, 2, pixels, EXR coordinates), depth and object IDs
    of frame t."""
    scene = mi.load_dict(scene_dict(mi, anim, t, width, height, {"type": "path"}))
    points, dist = primary_hits(mi, scene, width, height)
    centres = np.stack(np.meshgrid(np.arange(width), np.arange(height)), axis=-1) + 0.5
    here, depth = project(mi, anim.camera_origin(t), points, width, height)
    hit = np.isfinite(dist)
    error = float(np.abs(here - centres)[hit].max()) if hit.any() else 0.0
    if error > 1e-3:
        raise RuntimeError(f"projection does not match Mitsuba's camera: {error:.2e} px off")
    ids = np.zeros((height, width), np.int32)
    for index, name in enumerate(MOVERS, start=1):
        alone = mi.load_dict(scene_dict(mi, anim, t, width, height, {"type": "path"}, only=name))
        _, mover_dist = primary_hits(mi, alone, width, height)
        ids[np.isfinite(mover_dist) & (np.abs(mover_dist - dist) < 1e-4 * (1 + dist))] = index
    out: dict[str, np.ndarray] = {}
    for key, other in (("backward", t - 1), ("forward", t + 1)):
        moved = points.copy()
        for index, name in enumerate(MOVERS, start=1):
            carry = anim.movers[name](other) @ np.linalg.inv(anim.movers[name](t))
            mask = ids == index
            h = np.concatenate([moved[mask], np.ones((int(mask.sum()), 1))], axis=-1)
            moved[mask] = (h @ carry.T)[:, :3]
        there, _ = project(mi, anim.camera_origin(other), moved, width, height)
        out[key] = there - here  # exactly 0 where neither the point nor the camera moves
    out["depth"] = np.where(hit, depth, rs.BACKGROUND_DEPTH)
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
    for i in range(args.frames):
        number = i + 1
        started = time.perf_counter()
        values = render(mi, anim, i, args, aov, args.spp, offset + i)
        frame = {
            "color": values[..., 0:3],
            "alpha": np.ones(values.shape[:2], np.float32),
            "albedo": values[..., 3:6],
            "normal": values[..., 6:9],
        }
        motion = exact_motion(mi, anim, i, args.width, args.height)
        planes = rs.frame_planes(frame, motion)
        planes.append((f"{rs.VIEW_LAYER}.IndexOB", ("X",), motion["ids"], "half"))
        rs.write_exr(out / name / f"frame.{number:04d}.exr", planes)
        reference = render(
            mi,
            anim,
            i,
            args,
            {"type": "path", "max_depth": 6},
            args.reference_spp,
            100000 + offset + i,
        )[..., 0:3]
        rs.write_exr(
            out / name / "reference" / f"frame.{number:04d}.exr",
            [("", ("R", "G", "B"), reference, "half")],
        )
        print(
            f"{name} frame {number}/{args.frames}: {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
    meta = {
        "sequence": name,
        "renderer": f"Mitsuba {mi.__version__} {mi.variant()}",
        "script": "scripts/render_moving_objects.py",
        "size": [args.width, args.height],
        "frames": args.frames,
        "first_frame": 1,
        "spp": args.spp,
        "reference_spp": args.reference_spp,
        "seeds": {"color": f"{offset} + frame index", "reference": f"{100000 + offset} + index"},
        "layers": {
            "color": f"{rs.VIEW_LAYER}.Combined",
            "albedo": f"{rs.VIEW_LAYER}.Denoising Albedo",
            "normal": f"{rs.VIEW_LAYER}.Denoising Normal",
            "motion": f"{rs.VIEW_LAYER}.Vector",
            "depth": f"{rs.VIEW_LAYER}.Depth",
            "object_id": f"{rs.VIEW_LAYER}.IndexOB (0 static, 1 cube, 2 flying sphere)",
        },
        "motion_convention": "Blender Cycles Vector: pixels, y up; X,Y = previous - here, "
        "Z,W = here - next",
        "reference": "reference/frame.NNNN.exr (R, G, B)",
    }
    (out / name / "sequence.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=rs.DEFAULT_OUT)
    parser.add_argument("--width", type=int, default=96)
    parser.add_argument("--height", type=int, default=64)
    parser.add_argument("--frames", type=int, default=10)
    parser.add_argument("--spp", type=int, default=4, help="samples per pixel of the noisy frames")
    parser.add_argument("--reference-spp", type=int, default=2048)
    parser.add_argument(
        "--sequences",
        default=",".join(SEQUENCE_NAMES),
        help="comma-separated: " + ", ".join(SEQUENCE_NAMES),
    )
    args = parser.parse_args(argv)
    import mitsuba as mi

    mi.set_variant("scalar_rgb")
    for name in [s.strip() for s in args.sequences.split(",") if s.strip()]:
        render_sequence(mi, name, args.out, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
