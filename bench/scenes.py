"""Denoise the full-size test scenes on a GPU backend, and score them against Intel OIDN.

Three steps, because the GPU machine has no OpenEXR reader and no pyoidn:

    # here: scene inputs (color_4spp, albedo, normal of each scene) in one .npz
    python bench/scenes.py export --scenes ../shared/testdata/scenes --to inputs.npz
    # on the GPU: rt_hdr_alb_nrm, hdr, autoexposure, through `oidn_gpu.Denoiser`
    python bench/scenes.py denoise --inputs inputs.npz --out outputs.npz \
        --backend {cuda,wgpu} [--precision fp16] [--engine cudnn]
    # here: relative L2 against OIDN 2.5.1 CPU (oidn_4spp_aux.exr) and PSNR against ref.exr
    python bench/scenes.py score --scenes ../shared/testdata/scenes --outputs outputs.npz

The PSNR is the scenes' README metric: tonemap (e*x / (1 + e*x))^(1/2.2), all pixels and
channels, against the converged reference, with the scene's exposure e.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

SCENES = ("cornell_diffuse", "cornell_glossy", "dim_indirect", "textured_checker")
# OIDN 2.5.1 CUDA (H200) vs OIDN CPU, from the scenes' README
OIDN_CUDA_REL_L2 = {
    "cornell_diffuse": 3.62e-3,
    "cornell_glossy": 3.90e-3,
    "dim_indirect": 3.16e-3,
    "textured_checker": 4.19e-3,
}


def _read_exr(path: Path) -> np.ndarray:
    from oidn_gpu.image.io import read_image

    return np.asarray(read_image(path).pixels, np.float32)[..., :3]


def export(scenes: Path, to: Path) -> None:
    arrays = {
        f"{scene}.{name}": _read_exr(scenes / scene / f"{name}.exr")
        for scene in SCENES
        for name in ("color_4spp", "albedo", "normal")
    }
    np.savez_compressed(to, **arrays)


def denoise(inputs: Path, out: Path, backend: str, precision: str, engine: str) -> None:
    from oidn_gpu import Denoiser

    options = {"precision": precision}
    if backend == "cuda":
        options["engine"] = engine
    data = np.load(inputs)
    results = {}
    with Denoiser(hdr=True, backend=backend, **options) as denoiser:
        for scene in SCENES:
            images = {n: data[f"{scene}.{n}"] for n in ("color_4spp", "albedo", "normal")}
            results[scene] = denoiser.denoise(
                images["color_4spp"], albedo=images["albedo"], normal=images["normal"]
            )
        results["info"] = np.array(json.dumps(denoiser.info(), default=str))
    np.savez(out, **results)


def _tonemap(x: np.ndarray, exposure: float) -> np.ndarray:
    y = np.maximum(exposure * x.astype(np.float64), 0)
    return (y / (1 + y)) ** (1 / 2.2)


def _psnr(x: np.ndarray, ref: np.ndarray, exposure: float) -> float:
    mse = np.mean((_tonemap(x, exposure) - _tonemap(ref, exposure)) ** 2)
    return float(10 * np.log10(1 / mse))


def score(scenes: Path, outputs: Path) -> list[dict]:
    data = np.load(outputs)
    rows = []
    for scene in SCENES:
        ours = data[scene]
        oidn = _read_exr(scenes / scene / "oidn_4spp_aux.exr")
        ref = _read_exr(scenes / scene / "ref.exr")
        exposure = json.loads((scenes / scene / "scene.json").read_text())["metrics_exposure"]
        rel = float(np.linalg.norm(ours - oidn) / np.linalg.norm(oidn))
        rows.append(
            {
                "scene": scene,
                "rel_l2_vs_oidn_cpu": rel,
                "oidn_cuda_rel_l2": OIDN_CUDA_REL_L2[scene],
                "psnr": _psnr(ours, ref, exposure),
                "oidn_psnr": _psnr(oidn, ref, exposure),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export")
    p.add_argument("--scenes", type=Path, required=True)
    p.add_argument("--to", type=Path, required=True)
    p = sub.add_parser("denoise")
    p.add_argument("--inputs", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--backend", choices=("cuda", "wgpu"), required=True)
    p.add_argument("--precision", default="fp16")
    p.add_argument("--engine", default="auto", help="cuda only: auto, triton or cudnn")
    p = sub.add_parser("score")
    p.add_argument("--scenes", type=Path, required=True)
    p.add_argument("--outputs", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "export":
        export(args.scenes, args.to)
    elif args.command == "denoise":
        denoise(args.inputs, args.out, args.backend, args.precision, args.engine)
    else:
        rows = score(args.scenes, args.outputs)
        print(
            f"{'scene':<18} {'relL2 vs OIDN CPU':>18} {'OIDN CUDA':>10} {'PSNR':>7} "
            f"{'OIDN PSNR':>9} {'dPSNR':>7}"
        )
        for r in rows:
            print(
                f"{r['scene']:<18} {r['rel_l2_vs_oidn_cpu']:>18.3e} "
                f"{r['oidn_cuda_rel_l2']:>10.2e} "
                f"{r['psnr']:>7.3f} {r['oidn_psnr']:>9.3f} "
                f"{r['psnr'] - r['oidn_psnr']:>+7.3f}"
            )
        ok = all(
            r["rel_l2_vs_oidn_cpu"] <= r["oidn_cuda_rel_l2"]
            and abs(r["psnr"] - r["oidn_psnr"]) <= 0.02
            for r in rows
        )
        print("within OIDN CUDA's distance and 0.02 dB:", ok)
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    sys.exit(main())
