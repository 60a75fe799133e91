"""How much denoising lowers an alpha channel's error, by weights, auxiliary images and kind
of coverage noise.

Each frame's noisy alpha (4 spp) is denoised as a one-channel LDR image, clipped to 0..1,
with each of `OPTIONS`; the score is the RMS error of the noisy alpha against the converged
one divided by that of the denoised alpha (higher is better). Options: the fast or high
weights; with the albedo and normal, albedo only or no auxiliary image; the alpha scaled
by 0.75 on its way in (OIDN's ``inputScale``; ``alpha="denoise"``, scored through
`oidn_gpu.filter_alpha.denoise_alpha`, is the coverage fit, then the fast weights with the
albedo so); the albedo
and normal prefiltered first (OIDN's ``prefilter="accurate"``: ``rt_alb`` and ``rt_nrm``,
then the ``calb_cnrm`` weights, or the albedo-only weights with the prefiltered albedo);
the denoised colour's luminance (scaled to 0..1) as the albedo; HDR instead of LDR; the
alpha fitted to the coverage the albedo shows (`oidn_gpu.image.coverage`, a guided filter)
alone.

Frames: ``test`` is ``tests/data/aovs/alpha.exr`` (box pixel filter: coverage noise on
one-pixel silhouettes; its albedo and normal are rendered apart at 64 spp). With
``--render`` (Mitsuba 3, ``scalar_rgb``) the same scene is rendered again at ``--size`` px
with a Gaussian pixel filter (``gauss``), depth of field (``dof``: wide fractional coverage)
and 40 thin blades in front (``grass``, box filter; ``grass-gauss``), each with a 1024 spp
reference. ``--same-samples`` renders the albedo and normal from the alpha's own 4 samples
(one render, as renderers that write their denoising passes beside the beauty do), so
their silhouettes carry the alpha's coverage noise, and renders the test frame's scene
again too.

    python bench/alpha_quality.py [--render] [--same-samples] [--size 64] [--backend reference|oidn]

``--backend oidn`` scores with Intel OIDN 2.5.1 (pyoidn) through this project's ``oidn``
backend; the results are in docs/benchmarks.md, "Alpha denoised: error by weights and
kind of coverage noise".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "aovs"
OPTIONS = {
    'coverage fit, then fast, albedo, scale 0.75 (`alpha="denoise"`)': dict(shipped=True, aux="a"),
    "coverage fit alone": dict(fit_only=True, aux="a"),
    "fast, albedo, scale 0.75": dict(quality="fast", aux="a", input_scale=0.75),
    "coverage fit, then fast, prefiltered albedo, scale 0.75 (with `prefilter`)": dict(
        shipped=True, aux="A"
    ),
    "fast, albedo+normal": dict(quality="fast", aux="an"),
    "fast, albedo+normal, scale 0.75": dict(quality="fast", aux="an", input_scale=0.75),
    "fast, albedo": dict(quality="fast", aux="a"),
    "fast, no aux": dict(quality="fast", aux=""),
    "fast, prefiltered albedo+normal": dict(quality="fast", aux="AN", clean_aux=True),
    "fast, prefiltered albedo": dict(quality="fast", aux="A"),
    "fast, colour's luminance": dict(quality="fast", aux="L"),
    "fast, hdr": dict(quality="fast", aux="an", hdr=True, input_scale=1.0),
    "fast, hdr, prefiltered": dict(
        quality="fast", aux="AN", hdr=True, input_scale=1.0, clean_aux=True
    ),
    "high, albedo+normal": dict(quality="high", aux="an"),
    "high, prefiltered": dict(quality="high", aux="AN", clean_aux=True),
}


def _read(path: Path) -> dict[str, np.ndarray]:
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    inp = oiio.ImageInput.open(str(path))
    spec = inp.spec()
    pixels = inp.read_image(0, 0, 0, spec.nchannels, "float")
    inp.close()
    return {name: pixels[:, :, i] for i, name in enumerate(spec.channelnames)}


def test_frame() -> dict[str, np.ndarray]:
    """The noisy ``alpha``, ``color``, ``albedo``, ``normal`` and converged alpha (``ref``)
    of tests/data/aovs."""
    noisy = _read(DATA / "alpha.exr")
    return {
        "alpha": noisy["A"],
        "color": np.stack([noisy[c] for c in "RGB"], axis=2),
        "albedo": np.stack([noisy[f"albedo.{c}"] for c in "RGB"], axis=2),
        "normal": np.stack([noisy[f"N.{c}"] for c in "XYZ"], axis=2),
        "ref": _read(DATA / "alpha_ref.exr")["A"],
    }


def rendered_frame(kind: str, size: int, same_samples: bool = False) -> dict[str, np.ndarray]:
    """The test frame's scene rendered again (``test``) or with another pixel filter, lens
    or blades; `test_frame`'s images. ``same_samples``: the albedo and normal from the
    alpha's own samples, else rendered apart at 64 spp."""
    import mitsuba as mi

    mi.set_variant("scalar_rgb")
    sys.path.insert(0, str(ROOT / "scripts"))
    import render_aovs

    render_aovs.SIZE = size
    rfilter = "gaussian" if "gauss" in kind else "box"

    def sensor(pixel_format: str) -> dict:
        made = render_aovs._sensor(mi, pixel_format)
        made["film"]["rfilter"] = {"type": rfilter}
        if kind == "dof":
            made.update(type="thinlens", aperture_radius=0.12, focus_distance=2.5)
        return made

    t = mi.ScalarTransform4f()
    diffuse = render_aovs._diffuse
    scene = {
        "type": "scene",
        "integrator": {"type": "path", "max_depth": 4, "hide_emitters": True},
        "sensor": sensor("rgba"),
        "light": {"type": "constant", "radiance": {"type": "rgb", "value": [1.0] * 3}},
        "a": {
            "type": "sphere",
            "center": [-0.3, -0.1, 0],
            "radius": 0.45,
            "bsdf": diffuse([0.8, 0.3, 0.2]),
        },
        "b": {
            "type": "sphere",
            "center": [0.5, 0.3, -0.3],
            "radius": 0.25,
            "bsdf": diffuse([0.2, 0.6, 0.8]),
        },
        "plate": {
            "type": "rectangle",
            "bsdf": diffuse([0.9, 0.9, 0.3]),
            "to_world": t.translate([0.2, -0.6, 0.3]).rotate([0, 0, 1], 25).scale([0.8, 0.04, 1]),
        },
    }
    if "grass" in kind:
        rng = np.random.default_rng(3)
        for i in range(40):
            x, z = float(rng.uniform(-1.2, 1.2)), float(rng.uniform(-0.5, 0.8))
            blade = t.translate([x, -0.9, z]).rotate([0, 0, 1], float(rng.uniform(-20, 20)))
            scene[f"blade{i}"] = {
                "type": "rectangle",
                "to_world": blade.scale([0.006, 0.5, 1]).translate([0, 1, 0]),
                "bsdf": diffuse([0.3, 0.7, 0.2]),
            }
    reference = render_aovs._render(mi, scene, 1024, 1_000_007)[..., 3]
    if same_samples:
        aovs = {"type": "aov", "aovs": "albedo:albedo,nn:sh_normal"}
        noisy = render_aovs._render(
            mi, dict(scene, integrator=dict(aovs, integrator=scene["integrator"])), 4, 44
        )
        albedo, normal = np.clip(noisy[..., 4:7], 0.0, 1.0), noisy[..., 7:10]
    else:
        noisy = render_aovs._render(mi, scene, 4, 44)
        albedo, normal = render_aovs._aux(mi, dict(scene, sensor=sensor("rgb")))
    color = noisy[..., :3]
    return {
        "alpha": noisy[..., 3],
        "color": color,
        "albedo": albedo,
        "normal": normal,
        "ref": reference,
    }


