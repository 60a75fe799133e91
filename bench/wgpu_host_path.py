"""`oidn_gpu.Denoiser.denoise` on 1080p NumPy arrays through wgpu fp16 with several GEMM options.

The host path a user waits for (upload, the GPU's work, readback) per fp16 sum, the options
taking turns run by run so that every one sees the same machine state:

    python bench/wgpu_host_path.py --runs 30 [--size 1920x1080]

Prints one JSON line per option: the median and p95 wall time (ms) and the median of the
runner's host parts (upload, wait, readback).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

_BASE = {
    "tile_policy": "balanced",
    "shared_load": "pair",
    "shared_layout": "padded",
    "decoder_form": "parity",
    "input_accumulation": "f32",
    "final_accumulation": "f32",
    "final_patch": "padded",
    "final_pixels": 2,
}
OPTIONS = {
    "device default": None,
    "parity, f16-chains16, f32 ends": {**_BASE, "accumulation": "f16-chains16"},
    "parity, f16-pairs, f32 ends": {**_BASE, "accumulation": "f16-pairs"},
    "parity, f16-chains, f32 ends": {**_BASE, "accumulation": "f16-chains"},
}


def main() -> None:
    import oidn_gpu

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--size", default="1920x1080")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    rng = np.random.default_rng(20261201)
    arrays = [
        (rng.random((height, width, 3)) * 4).astype(np.float32),
        rng.random((height, width, 3)).astype(np.float32),
        (rng.random((height, width, 3)) * 2 - 1).astype(np.float32),
    ]
    denoisers = {
        name: oidn_gpu.Denoiser(hdr=True, backend="wgpu", precision="fp16", gemm=gemm)
        for name, gemm in OPTIONS.items()
    }
    walls: dict[str, list[float]] = {name: [] for name in OPTIONS}
    parts: dict[str, list[dict[str, float]]] = {name: [] for name in OPTIONS}
    for run in range(args.runs + 3):
        for name, denoiser in denoisers.items():
            start = time.perf_counter()
            result = denoiser.denoise(arrays[0], albedo=arrays[1], normal=arrays[2])
            elapsed = (time.perf_counter() - start) * 1e3
            if run >= 3:
                walls[name].append(elapsed)
                runner = next(iter(denoiser._engines.values())).runner
                parts[name].append(dict(runner.last_host_ms))
            if not np.isfinite(result).all():
                raise SystemExit(f"{name}: the denoised image has NaN or Inf values")
    for name, denoiser in denoisers.items():
        times = sorted(walls[name])
        keys = parts[name][0].keys()
        print(
            json.dumps(
                {
                    "options": name,
                    "device": denoiser.info().device,
                    "median_ms": round(statistics.median(times), 3),
                    "p95_ms": round(times[int(0.95 * (len(times) - 1))], 3),
                    "parts_ms": {
                        k: round(statistics.median(p[k] for p in parts[name]), 3) for k in keys
                    },
                }
            ),
            flush=True,
        )
        denoiser.close()


if __name__ == "__main__":
    main()
