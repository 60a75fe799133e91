"""Render the light-path AOV and alpha test frames with Mitsuba 3 (3.9.1, ``scalar_rgb``).

Two small frames (64 x 64 px) for ``tests/unit/test_aov_sum.py`` and the command-line tests:

- ``light_groups.exr``: a box with a diffuse floor and walls, a glossy sphere and a diffuse
  cube, lit by two emitters: a ceiling area light (group ``key``) and a small spherical
  light (group ``fill``), both hidden from the camera. Each group is the frame rendered
  with the other emitter's radiance set to 0 (its shape stays, so occlusion is the same),
  at 4 spp with its own seed; the beauty (root ``R, G, B``) is their exact float32 sum.
  Layers: ``key``, ``fill``, ``albedo``, ``N`` (the ``aov`` integrator's albedo, clipped
  to [0, 1], and world-space shading normal at 64 spp), and ``depth.Z`` (a utility pass,
  not part of the sum).
- ``light_groups_ref.exr``: ``key`` and ``fill`` converged (``REF_SPP`` spp, other seeds).
- ``alpha.exr``: two spheres and a tilted thin plate over a transparent background
  (emitters hidden, ``rgba`` film, box pixel filter: alpha is the pixel's coverage) at
  4 spp: ``R, G, B, A``, ``albedo``, ``N`` (64 spp); ``alpha_ref.exr``: the converged ``A``.

All float32 OpenEXR with ZIP compression. Run from the repository root:

    python scripts/render_aovs.py [--out tests/data/aovs]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

SIZE = 64
NOISY_SPP, AUX_SPP, REF_SPP = 4, 64, 2048
SEEDS = {"key": 11, "fill": 22, "aux": 33, "alpha": 44}
REF_SEED = 1_000_000
OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "aovs"


def _diffuse(rgb) -> dict:
    return {"type": "diffuse", "reflectance": {"type": "rgb", "value": rgb}}


def _shapes(mi, key: float, fill: float) -> dict:
    t = mi.ScalarTransform4f()
    return {
        "floor": {
            "type": "rectangle",
            "to_world": t.translate([0, -1, 0]).rotate([1, 0, 0], -90).scale(2),
            "bsdf": _diffuse([0.7, 0.7, 0.7]),
        },
        "back": {
            "type": "rectangle",
            "to_world": t.translate([0, 0, -1]).scale(2),
            "bsdf": _diffuse([0.6, 0.3, 0.2]),
        },
        "left": {
            "type": "rectangle",
            "to_world": t.translate([-1, 0, 0]).rotate([0, 1, 0], 90).scale(2),
            "bsdf": _diffuse([0.2, 0.5, 0.2]),
        },
        "sphere": {
            "type": "sphere",
            "center": [0.35, -0.6, -0.2],
            "radius": 0.4,
            "bsdf": {"type": "roughconductor", "material": "Au", "alpha": 0.15},
        },
        "cube": {
            "type": "cube",
            "to_world": t.translate([-0.4, -0.75, 0.1]).rotate([0, 1, 0], 30).scale(0.25),
            "bsdf": _diffuse([0.2, 0.3, 0.8]),
        },
        "key": {
            "type": "rectangle",
            "to_world": t.translate([0, 0.99, 0]).rotate([1, 0, 0], 90).scale(0.3),
            "bsdf": _diffuse([0.0, 0.0, 0.0]),
            "emitter": {"type": "area", "radiance": {"type": "rgb", "value": [key] * 3}},
        },
        "fill": {
            "type": "sphere",
            "center": [0.8, 0.2, 0.6],
            "radius": 0.05,
            "emitter": {
                "type": "area",
                "radiance": {"type": "rgb", "value": [fill, fill * 0.7, 0.4 * fill]},
            },
        },
    }


def _sensor(mi, pixel_format: str) -> dict:
    return {
        "type": "perspective",
        "fov": 45,
        "to_world": mi.ScalarTransform4f().look_at([0, 0, 3.4], [0, -0.2, 0], [0, 1, 0]),
        "sampler": {"type": "independent"},
        "film": {
            "type": "hdrfilm",
            "width": SIZE,
            "height": SIZE,
            "pixel_format": pixel_format,
            "rfilter": {"type": "box"},
        },
    }


def _render(mi, scene: dict, spp: int, seed: int) -> np.ndarray:
    return np.array(mi.render(mi.load_dict(scene), spp=spp, seed=seed), dtype=np.float32)


def _aux(mi, scene: dict) -> tuple[np.ndarray, np.ndarray]:
    aux = dict(scene, integrator={"type": "aov", "aovs": "albedo:albedo,nn:sh_normal"})
    values = _render(mi, aux, AUX_SPP, SEEDS["aux"])
    return np.clip(values[..., -6:-3], 0.0, 1.0), values[..., -3:]


def _write(path: Path, channels: dict[str, np.ndarray], description: str) -> None:
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    names = list(channels)
    pixels = np.stack([channels[n] for n in names], axis=2).astype(np.float32)
    spec = oiio.ImageSpec(SIZE, SIZE, len(names), "float")
    spec.channelnames = names
    spec.attribute("compression", "zip")
    spec.attribute("ImageDescription", description)
    out = oiio.ImageOutput.create(str(path))
    out.open(str(path), spec)
    out.write_image(pixels)
    out.close()


def _rgb(prefix: str, values: np.ndarray, comps: str = "RGB") -> dict[str, np.ndarray]:
    dot = f"{prefix}." if prefix else ""
    return {f"{dot}{c}": values[..., i] for i, c in enumerate(comps)}


def light_groups(mi, out: Path) -> None:
    def scene(key: float, fill: float) -> dict:
        integrator = {"type": "path", "max_depth": 6, "hide_emitters": True}
        return {
            "type": "scene",
            "integrator": integrator,
            "sensor": _sensor(mi, "rgb"),
            **_shapes(mi, key, fill),
        }

    groups = {"key": (12.0, 0.0), "fill": (0.0, 300.0)}
    noisy = {g: _render(mi, scene(*v), NOISY_SPP, SEEDS[g])[..., :3] for g, v in groups.items()}
    refs = {
        g: _render(mi, scene(*v), REF_SPP, REF_SEED + i)[..., :3]
        for i, (g, v) in enumerate(groups.items())
    }
    albedo, normal = _aux(mi, scene(12.0, 300.0))
    depth_scene = dict(scene(12.0, 300.0), integrator={"type": "aov", "aovs": "z:depth"})
    depth = _render(mi, depth_scene, AUX_SPP, SEEDS["aux"])[..., -1]
    beauty = noisy["key"] + noisy["fill"]  # float32: the beauty is the exact sum
    channels = {
        **_rgb("", beauty),
        **_rgb("key", noisy["key"]),
        **_rgb("fill", noisy["fill"]),
        **_rgb("albedo", albedo),
        **_rgb("N", normal, "XYZ"),
        "depth.Z": depth,
    }
    _write(out / "light_groups.exr", channels, f"Mitsuba {mi.__version__} light groups, 4 spp")
    ref = {**_rgb("key", refs["key"]), **_rgb("fill", refs["fill"])}
    _write(out / "light_groups_ref.exr", ref, f"Mitsuba {mi.__version__}, {REF_SPP} spp")


def alpha(mi, out: Path) -> None:
    t = mi.ScalarTransform4f()
    scene = {
        "type": "scene",
        "integrator": {"type": "path", "max_depth": 4, "hide_emitters": True},
        "sensor": _sensor(mi, "rgba"),
        "light": {"type": "constant", "radiance": {"type": "rgb", "value": [1.0, 1.0, 1.0]}},
        "a": {
            "type": "sphere",
            "center": [-0.3, -0.1, 0],
            "radius": 0.45,
            "bsdf": _diffuse([0.8, 0.3, 0.2]),
        },
        "b": {
            "type": "sphere",
            "center": [0.5, 0.3, -0.3],
            "radius": 0.25,
            "bsdf": _diffuse([0.2, 0.6, 0.8]),
        },
        "plate": {
            "type": "rectangle",
            "to_world": t.translate([0.2, -0.6, 0.3]).rotate([0, 0, 1], 25).scale([0.8, 0.04, 1]),
            "bsdf": _diffuse([0.9, 0.9, 0.3]),
        },
    }
    noisy = _render(mi, scene, NOISY_SPP, SEEDS["alpha"])
    ref = _render(mi, scene, REF_SPP, REF_SEED + 7)
    albedo, normal = _aux(mi, dict(scene, sensor=_sensor(mi, "rgb")))
    channels = {
        **_rgb("", noisy[..., :4], "RGBA"),
        **_rgb("albedo", albedo),
        **_rgb("N", normal, "XYZ"),
    }
    _write(out / "alpha.exr", channels, f"Mitsuba {mi.__version__} alpha, 4 spp")
    _write(out / "alpha_ref.exr", {"A": ref[..., 3]}, f"Mitsuba {mi.__version__}, {REF_SPP} spp")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    import mitsuba as mi

    mi.set_variant("scalar_rgb")
    args.out.mkdir(parents=True, exist_ok=True)
    light_groups(mi, args.out)
    alpha(mi, args.out)


if __name__ == "__main__":
    main()