def _aux(frame: dict[str, np.ndarray], backend: str) -> dict[str, np.ndarray | None]:
    """The auxiliary images by `OPTIONS` letter: ``a``/``n`` as rendered, ``A``/``N``
    prefiltered (``rt_alb``/``rt_nrm``), ``L`` the denoised colour's luminance over its
    99th percentile, clipped to 0..1, as an RGB albedo."""
    import oidn_gpu

    albedo, normal = frame["albedo"].astype(np.float32), frame["normal"].astype(np.float32)
    with oidn_gpu.Denoiser(backend=backend) as den:
        clean_albedo, clean_normal = den.denoise(albedo=albedo), den.denoise(normal=normal)
    with oidn_gpu.Denoiser(backend=backend, hdr=True, prefilter="accurate") as den:
        colour = np.asarray(den.denoise(frame["color"].astype(np.float32), albedo, normal))
    luminance = colour @ np.array([0.2126, 0.7152, 0.0722], np.float32)
    luminance = np.clip(luminance / max(float(np.percentile(luminance, 99)), 1e-6), 0, 1)
    guide = np.repeat(luminance[:, :, None], 3, axis=2).astype(np.float32)
    return {"a": albedo, "n": normal, "A": clean_albedo, "N": clean_normal, "L": guide}


