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
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from oidn_gpu.image.motion import cycles_vector

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "tests" / "data" / "sequences"
SEQUENCE_NAMES = ("static", "orbit", "moving")
VIEW_LAYER = "ViewLayer"
BACKGROUND_DEPTH = 1.0e10  # what Blender writes in the Depth pass where nothing is hit
FIELD_OF_VIEW_DEG = 45.0
TARGET = (0.0, 0.55, 0.0)


@dataclass(frozen=True)
class Animation:
    """Where the camera is and how the moving sphere lies at a (possibly fractional) frame."""

    camera_origin: Callable[[float], tuple[float, float, float]]
    mover_center: Callable[[float], tuple[float, float, float]] | None


def _orbit_origin(angle_deg: float) -> tuple[float, float, float]:
    radius, height = 4.6, 1.9
    a = math.radians(angle_deg)
    return (radius * math.sin(a), height, radius * math.cos(a))


def animation(name: str, frames: int) -> Animation:
    """The sequence's motion; speeds are in scene units (or degrees) per frame, so a larger
    benchmark sequence moves as many pixels per frame relative to its size."""
    if name == "static":
        return Animation(lambda t: _orbit_origin(0.0), None)
    if name == "orbit":
        step = 1.0  # degrees a frame: the background moves about 1.2 px a frame at 64 px
        return Animation(lambda t: _orbit_origin(-step * (t - frames / 2.0)), None)
    if name == "moving":
        speed, middle = 0.2, (frames - 1) / 2.0  # scene units a frame: about 3 px at 64 px
        return Animation(lambda t: _orbit_origin(0.0), lambda t: (speed * (t - middle), 0.42, 0.9))
    raise ValueError(f"unknown sequence {name!r}; expected one of {', '.join(SEQUENCE_NAMES)}")


# --- the scene ----------------------------------------------------------------------------------


def _diffuse(rgb: tuple[float, float, float]) -> dict:
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
            "bsdf": _diffuse((0.55, 0.6, 0.7)),
        },
        "red": {
            "type": "sphere",
            "center": [-0.9, 0.5, -0.6],
            "radius": 0.5,
            "bsdf": _diffuse((0.8, 0.15, 0.1)),
        },
        "box": {
            "type": "cube",
            "to_world": transform().translate([0.9, 0.4, -0.7]).rotate([0, 1, 0], 30).scale(0.4),
            "bsdf": _diffuse((0.2, 0.3, 0.8)),
        },
        "small": {
            "type": "sphere",
            "center": [0.1, 0.25, 0.2],
            "radius": 0.25,
            "bsdf": _diffuse((0.9, 0.85, 0.2)),
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
        "bsdf": _diffuse((0.2, 0.75, 0.3)),
    }


def camera_transform(mi, origin):
    return mi.ScalarTransform4f().look_at(origin=list(origin), target=list(TARGET), up=[0, 1, 0])


def scene_dict(
    mi, anim: Animation, t: float, size: int, integrator: dict, *, with_static: bool = True
) -> dict:
    d: dict = {
        "type": "scene",
        "integrator": integrator,
        "sensor": {
            "type": "perspective",
            "fov": FIELD_OF_VIEW_DEG,
            "to_world": camera_transform(mi, anim.camera_origin(t)),
            "sampler": {"type": "independent", "sample_count": 1},
            "film": {
                "type": "hdrfilm",
                "width": size,
                "height": size,
                "rfilter": {"type": "box"},
                "pixel_format": "rgb",
            },
        },
    }
    if with_static:
        d.update(static_shapes(mi))
        d["env"] = {"type": "constant", "radiance": {"type": "rgb", "value": [0.25, 0.3, 0.4]}}
    if anim.mover_center is not None:
        d["mover"] = mover_shape(mi, anim.mover_center(t))
    return d


# --- exact motion -------------------------------------------------------------------------------


def primary_hits(mi, scene, size: int) -> tuple[np.ndarray, np.ndarray]:
    """World positions (H, W, 3) of the surfaces seen through the pixel centres and the ray
    distances (H, W), inf where a ray leaves the scene (then the position is far along it)."""
    sensor = scene.sensors()[0]
    points = np.empty((size, size, 3), np.float64)
    dist = np.full((size, size), np.inf)
    for y in range(size):
        for x in range(size):
            ray, _ = sensor.sample_ray(
                0.0,
                0.5,
                mi.ScalarPoint2f((x + 0.5) / size, (y + 0.5) / size),
                mi.ScalarPoint2f(0.5, 0.5),
            )
            si = scene.ray_intersect(ray)
            if si.is_valid():
                points[y, x] = si.p
                dist[y, x] = si.t
            else:
                points[y, x] = np.asarray(ray.o) + 1.0e6 * np.asarray(ray.d)
    return points, dist


