"""What the animation renderers share (scripts/render_sequences.py and
scripts/render_moving_objects.py): the camera, the primary hits and projection that give
exact motion, and a sequence's files.

A sequence folder holds ``frame.NNNN.exr`` (Blender-style multi-layer EXR, `frame_planes`),
``reference/frame.NNNN.exr`` (R, G, B) and ``sequence.json`` (`sequence_meta`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from oidn_gpu.image.motion import cycles_vector

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "tests" / "data" / "sequences"
VIEW_LAYER = "ViewLayer"
BACKGROUND_DEPTH = 1.0e10  # what Blender writes in the Depth pass where nothing is hit
FIELD_OF_VIEW_DEG = 45.0  # across the image's width
TARGET = (0.0, 0.55, 0.0)

# (layer, channel names, H x W x C values, pixel type) of one EXR
Plane = tuple[str, tuple[str, ...], np.ndarray, str]


# --- the camera ---------------------------------------------------------------------------------


def orbit_origin(angle_deg: float) -> tuple[float, float, float]:
    """The camera's position on its orbit around the scene's centre."""
    radius, height = 4.6, 1.9
    a = math.radians(angle_deg)
    return (radius * math.sin(a), height, radius * math.cos(a))


def camera_transform(mi, origin):
    return mi.ScalarTransform4f().look_at(origin=list(origin), target=list(TARGET), up=[0, 1, 0])


def sensor(mi, origin, width: int, height: int) -> dict:
    """The perspective camera at ``origin``, one sample per pixel through a box filter."""
    return {
        "type": "perspective",
        "fov": FIELD_OF_VIEW_DEG,
        "fov_axis": "x",
        "to_world": camera_transform(mi, origin),
        "sampler": {"type": "independent", "sample_count": 1},
        "film": {
            "type": "hdrfilm",
            "width": width,
            "height": height,
            "rfilter": {"type": "box"},
            "pixel_format": "rgb",
        },
    }


# --- exact motion -------------------------------------------------------------------------------


def primary_hits(mi, scene, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """World positions (H, W, 3) of the surfaces seen through the pixel centres and the ray
    distances (H, W), inf where a ray leaves the scene (then the position is far along it)."""
    camera = scene.sensors()[0]
    points = np.empty((height, width, 3), np.float64)
    dist = np.full((height, width), np.inf)
    for y in range(height):
        for x in range(width):
            film = mi.ScalarPoint2f((x + 0.5) / width, (y + 0.5) / height)
            ray, _ = camera.sample_ray(0.0, 0.5, film, mi.ScalarPoint2f(0.5, 0.5))
            si = scene.ray_intersect(ray)
            if si.is_valid():
                points[y, x] = si.p
                dist[y, x] = si.t
            else:
                points[y, x] = np.asarray(ray.o) + 1.0e6 * np.asarray(ray.d)
    return points, dist


def project(
    mi, origin, points: np.ndarray, width: int, height: int
) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates (x right, y down, pixel centres at +0.5) of world points seen by the
    camera at ``origin``, and their depth along its view axis."""
    world_to_camera = np.array(camera_transform(mi, origin).inverse().matrix, np.float64)
    homogeneous = np.concatenate([points, np.ones((*points.shape[:-1], 1))], axis=-1)
    cam = homogeneous @ world_to_camera.T
    z = cam[..., 2]
    scale = 0.5 * width / math.tan(math.radians(FIELD_OF_VIEW_DEG) / 2.0)
    # Mitsuba's camera space has +x to the image's left and +y up (look_at builds
    # left = up x dir); the film's x runs right and its y down.
    sx = 0.5 * width - scale * cam[..., 0] / z
    sy = 0.5 * height - scale * cam[..., 1] / z
    return np.stack([sx, sy], axis=-1), z


def seen_at(
    mi, origin, points: np.ndarray, dist: np.ndarray, width: int, height: int
) -> tuple[np.ndarray, np.ndarray]:
    """Where the primary hits (`primary_hits`) project in the camera at ``origin``, checked
    to be within 1e-3 px of their pixel centres, and their depth (`BACKGROUND_DEPTH` where
    the ray leaves the scene)."""
    centres = np.stack(np.meshgrid(np.arange(width), np.arange(height)), axis=-1) + 0.5
    here, depth = project(mi, origin, points, width, height)
    hit = np.isfinite(dist)
    error = float(np.abs(here - centres)[hit].max()) if hit.any() else 0.0
    if error > 1e-3:
        raise RuntimeError(f"projection does not match Mitsuba's camera: {error:.2e} px off")
    return here, np.where(hit, depth, BACKGROUND_DEPTH)


