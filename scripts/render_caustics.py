"""Render the high-dynamic-range caustics test frame with Mitsuba 3, and cut its test crop.

A closed box with near-mirror rough-aluminium side and back walls, a diffuse floor and
ceiling, a glass sphere on the floor and a small, very bright spherical light above it: the
floor shows the sphere's caustic, which a path tracer finds only by hitting the light through
the glass, so the noisy frame is full of bright fireflies (values in the thousands), the
hard case for fp16 arithmetic. Made as the shared test scenes were (their README): the
``path`` integrator, an ``independent`` sampler, a ``box`` pixel filter, float32 ``hdrfilm``;
noisy colour at 4 spp with seed 4; albedo and world-space shading normal from the ``aov``
integrator at 64 spp (16-spp passes, seeds from 100000) on a copy of the scene whose BSDFs are
diffuse with the material's albedo (aluminium: its normal-incidence reflectance; glass: 1);
the reference is the mean of 32-spp passes with seeds from 1000000 until ``--ref-seconds``.

    python scripts/render_caustics.py [--out build/caustics] [--ref-seconds 300]

Writes ``color_4spp.exr``, ``albedo.exr``, ``normal.exr``, ``ref.exr`` and ``scene.json`` into
``--out`` (the 512 x 512 frame, kept out of git) and the crop ``tests/data/scenes/caustics/``.
Needs the ``render`` extra (``pip install 'oidn-gpu[render]'``: Mitsuba 3, OpenImageIO).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "scripts"))

from make_test_data import read_rgb, write_crop  # noqa: E402

SIZE = 512
IMAGES = ("color_4spp", "albedo", "normal", "ref")
NOISY_SPP = 4
AUX_SPP, AUX_PASS, AUX_SEED = 64, 16, 100_000
REF_PASS, REF_SEED = 32, 1_000_000
MAX_DEPTH = 12
# The crop: the sphere's lower half, its caustic on the floor and a mirror wall's edge.
CROP_Y, CROP_X, CROP_H, CROP_W = 352, 150, 96, 112
CROP_DIR = REPO_ROOT / "tests" / "data" / "scenes" / "caustics"
# Aluminium's reflectance at normal incidence, ((n - 1)^2 + k^2) / ((n + 1)^2 + k^2) for
# Mitsuba's RGB complex IOR of "Al" (n, k at its R, G, B wavelengths).
ALUMINIUM_IOR = ((1.657, 9.224), (0.880, 6.270), (0.521, 4.742))
ALUMINIUM_ALBEDO = [((n - 1) ** 2 + k**2) / ((n + 1) ** 2 + k**2) for n, k in ALUMINIUM_IOR]
DESCRIPTION = (
    "Closed box: near-mirror rough aluminium side and back walls (alpha 0.02), diffuse floor "
    "and ceiling, a glass sphere (IOR 1.5) on the floor, a small bright spherical light "
    "(radius 0.03, radiance 4000) above it; the floor shows the sphere's caustic."
)


def _rectangle(mi, bsdf: dict, translate, rotate_axis, angle: float, scale) -> dict:
    """Mitsuba's rectangle ([-1, 1]^2 at z = 0) scaled by ``scale`` (x, y), rotated, moved."""
    transform = (
        mi.ScalarTransform4f()
        .translate(translate)
        .rotate(rotate_axis, angle)
        .scale([scale[0], scale[1], 1.0])
    )
    return {"type": "rectangle", "to_world": transform, "bsdf": bsdf}


def scene_dict(mi, proxy: bool) -> dict:
    """The scene; ``proxy``: every BSDF diffuse with the material's albedo (aux renders)."""
    diffuse = {"type": "diffuse", "reflectance": {"type": "rgb", "value": [0.45, 0.43, 0.40]}}
    if proxy:
        mirror = {"type": "diffuse", "reflectance": {"type": "rgb", "value": ALUMINIUM_ALBEDO}}
        glass = {"type": "diffuse", "reflectance": {"type": "rgb", "value": [1.0, 1.0, 1.0]}}
    else:
        mirror = {"type": "roughconductor", "material": "Al", "alpha": 0.02}
        glass = {"type": "dielectric", "int_ior": 1.5, "ext_ior": 1.0}
    light = {
        "type": "sphere",
        "center": [0.35, 0.78, 0.1],
        "radius": 0.03,
        "emitter": {"type": "area", "radiance": {"type": "rgb", "value": [4000, 3700, 3300]}},
    }
    return {
        "type": "scene",
        "integrator": (
            {"type": "aov", "aovs": "albedo:albedo,nn:sh_normal"}
            if proxy
            else {"type": "path", "max_depth": MAX_DEPTH}
        ),
        "sensor": {
            "type": "perspective",
            "fov": 40,
            "to_world": mi.ScalarTransform4f().look_at(
                origin=[0, 0, 3.6], target=[0, -0.1, 0], up=[0, 1, 0]
            ),
            "sampler": {"type": "independent", "sample_count": NOISY_SPP},
            "film": {
                "type": "hdrfilm",
                "width": SIZE,
                "height": SIZE,
                "rfilter": {"type": "box"},
                "pixel_format": "rgb",
                "component_format": "float32",
            },
        },
        # the box: x and y in [-1, 1], z from -1 (back wall) to 4 (behind the camera)
        "floor": _rectangle(mi, diffuse, [0, -1, 1.5], [1, 0, 0], -90, (1.0, 2.5)),
        "ceiling": _rectangle(mi, diffuse, [0, 1, 1.5], [1, 0, 0], 90, (1.0, 2.5)),
        "back": _rectangle(mi, mirror, [0, 0, -1], [0, 1, 0], 0, (1.0, 1.0)),
        "left": _rectangle(mi, mirror, [-1, 0, 1.5], [0, 1, 0], 90, (2.5, 1.0)),
        "right": _rectangle(mi, mirror, [1, 0, 1.5], [0, 1, 0], -90, (2.5, 1.0)),
        "front": _rectangle(mi, diffuse, [0, 0, 4.0], [0, 1, 0], 180, (1.0, 1.0)),
        "sphere": {"type": "sphere", "center": [-0.15, -0.55, 0.05], "radius": 0.45, "bsdf": glass},
        "light": light,
    }


