"""Reference backend time per BLAS thread count (OPENBLAS_NUM_THREADS per run).

Story: how many BLAS threads the reference backend should use by default. Each
thread count runs in its own process (OpenBLAS reads its thread count at start),
denoising one image (rt_hdr_alb_nrm, quality "balanced") after a warm-up run;
the median of --runs is printed with the load average, since a loaded machine
changes the answer.

    python bench/reference_threads.py --size 256 --threads 1 2 4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def _child(size: int, runs: int) -> None:
    import numpy as np

    import oidn_gpu

    rng = np.random.default_rng(0)
    color = (rng.random((size, size, 3), np.float32) * 4).astype(np.float32)
    albedo = rng.random((size, size, 3), np.float32)
    normal = rng.random((size, size, 3), np.float32) * 2 - 1
    with oidn_gpu.Denoiser(hdr=True, quality="balanced", backend="reference") as den:
        den.denoise(color, albedo, normal)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            den.denoise(color, albedo, normal)
            times.append(time.perf_counter() - start)
    print(json.dumps({"median_s": statistics.median(times), "load": os.getloadavg()[0]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.size, args.runs)
        return
    for threads in args.threads:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
        command = [sys.executable, __file__, "--child", "--size", str(args.size)]
        out = subprocess.run(
            [*command, "--runs", str(args.runs)], env=env, capture_output=True, text=True,
            check=True,
        ).stdout
        result = json.loads(out.strip().splitlines()[-1])
        print(f"{args.size}x{args.size} threads={threads}: {result['median_s']:.3f} s "
              f"(load {result['load']:.2f})", flush=True)


if __name__ == "__main__":
    main()
