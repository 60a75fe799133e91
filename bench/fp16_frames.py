"""Full-size frames through the wgpu fp16 accumulations on a GPU, scored against Intel OIDN CPU.

Three steps (the GPU machine has no OpenEXR reader and no pyoidn):

    # here: the inputs of the four shared scenes and the caustics frame in one .npz
    # (--oidn: with Intel OIDN CPU's outputs, so that the GPU run scores against them)
    python bench/fp16_frames.py export --scenes ../shared/testdata/scenes \
        --caustics build/caustics --to inputs.npz [--oidn]
    # on the GPU: rt_hdr_alb_nrm, hdr, autoexposure, through `oidn_gpu.Denoiser`: wgpu fp32
    # and wgpu fp16 with each accumulation (and the cuda backend's fp16 with --cuda); prints
    # each output's relative L2 against the wgpu fp32 output (and against OIDN CPU when the
    # inputs hold its outputs), saves the outputs of KEEP
    python bench/fp16_frames.py denoise --inputs inputs.npz --out DIR [--cuda]
    # here: relative L2 against OIDN 2.5.1 CPU (run here on the same inputs)
    python bench/fp16_frames.py score --inputs inputs.npz --outputs DIR

The wgpu fp32 output is within about 2e-6 of OIDN CPU, so a distance to it is the distance to
OIDN CPU within that much (the triangle inequality); `score` measures it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

FRAMES = ("cornell_diffuse", "cornell_glossy", "dim_indirect", "textured_checker", "caustics")
IMAGES = ("color_4spp", "albedo", "normal")
# (name, Denoiser options)
CONFIGS = (
    ("wgpu_fp32", {"backend": "wgpu", "precision": "fp32"}),
    ("wgpu_fp16_f32", {"backend": "wgpu", "precision": "fp16", "accumulation": "f32"}),
    (
        "wgpu_fp16_f16-chains",
        {"backend": "wgpu", "precision": "fp16", "accumulation": "f16-chains"},
    ),
    (
        "wgpu_fp16_f16-partials",
        {"backend": "wgpu", "precision": "fp16", "accumulation": "f16-partials"},
    ),
    # the device's default (on a large GPU: the decoders' parity form, f16 chains of 16, the
    # first and final layers in f32)
    ("wgpu_fp16_default", {"backend": "wgpu", "precision": "fp16"}),
    (
        "wgpu_fp16_full_partials_f32-final",  # the large-GPU default before the parity form
        {
            "backend": "wgpu",
            "precision": "fp16",
            "gemm": {
                "tile_policy": "balanced",
                "shared_load": "pair",
                "shared_layout": "padded",
                "accumulation": "f16-partials",
                "final_accumulation": "f32",
                "final_patch": "padded",
                "final_pixels": 2,
            },
        },
    ),
)


def _parity(accumulation: str) -> tuple[str, dict]:
    """The large-GPU tiles in the parity form with ``accumulation``, the ends in f32."""
    gemm = {
        "tile_policy": "balanced",
        "shared_load": "pair",
        "shared_layout": "padded",
        "decoder_form": "parity",
        "accumulation": accumulation,
        "input_accumulation": "f32",
        "final_accumulation": "f32",
        "final_patch": "padded",
        "final_pixels": 2,
    }
    return f"wgpu_fp16_parity_{accumulation}_f32-ends", {
        "backend": "wgpu",
        "precision": "fp16",
        "gemm": gemm,
    }


CONFIGS += tuple(_parity(a) for a in ("f16-pairs", "f16-lanes", "f16-chains"))
CUDA = ("cuda_fp16", {"backend": "cuda", "precision": "fp16"})
KEEP = ("wgpu_fp32", "wgpu_fp16_f32")  # outputs saved (the others: distances only)


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a64 - b64) / np.linalg.norm(b64))


def export(scenes: Path, caustics: Path, to: Path, with_oidn: bool = False) -> None:
    from oidn_gpu.image.io import read_image

    arrays = {}
    for frame in FRAMES:
        folder = caustics if frame == "caustics" else scenes / frame
        for name in IMAGES:
            pixels = np.asarray(read_image(folder / f"{name}.exr").pixels, np.float32)[..., :3]
            arrays[f"{frame}.{name}"] = pixels
    if with_oidn:
        from tests.oracle import oidn_denoise

        for frame in FRAMES:
            images = [np.ascontiguousarray(arrays[f"{frame}.{n}"]) for n in IMAGES]
            arrays[f"{frame}.oidn"] = np.asarray(oidn_denoise(*images, hdr=True), np.float32)
    np.savez_compressed(to, **arrays)


def denoise(inputs: Path, out: Path, cuda: bool, only: list[str] | None = None) -> None:
    from oidn_gpu import Denoiser

    data = np.load(inputs)
    out.mkdir(parents=True, exist_ok=True)
    outputs: dict[str, dict[str, np.ndarray]] = {}
    configs = [c for c in CONFIGS if only is None or c[0] in ("wgpu_fp32", *only)]
    for name, options in (*configs, *((CUDA,) if cuda else ())):
        started = time.perf_counter()
        results = {}
        with Denoiser(hdr=True, **options) as denoiser:
            for frame in FRAMES:
                images = [data[f"{frame}.{n}"] for n in IMAGES]
                results[frame] = np.asarray(
                    denoiser.denoise(images[0], albedo=images[1], normal=images[2]), np.float32
                )
            info = denoiser.info()
        outputs[name] = results
        base = outputs["wgpu_fp32"]
        row = {
            "config": name,
            "device": getattr(info, "device", None),
            "seconds": round(time.perf_counter() - started, 1),
            "rel_l2_vs_wgpu_fp32": {f: rel_l2(results[f], base[f]) for f in FRAMES},
        }
        if all(f"{f}.oidn" in data for f in FRAMES):
            row["rel_l2_vs_oidn_cpu"] = {f: rel_l2(results[f], data[f"{f}.oidn"]) for f in FRAMES}
        print(json.dumps(row), flush=True)
        if name in KEEP:
            np.savez_compressed(out / f"frames_{name}.npz", **results)


def score(inputs: Path, outputs: Path, log: Path | None) -> None:
    from tests.oracle import oidn_denoise

    data = np.load(inputs)
    oidn = {}
    for frame in FRAMES:
        images = [np.ascontiguousarray(data[f"{frame}.{n}"]) for n in IMAGES]
        oidn[frame] = np.asarray(oidn_denoise(*images, hdr=True), np.float32)
    for path in sorted(outputs.glob("frames_*.npz")):
        frames = np.load(path)
        cells = {f: f"{rel_l2(frames[f], oidn[f]):.3e}" for f in FRAMES}
        print(path.stem.removeprefix("frames_"), "vs OIDN CPU:", json.dumps(cells))
    if log is not None:  # the distances to wgpu fp32 that the GPU run printed
        fp32 = np.load(outputs / "frames_wgpu_fp32.npz")
        bound = {f: rel_l2(fp32[f], oidn[f]) for f in FRAMES}
        cells = {f: f"{v:.1e}" for f, v in bound.items()}
        print("wgpu fp32 vs OIDN CPU (the bound):", json.dumps(cells))
        for line in log.read_text().splitlines():
            if line.startswith('{"config"'):
                row = json.loads(line)
                cells = {f: f"{v:.3e}" for f, v in row["rel_l2_vs_wgpu_fp32"].items()}
                print(row["config"], "vs wgpu fp32:", json.dumps(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export")
    e.add_argument("--scenes", type=Path, required=True)
    e.add_argument("--caustics", type=Path, required=True)
    e.add_argument("--to", type=Path, required=True)
    e.add_argument("--oidn", action="store_true", help="with Intel OIDN CPU's outputs")
    d = sub.add_parser("denoise")
    d.add_argument("--inputs", type=Path, required=True)
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--cuda", action="store_true", help="the cuda backend's fp16 too (last)")
    d.add_argument("--only", nargs="+", metavar="CONFIG", help="these configs (and wgpu_fp32)")
    s = sub.add_parser("score")
    s.add_argument("--inputs", type=Path, required=True)
    s.add_argument("--outputs", type=Path, required=True)
    s.add_argument("--log", type=Path, help="the GPU run's output (distances to wgpu fp32)")
    args = parser.parse_args(argv)
    if args.command == "export":
        if args.oidn:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        export(args.scenes, args.caustics, args.to, args.oidn)
    elif args.command == "denoise":
        denoise(args.inputs, args.out, args.cuda, args.only)
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        score(args.inputs, args.outputs, args.log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