def project(mi, origin, points: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates (x right, y down, pixel centres at +0.5) of world points seen by the
    camera at ``origin``, and their depth along its view axis."""
    world_to_camera = np.array(camera_transform(mi, origin).inverse().matrix, np.float64)
    homogeneous = np.concatenate([points, np.ones((*points.shape[:-1], 1))], axis=-1)
    cam = homogeneous @ world_to_camera.T
    z = cam[..., 2]
    tan_half = math.tan(math.radians(FIELD_OF_VIEW_DEG) / 2.0)
    # Mitsuba's camera space has +x to the image's left and +y up (look_at builds
    # left = up x dir); the film's x runs right and its y down.
    sx = 0.5 - 0.5 * cam[..., 0] / (z * tan_half)
    sy = 0.5 - 0.5 * cam[..., 1] / (z * tan_half)
    return np.stack([sx * size, sy * size], axis=-1), z


def exact_motion(mi, anim: Animation, t: int, size: int) -> dict[str, np.ndarray]:
    """Backward and forward motion (H, W, 2, pixels, EXR coordinates) and depth of frame t."""
    scene = mi.load_dict(scene_dict(mi, anim, t, size, {"type": "path"}))
    points, dist = primary_hits(mi, scene, size)
    centres = np.stack(np.meshgrid(np.arange(size), np.arange(size)), axis=-1) + 0.5
    here, depth = project(mi, anim.camera_origin(t), points, size)
    hit = np.isfinite(dist)
    error = float(np.abs(here - centres)[hit].max()) if hit.any() else 0.0
    if error > 1e-3:
        raise RuntimeError(f"projection does not match Mitsuba's camera: {error:.2e} px off")
    on_mover = np.zeros((size, size), bool)
    if anim.mover_center is not None:
        only = mi.load_dict(scene_dict(mi, anim, t, size, {"type": "path"}, with_static=False))
        _, mover_dist = primary_hits(mi, only, size)
        on_mover = np.isfinite(mover_dist) & (np.abs(mover_dist - dist) < 1e-4 * (1 + dist))
    out: dict[str, np.ndarray] = {}
    for key, other in (("backward", t - 1), ("forward", t + 1)):
        moved = points.copy()
        if anim.mover_center is not None:
            shift = np.subtract(anim.mover_center(other), anim.mover_center(t))
            moved[on_mover] += shift
        there, _ = project(mi, anim.camera_origin(other), moved, size)
        # Relative to the projected position (within 1e-3 px of the pixel centre, checked
        # above), so that a point and camera that do not move get exactly 0.
        out[key] = there - here
    out["depth"] = np.where(hit, depth, BACKGROUND_DEPTH)
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


def write_exr(path: Path, planes: list[tuple[str, tuple[str, ...], np.ndarray, str]]) -> None:
    """A scanline EXR, ZIP compressed, from (layer, channel names, H x W x C values, pixel
    type) planes; the layer name prefixes each channel (``ViewLayer.Vector.X``)."""
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's own alias

    names: list[str] = []
    formats: list[str] = []
    data = []
    for layer, channels, values, pixel_type in planes:
        values = values.reshape(values.shape[0], values.shape[1], -1)
        names += [f"{layer}.{c}" if layer else c for c in channels]
        formats += [pixel_type] * len(channels)
        data.append(values.astype(np.float32))
    pixels = np.concatenate(data, axis=-1)
    h, w, c = pixels.shape
    spec = oiio.ImageSpec(w, h, c, "half")
    spec.channelnames = names
    spec.channelformats = [oiio.TypeDesc(f) for f in formats]
    spec.attribute("compression", "zip")
    spec.attribute("Software", "Mitsuba 3 (scripts/render_sequences.py)")
    path.parent.mkdir(parents=True, exist_ok=True)
    out = oiio.ImageOutput.create(str(path))
    if out is None or not out.open(str(path), spec):
        raise OSError(f"cannot write {path}: {oiio.geterror()}")
    ok = out.write_image(pixels)
    out.close()
    if not ok:
        raise OSError(f"cannot write {path}: {out.geterror()}")


def frame_planes(frame: dict, motion: dict) -> list:
    vector = cycles_vector(motion["backward"], motion["forward"])
    rgba = np.concatenate([frame["color"], frame["alpha"][..., None]], axis=-1)
    v = VIEW_LAYER
    return [
        (f"{v}.Combined", ("R", "G", "B", "A"), rgba, "half"),
        (f"{v}.Denoising Albedo", ("R", "G", "B"), frame["albedo"], "half"),
        (f"{v}.Denoising Normal", ("X", "Y", "Z"), frame["normal"], "half"),
        (f"{v}.Vector", ("X", "Y", "Z", "W"), vector, "half"),
        (f"{v}.Depth", ("Z",), motion["depth"], "float"),
    ]


def render_sequence(mi, name: str, out: Path, args: argparse.Namespace) -> dict:
    anim = animation(name, args.frames)
    offset = 1000 * (1 + SEQUENCE_NAMES.index(name))
    for i in range(args.frames):
        number = i + 1
        started = time.perf_counter()
        frame = render_frame(mi, anim, i, args.size, args.spp, seed=offset + i)
        motion = exact_motion(mi, anim, i, args.size)
        write_exr(out / name / f"frame.{number:04d}.exr", frame_planes(frame, motion))
        reference = render_reference(
            mi, anim, i, args.size, args.reference_spp, seed=100000 + offset + i
        )
        write_exr(
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
        "size": [args.size, args.size],
        "frames": args.frames,
        "first_frame": 1,
        "spp": args.spp,
        "reference_spp": args.reference_spp,
        "seeds": {"color": f"{offset} + frame index", "reference": f"{100000 + offset} + index"},
        "layers": {
            "color": f"{VIEW_LAYER}.Combined",
            "albedo": f"{VIEW_LAYER}.Denoising Albedo",
            "normal": f"{VIEW_LAYER}.Denoising Normal",
            "motion": f"{VIEW_LAYER}.Vector",
            "depth": f"{VIEW_LAYER}.Depth",
        },
        "motion_convention": "Blender Cycles Vector: pixels, y up; X,Y = previous - here, "
        "Z,W = here - next",
        "reference": "reference/frame.NNNN.exr (R, G, B)",
    }
    (out / name / "sequence.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--size", type=int, default=64, help="width and height in pixels")
    parser.add_argument("--frames", type=int, default=12)
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