def score(frame: dict[str, np.ndarray], backend: str) -> dict[str, float]:
    """The noisy alpha's RMS error over the denoised one's, for each of `OPTIONS`."""
    import oidn_gpu
    from oidn_gpu.filter_alpha import alpha_config, denoise_alpha
    from oidn_gpu.image.coverage import fit_coverage

    config = alpha_config(oidn_gpu.Denoiser(backend=backend).config)
    alpha, reference = frame["alpha"], frame["ref"]
    aux = _aux(frame, backend)
    noisy_error = np.sqrt(np.mean((alpha - reference) ** 2))
    scores = {}
    for name, option in OPTIONS.items():
        option = dict(option)
        letters = option.pop("aux")
        albedo = next((aux[c] for c in letters if c in "aAL"), None)
        normal = next((aux[c] for c in letters if c in "nN"), None)
        if option.pop("shipped", False):  # `alpha="denoise"`
            with oidn_gpu.Denoiser.from_config(config) as den:
                denoised = denoise_alpha(den, alpha, albedo)
        elif option.pop("fit_only", False):
            denoised = np.clip(fit_coverage(np.clip(alpha, 0, 1), albedo), 0, 1)
        else:
            with oidn_gpu.Denoiser(backend=backend, **option) as den:
                one = np.clip(alpha, 0, 1)[:, :, None].astype(np.float32)
                denoised = np.clip(np.asarray(den.denoise(one, albedo, normal))[:, :, 0], 0, 1)
        scores[name] = float(noisy_error / np.sqrt(np.mean((denoised - reference) ** 2)))
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--render", action="store_true", help="also render the variants")
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--backend", default="reference")
    parser.add_argument(
        "--same-samples", action="store_true", help="albedo and normal from the alpha's samples"
    )
    args = parser.parse_args()
    frames = {"test": test_frame}
    if args.same_samples:
        frames = {"test": lambda: rendered_frame("test", args.size, True)}
    if args.render:
        for kind in ("gauss", "dof", "grass", "grass-gauss"):
            frames[kind] = lambda kind=kind: rendered_frame(kind, args.size, args.same_samples)
    print("| frame | fractional alpha | " + " | ".join(OPTIONS) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in OPTIONS) + " |")
    for kind, make in frames.items():
        frame = make()
        reference = frame["ref"]
        fractional = np.mean((reference > 0.001) & (reference < 0.999))
        scores = score(frame, args.backend)
        cells = " | ".join(f"{scores[name]:.2f}x" for name in OPTIONS)
        print(f"| {kind} | {100 * fractional:.1f}% | {cells} |", flush=True)


if __name__ == "__main__":
    main()
