"""Where a `Denoiser.denoise` call on NumPy arrays spends its time on the cuda backend
(1080p rt_hdr_alb_nrm fp16, Triton engine): the public call, the pipeline with and
without a preallocated result, a fresh result array's first touch, and a cProfile of
the public call. Run on the GPU machine: ``python bench/h200_api_profile.py``."""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import statistics
import time

import numpy as np
import torch

import oidn_gpu


def median_ms(fn, runs=40, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times)


def main() -> None:
    print("cpus", os.cpu_count(), "torch threads", torch.get_num_threads(),
          "load", os.getloadavg())
    rng = np.random.default_rng(1)
    h, w = 1080, 1920
    color = (rng.random((h, w, 3)) * 4).astype(np.float32)
    albedo = rng.random((h, w, 3)).astype(np.float32)
    normal = (rng.random((h, w, 3)) * 2 - 1).astype(np.float32)
    opts = dict(hdr=True, backend="cuda", engine="triton", precision="fp16")
    with oidn_gpu.Denoiser(**opts) as den:
        t0 = time.perf_counter()
        den.denoise(color, albedo, normal)
        print(f"first call (compile) {time.perf_counter() - t0:.1f} s")
        print("Denoiser.denoise numpy: median %.2f min %.2f ms" % median_ms(
            lambda: den.denoise(color, albedo, normal)))
        print("np.empty + fill 1080p x3 f32: median %.2f min %.2f ms" % median_ms(
            lambda: np.empty((h, w, 3), np.float32).fill(0)))
        print("np.empty 1080p x3 f32 + copyto: median %.2f min %.2f ms" % median_ms(
            lambda: np.copyto(np.empty((h, w, 3), np.float32), color)))
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(20):
            den.denoise(color, albedo, normal)
        torch.cuda.synchronize()
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(30)
        print(s.getvalue()[:6000])
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(15)
        print(s.getvalue()[:4000])
        same = [torch.from_numpy(a).cuda() for a in (color, albedo, normal)]
        print("Denoiser.denoise torch (same): median %.2f min %.2f ms" % median_ms(
            lambda: den.denoise(*same), runs=100))
        print("Denoiser.denoise numpy after tensors: median %.2f min %.2f ms" % median_ms(
            lambda: den.denoise(color, albedo, normal)))
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(50):
            den.denoise(*same)
        torch.cuda.synchronize()
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
        print(s.getvalue()[:5000])
    print("oidn_gpu.denoise numpy: median %.2f min %.2f ms" % median_ms(
        lambda: oidn_gpu.denoise(color, albedo, normal, **opts)))
    oidn_gpu.clear_denoiser_cache()


if __name__ == "__main__":
    main()
