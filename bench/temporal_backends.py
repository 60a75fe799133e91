"""The repository's temporal test sequences through one GPU backend, for comparison with
the reference backend (docs/benchmarks.md, "Temporal mode against per-frame denoising").

A GPU machine without an EXR reader gets the sequences' images as arrays:

    python bench/temporal_backends.py export tests/data/sequences/{static,orbit,moving} \
        --to sequences.npz                                   # here (OpenImageIO)
    python bench/temporal_backends.py run --data sequences.npz --backend cuda \
        --to cuda.npz                                        # on the GPU machine
    python bench/temporal_backends.py score tests/data/sequences/{static,orbit,moving} \
        --outputs cuda.npz                                   # here: metrics, and distances
                                                             # to the reference backend's

``run`` denoises each sequence per frame (`Denoiser.denoise_many`) and in temporal mode
(`TemporalDenoiser.denoise_many`, default parameters), HDR with albedo, normal, motion and
depth, as `bench/temporal_mode.py` does from the files.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

IMAGES = ("color", "albedo", "normal", "motion", "depth")


def export(sequences: list[Path], to: Path) -> None:
    import temporal_stability as ts

    arrays: dict[str, np.ndarray] = {}
    for directory in sequences:
        for i, f in enumerate(ts.load_sequence(directory)):
            motion = np.where(f.motion.invalid[..., None], np.nan, f.motion.backward)
            for key, value in zip(
                IMAGES, (f.color, f.albedo, f.normal, motion, f.depth), strict=True
            ):
                arrays[f"{directory.name}/{i:03d}/{key}"] = np.asarray(value, np.float32)
    np.savez_compressed(to, **arrays)


def _frames(data: dict[str, np.ndarray], name: str) -> list[dict[str, np.ndarray]]:
    count = len({k.split("/")[1] for k in data if k.startswith(name + "/")})
    return [{key: data[f"{name}/{i:03d}/{key}"] for key in IMAGES} for i in range(count)]


def run(data_path: Path, backend: str, to: Path, options: dict) -> None:
    from oidn_gpu import Denoiser, TemporalDenoiser

    data = dict(np.load(data_path))
    names = sorted({k.split("/")[0] for k in data})
    outputs: dict[str, np.ndarray] = {}
    for name in names:
        frames = _frames(data, name)
        with Denoiser(hdr=True, backend=backend, **options) as den:
            items = [(f["color"], f["albedo"], f["normal"]) for f in frames]
            for i, out in enumerate(den.denoise_many(items)):
                outputs[f"{name}/per-frame/{i:03d}"] = np.asarray(out, np.float32)[..., :3]
        with TemporalDenoiser(hdr=True, backend=backend, **options) as td:
            for i, out in enumerate(td.denoise_many(frames)):
                outputs[f"{name}/temporal/{i:03d}"] = np.asarray(out, np.float32)[..., :3]
        print(f"{backend} {name}: {len(frames)} frames", flush=True)
    np.savez_compressed(to, **outputs)


def score(sequences: list[Path], outputs_path: Path) -> None:
    import temporal_mode
    import temporal_stability as ts

    outputs = dict(np.load(outputs_path))
    print(
        "| sequence | method | instability | rel. L2 | PSNR dB | disocc. PSNR dB | "
        "rel. L2 to the reference backend (max over frames) |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for directory in sequences:
        frames = ts.load_sequence(directory)
        oracle = {
            "per-frame": ts.per_frame("reference")(frames),
            "temporal": temporal_mode.temporal("reference", {})(frames),
        }
        for method, expected in oracle.items():
            got = [outputs[f"{directory.name}/{method}/{i:03d}"] for i in range(len(frames))]
            m = ts.evaluate(frames, got)
            worst = max(
                float(np.linalg.norm(g - e) / np.linalg.norm(e))
                for g, e in zip(got, expected, strict=True)
            )
            print(
                f"| {directory.name} | {method} | {m.instability:.4f} | "
                f"{m.mean_relative_l2:.4f} | {m.mean_psnr_db:.2f} | "
                f"{m.disoccluded_psnr_db:.2f} | {worst:.2e} |"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export")
    p.add_argument("sequences", nargs="+", type=Path)
    p.add_argument("--to", type=Path, required=True)
    p = sub.add_parser("run")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--backend", required=True)
    p.add_argument("--to", type=Path, required=True)
    p.add_argument("--engine", default=None, help="cuda: triton or cudnn")
    p = sub.add_parser("score")
    p.add_argument("sequences", nargs="+", type=Path)
    p.add_argument("--outputs", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "export":
        export(args.sequences, args.to)
    elif args.command == "run":
        run(args.data, args.backend, args.to, {"engine": args.engine} if args.engine else {})
    else:
        score(args.sequences, args.outputs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