def render_mean(mi, scene, spp: int, pass_spp: int, seed: int) -> np.ndarray:
    """Mean of ``spp // pass_spp`` passes of ``pass_spp`` samples, seeds ``seed, seed + 1, ...``."""
    total = None
    passes = spp // pass_spp
    for i in range(passes):
        image = np.asarray(mi.render(scene, spp=pass_spp, seed=seed + i), np.float64)
        total = image if total is None else total + image
    return (total / passes).astype(np.float32)


def render_reference(mi, scene, seconds: float) -> tuple[np.ndarray, int]:
    """Mean of 32-spp passes (seeds from `REF_SEED`) until ``seconds`` have passed."""
    started = time.perf_counter()
    total, passes = None, 0
    while passes == 0 or time.perf_counter() - started < seconds:
        image = np.asarray(mi.render(scene, spp=REF_PASS, seed=REF_SEED + passes), np.float64)
        total = image if total is None else total + image
        passes += 1
    return (total / passes).astype(np.float32), passes * REF_PASS


def cut_crop(out: Path) -> None:
    """Write the test crop of the frame in ``out`` to `CROP_DIR` (float32 values kept)."""
    window = f"rows {CROP_Y}:{CROP_Y + CROP_H}, columns {CROP_X}:{CROP_X + CROP_W}"
    CROP_DIR.mkdir(parents=True, exist_ok=True)
    for name in IMAGES:
        pixels = read_rgb(out / f"{name}.exr")
        crop = pixels[CROP_Y : CROP_Y + CROP_H, CROP_X : CROP_X + CROP_W]
        description = f"caustics/{name}.exr {window}"
        write_crop(CROP_DIR / f"{name}.exr", np.ascontiguousarray(crop), description)


def render_frame(variant: str, out: Path, ref_seconds: float) -> dict:
    """Render the four images into ``out``; returns the scene's metadata."""
    import mitsuba as mi

    mi.set_variant(variant)
    out.mkdir(parents=True, exist_ok=True)
    scene = mi.load_dict(scene_dict(mi, proxy=False))
    aux_scene = mi.load_dict(scene_dict(mi, proxy=True))
    timings = {}
    started = time.perf_counter()
    color = np.asarray(mi.render(scene, spp=NOISY_SPP, seed=NOISY_SPP), np.float32)
    timings["color_4spp_s"] = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    aux = render_mean(mi, aux_scene, AUX_SPP, AUX_PASS, AUX_SEED)
    timings["aux_s"] = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    ref, ref_spp = render_reference(mi, scene, ref_seconds)
    timings["ref_s"] = round(time.perf_counter() - started, 2)
    images = dict(
        zip(IMAGES, (color[..., :3], aux[..., :3], aux[..., 3:6], ref[..., :3]), strict=True)
    )
    for name, pixels in images.items():
        pixels = np.ascontiguousarray(pixels, np.float32)
        write_crop(out / f"{name}.exr", pixels, f"caustics {name} ({SIZE}x{SIZE})")
    return {
        "scene": "caustics",
        "description": DESCRIPTION,
        "width": SIZE,
        "height": SIZE,
        "renderer": f"Mitsuba {mi.__version__}",
        "variant": variant,
        "integrator": {"type": "path", "max_depth": MAX_DEPTH},
        "pixel_filter": "box",
        "sampler": "independent",
        "noisy_spp": [NOISY_SPP],
        "noisy_seeds": {str(NOISY_SPP): NOISY_SPP},
        "aux_spp": AUX_SPP,
        "ref_spp": ref_spp,
        "color_max": float(color[..., :3].max()),
        "crop": {"y": CROP_Y, "x": CROP_X, "height": CROP_H, "width": CROP_W},
        "timings_s": timings,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "caustics")
    parser.add_argument("--ref-seconds", type=float, default=300.0)
    parser.add_argument("--variant", default="scalar_rgb", choices=("scalar_rgb", "llvm_ad_rgb"))
    parser.add_argument(
        "--crop-only", action="store_true", help="cut the crop from the frame already in --out"
    )
    args = parser.parse_args(argv)
    if not args.crop_only:
        meta = render_frame(args.variant, args.out, args.ref_seconds)
        (args.out / "scene.json").write_text(json.dumps(meta, indent=2) + "\n")
        print(json.dumps(meta, indent=2))
    cut_crop(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
