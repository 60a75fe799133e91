"""Frames per second of a 1080p sequence through `Denoiser`: one `denoise` call per frame
against `denoise_many` (which uploads and submits frame i + 1 before reading frame i back).

    python bench/sequence_throughput.py --backend wgpu --precision fp16 --frames 30 --repeat 5

Eight distinct random HDR frames (color, albedo, normal, float32) cycle through the sequence;
each repetition times the whole sequence with `time.perf_counter`; medians are printed.
The two paths' outputs are compared (they must be equal).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np


def _frames(height: int, width: int, distinct: int) -> list[tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(0)
    frames = []
    for _ in range(distinct):
        color = (rng.random((height, width, 3), np.float32) ** 3 * 8).astype(np.float32)
        albedo = rng.random((height, width, 3), np.float32)
        normal = rng.random((height, width, 3), np.float32) * 2 - 1
        frames.append((color, albedo, normal))
    return frames


def main(argv: list[str] | None = None) -> int:
    from oidn_gpu import Denoiser

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="wgpu")
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--size", default="1920x1080", help="WIDTHxHEIGHT")
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--distinct", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    frames = _frames(height, width, args.distinct)
    sequence = [frames[i % len(frames)] for i in range(args.frames)]
    options = {"hdr": True, "backend": args.backend, "precision": args.precision}
    with Denoiser(**options) as den:
        one = [den.denoise(*f) for f in frames]  # warm-up: compiles, buffers
        many = list(den.denoise_many(frames))
        assert all(np.array_equal(a, b) for a, b in zip(one, many, strict=True)), "outputs differ"
        times = {"denoise per frame": [], "denoise_many": []}
        for _ in range(args.repeat):
            start = time.perf_counter()
            for f in sequence:
                den.denoise(*f)
            times["denoise per frame"].append(time.perf_counter() - start)
            start = time.perf_counter()
            for _ in den.denoise_many(sequence):
                pass
            times["denoise_many"].append(time.perf_counter() - start)
        print(
            f"{args.frames} frames of {width}x{height}, {den.info().backend} "
            f"{den.info().precision} on {den.info().device}, median of {args.repeat}"
        )
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"{name:20s} {median * 1e3 / args.frames:7.2f} ms/frame "
            f"{args.frames / median:7.1f} frames/s"
        )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    sys.exit(main())