def on_object(dist: np.ndarray, object_dist: np.ndarray) -> np.ndarray:
    """The pixels whose primary hit (ray distances ``dist``) lies on an object that,
    rendered alone, is hit at ``object_dist``."""
    return np.isfinite(object_dist) & (np.abs(object_dist - dist) < 1e-4 * (1 + dist))


# --- the files ----------------------------------------------------------------------------------


def write_exr(path: Path, planes: Sequence[Plane]) -> None:
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


def frame_planes(frame: dict, motion: dict) -> list[Plane]:
    """A frame's layers as Blender Cycles names them: the noisy beauty with its alpha, the
    denoising albedo and normal, the Vector pass (`cycles_vector`) and the depth."""
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


def write_frames(
    folder: Path, frames: int, render: Callable[[int], tuple[list[Plane], np.ndarray]]
) -> None:
    """``frame.NNNN.exr`` and ``reference/frame.NNNN.exr`` of each frame index (numbers from
    1), from ``render(index)``: the frame's planes and its reference (H x W x 3)."""
    for i in range(frames):
        number = i + 1
        started = time.perf_counter()
        planes, reference = render(i)
        write_exr(folder / f"frame.{number:04d}.exr", planes)
        write_exr(
            folder / "reference" / f"frame.{number:04d}.exr",
            [("", ("R", "G", "B"), reference, "half")],
        )
        print(
            f"{folder.name} frame {number}/{frames}: {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )


def sequence_meta(
    mi,
    name: str,
    size: tuple[int, int],
    args: argparse.Namespace,
    offset: int,
    *,
    script: str | None = None,
    object_id: str | None = None,
) -> dict:
    """What ``sequence.json`` says of a sequence: its renderer, size (width, height), frames,
    samples, seeds (``offset`` + frame index; references 100000 more) and layers."""
    meta: dict = {"sequence": name, "renderer": f"Mitsuba {mi.__version__} {mi.variant()}"}
    if script is not None:
        meta["script"] = script
    layers = {
        "color": f"{VIEW_LAYER}.Combined",
        "albedo": f"{VIEW_LAYER}.Denoising Albedo",
        "normal": f"{VIEW_LAYER}.Denoising Normal",
        "motion": f"{VIEW_LAYER}.Vector",
        "depth": f"{VIEW_LAYER}.Depth",
    }
    if object_id is not None:
        layers["object_id"] = object_id
    meta.update(
        size=list(size),
        frames=args.frames,
        first_frame=1,
        spp=args.spp,
        reference_spp=args.reference_spp,
        seeds={"color": f"{offset} + frame index", "reference": f"{100000 + offset} + index"},
        layers=layers,
        motion_convention="Blender Cycles Vector: pixels, y up; X,Y = previous - here, "
        "Z,W = here - next",
        reference="reference/frame.NNNN.exr (R, G, B)",
    )
    return meta


def write_meta(folder: Path, meta: dict) -> None:
    (folder / "sequence.json").write_text(json.dumps(meta, indent=2) + "\n")


# --- the command line ---------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser, names: Sequence[str], frames: int) -> None:
    """The options both renderers take (the image size is each one's own)."""
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--frames", type=int, default=frames)
    parser.add_argument("--spp", type=int, default=4, help="samples per pixel of the noisy frames")
    parser.add_argument("--reference-spp", type=int, default=2048)
    parser.add_argument(
        "--sequences", default=",".join(names), help="comma-separated: " + ", ".join(names)
    )


def render_all(
    args: argparse.Namespace,
    render_sequence: Callable[[object, str, Path, argparse.Namespace], dict],
) -> int:
    """Each of ``--sequences`` rendered in Mitsuba's ``scalar_rgb`` variant."""
    import mitsuba as mi

    mi.set_variant("scalar_rgb")
    for name in [s.strip() for s in args.sequences.split(",") if s.strip()]:
        render_sequence(mi, name, args.out, args)
    return 0
