"""NumPy results from pinned pooled arrays against fresh ``np.empty`` arrays on the cuda
backend (1080p rt_hdr_alb_nrm fp16, Triton engine), in the order `oidn-gpu bench` runs
its public-API rows: NumPy, torch tensors (200 calls), NumPy again, the one-call API.
Wall medians and minor page faults per call. Run on the GPU machine:
``python bench/h200_host_results.py``."""

from __future__ import annotations

import os
import resource
import statistics
import time

import numpy as np
import torch

import oidn_gpu
from oidn_gpu.backends.cuda.host_results import PinnedResults


def timed(fn, runs=30, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times, faults = [], []
    for _ in range(runs):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    return statistics.median(times), min(times), statistics.median(faults)


def report(label, result):
    print(f"{label:52s} median {result[0]:6.2f} ms  min {result[1]:6.2f}  faults {result[2]:7.0f}",
          flush=True)


def run(pool: bool) -> None:
    rng = np.random.default_rng(1)
    h, w = 1080, 1920
    color = (rng.random((h, w, 3)) * 4).astype(np.float32)
    albedo = rng.random((h, w, 3)).astype(np.float32)
    normal = (rng.random((h, w, 3)) * 2 - 1).astype(np.float32)
    opts = dict(hdr=True, backend="cuda", engine="triton", precision="fp16")
    tag = "pool" if pool else "np.empty"
    with oidn_gpu.Denoiser(**opts) as den:
        den.denoise(color, albedo, normal)
        (engine,) = den._engines.values()
        runner = engine.runner.denoiser
        runner.wait_compiled()
        if not pool:
            runner._results = PinnedResults(torch, slots=0)
        first = den.denoise(color, albedo, normal).copy()
        report(f"[{tag}] Denoiser.denoise numpy", timed(lambda: den.denoise(color, albedo, normal)))
        tensors = [torch.from_numpy(a).cuda() for a in (color, albedo, normal)]
        report(f"[{tag}] Denoiser.denoise torch (same tensors)",
               timed(lambda: den.denoise(*tensors), runs=200))
        report(f"[{tag}] Denoiser.denoise numpy after tensors",
               timed(lambda: den.denoise(color, albedo, normal)))
        kept = [den.denoise(color, albedo, normal) for _ in range(4)]
        assert all(np.array_equal(k, first) for k in kept), "a held result changed"
        del kept
    if pool:
        oidn_gpu.denoise(color, albedo, normal, **opts)
        report(f"[{tag}] oidn_gpu.denoise numpy, one call per image",
               timed(lambda: oidn_gpu.denoise(color, albedo, normal, **opts), warmup=20))
        oidn_gpu.clear_denoiser_cache()


def main() -> None:
    print("cpus", os.cpu_count(), "torch threads", torch.get_num_threads(),
          "load", os.getloadavg(), flush=True)
    run(pool=False)
    run(pool=True)
    run(pool=False)
    run(pool=True)


if __name__ == "__main__":
    main()
