"""Probe of what a fresh process waits for on the cuda backend (run once per process).

    python bench/h200_first_call.py MODE [--size 1080p] [--json out.json]

MODE: ``cudnn`` (engine cudnn), ``triton`` (engine triton), ``bridge`` (cuDNN frames
while a thread compiles the Triton engine), ``tune`` (tile tuning at the size, choices
printed). Prints wall times of import torch, CUDA init, import oidn_gpu, first and
second denoise, and a denoise at a second size.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

SIZES = {"720p": (720, 1280), "1080p": (1080, 1920), "4k": (2160, 3840), "small": (750, 1000)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    parser.add_argument("--size", default="1080p")
    parser.add_argument("--json")
    args = parser.parse_args()
    t0 = time.perf_counter()
    times: dict[str, float] = {}
    import torch

    times["import_torch"] = time.perf_counter() - t0
    t = time.perf_counter()
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    times["cuda_init"] = time.perf_counter() - t
    t = time.perf_counter()
    import numpy as np

    import oidn_gpu

    times["import_oidn_gpu"] = time.perf_counter() - t
    rng = np.random.default_rng(1)

    def images(size: tuple[int, int]) -> tuple:
        h, w = size
        color = (rng.random((h, w, 3), dtype=np.float32) * 4).astype(np.float32)
        albedo = rng.random((h, w, 3), dtype=np.float32)
        normal = rng.random((h, w, 3), dtype=np.float32) * 2 - 1
        return color, albedo, normal

    first = images(SIZES[args.size])
    second = images(SIZES["small"])
    if args.mode == "tune":
        from oidn_gpu.backends.cuda.executor import CudaExecutor
        from oidn_gpu.model.weights import load_builtin

        ex = CudaExecutor(load_builtin("rt_hdr_alb_nrm"), tune=True)
        for name in ("1080p",):
            h, w = SIZES[name]
            t = time.perf_counter()
            prep = ex.prepare(-(-h // 16) * 16, -(-w // 16) * 16)
            times[f"tune_{name}"] = time.perf_counter() - t
            print(name, {k: v.describe() for k, v in prep.configs.items()})
        print(json.dumps(times))
        return
    if args.mode in ("newsize", "bridge_log"):
        import logging

        logging.basicConfig(level=logging.INFO, format="%(relativeCreated)8.0f ms %(message)s")
    if args.mode == "bridge_log":
        # Every frame's wall time while the bridge serves (per-frame log, then a summary).
        den = oidn_gpu.Denoiser(hdr=True, backend="cuda")
        start = time.perf_counter()
        while time.perf_counter() - start < 40:
            t1 = time.perf_counter()
            den.denoise(*first)
            engine = den.info().device
            print(f"{(time.perf_counter() - start) * 1000:8.0f} ms frame "
                  f"{(time.perf_counter() - t1) * 1000:7.1f} ms {engine}")
            if "while Triton compiles" not in engine:
                break
        return
    if args.mode == "newsize":
        # A warm process: frames until Triton serves, then the first call at new sizes.
        den = oidn_gpu.Denoiser(hdr=True, backend="cuda")
        t = time.perf_counter()
        frames = []
        while time.perf_counter() - t < 120:
            t1 = time.perf_counter()
            den.denoise(*first)
            frames.append(time.perf_counter() - t1)
            if "while Triton compiles" not in den.info().device and len(frames) > 1:
                break
        times["first_denoise"] = frames[0]
        times["bridge_frames"] = len(frames)
        times["median_bridge_frame"] = sorted(frames[1:-1] or frames)[len(frames[1:-1]) // 2]
        times["until_triton"] = time.perf_counter() - t
        for _ in range(3):
            den.denoise(*first)
        t1 = time.perf_counter()
        den.denoise(*first)
        times["triton_1080p_numpy"] = time.perf_counter() - t1
        for name, size in (("1000x750", (750, 1000)), ("1280x720", (720, 1280)),
                           ("1111x555", (555, 1111))):
            imgs = images(size)
            for label in ("first", "second", "third"):
                t1 = time.perf_counter()
                den.denoise(*imgs)
                times[f"{name}_{label}"] = time.perf_counter() - t1
            times[f"{name}_engine"] = den.info().device
        print(args.mode, json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                                     for k, v in times.items()}))
        return
    engine = {"cudnn": "cudnn", "triton": "triton", "bridge": "cudnn"}[args.mode]
    den = oidn_gpu.Denoiser(hdr=True, backend="cuda", engine=engine)
    compiled: dict[str, float] = {}
    worker = None
    if args.mode == "bridge":
        from oidn_gpu.backends.cuda.executor import CudaExecutor
        from oidn_gpu.model.weights import load_builtin

        def compile_triton() -> None:
            t1 = time.perf_counter()
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                ex = CudaExecutor(load_builtin("rt_hdr_alb_nrm"), engine="triton", tune=False)
                ex.prewarm([(1088, 1920)])
            stream.synchronize()
            compiled["background_compile"] = time.perf_counter() - t1

        worker = threading.Thread(target=compile_triton)
        worker.start()
    calls = []
    for index in range(40 if args.mode == "bridge" else 2):
        t = time.perf_counter()
        den.denoise(*first)
        calls.append(time.perf_counter() - t)
        if worker is not None and not worker.is_alive() and index > 2:
            break
    times["first_denoise"] = calls[0]
    times["second_denoise"] = calls[1]
    if worker is not None:
        worker.join()
        times.update(compiled)
        times["frames_during_compile"] = len(calls)
        times["median_frame_during_compile"] = sorted(calls[1:])[len(calls[1:]) // 2]
    t = time.perf_counter()
    den.denoise(*second)
    times["first_denoise_second_size"] = time.perf_counter() - t
    t = time.perf_counter()
    den.denoise(*second)
    times["second_denoise_second_size"] = time.perf_counter() - t
    times["process_wall"] = time.perf_counter() - t0
    print(args.mode, json.dumps({k: round(v, 4) for k, v in times.items()}))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(times, f)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
