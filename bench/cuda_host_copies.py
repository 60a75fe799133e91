"""Host <-> GPU copy strategies for the CUDA backend's NumPy path, timed apart from the network.

Three HxWx3 float32 images go up to device buffers and one comes back, the way
`CudaDenoiser.denoise` moves them, through each strategy:

- ``pool T/P``: T Python threads, each image cut into P row chunks copied into a
  pinned buffer (np.copyto, which releases the GIL); ``round per image`` waits
  for each image's chunks before its upload (one thread wake-up round per
  image), ``one round`` submits every chunk at once and each thread queues its
  own chunk's upload on an upload stream;
- ``torch copy``: ``pinned.copy_(torch.from_numpy(a))`` on torch's CPU threads,
  the upload queued after each image (or after each of 4 row bands);
- ``pin_memory()``: a fresh pinned copy of each array from torch's host cache;
- ``cudaHostRegister``: the caller's arrays page-locked for the call, uploaded
  from in place, unregistered after (register and unregister timed alone too);
- ``pageable``: CUDA's own copies from pageable memory.

Downloads: 1 or 4 row bands into a pinned buffer, copied out by a pool (one
round, threads waiting on the band events) or by torch; register the output; pageable.

Every strategy's result is checked against the source arrays (poisoned first).
Wall times: median of ``--runs`` after warm-up; inputs rotate between two sets.

    python bench/cuda_host_copies.py --size 1080p --runs 40 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

SIZES = {"720p": (720, 1280), "1080p": (1080, 1920), "4k": (2160, 3840)}


def chunks(rows: int, parts: int) -> list[tuple[int, int]]:
    return [(rows * i // parts, rows * (i + 1) // parts) for i in range(parts)]


def timed(fn, runs: int, warmup: int = 5) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="1080p", choices=sorted(SIZES))
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    height, width = SIZES[args.size]
    rng = np.random.default_rng(7)
    sets = [[rng.random((height, width, 3), dtype=np.float32) for _ in range(3)] for _ in range(2)]
    shape = (height, width, 3)
    devs = [torch.empty(shape, device="cuda") for _ in range(3)]
    pinned = [torch.empty(shape, pin_memory=True) for _ in range(3)]
    stream = torch.cuda.current_stream()
    upload_stream = torch.cuda.Stream()
    cudart = torch.cuda.cudart()
    pools = {t: ThreadPoolExecutor(t) for t in (3, 4, 8, 16)}
    counter = [0]

    def inputs():
        counter[0] += 1
        return sets[counter[0] % 2]

    def pool_per_image(threads, parts):
        def run():
            for a, host, dev in zip(inputs(), pinned, devs, strict=True):
                hn = host.numpy()
                list(
                    pools[threads].map(
                        lambda b, hn=hn, a=a: np.copyto(hn[b[0] : b[1]], a[b[0] : b[1]]),
                        chunks(height, parts),
                    )
                )
                dev.copy_(host, non_blocking=True)

        return run

    def pool_one_round(threads, parts):
        def stage(a, host, dev, y0, y1):
            np.copyto(host[y0:y1].numpy(), a[y0:y1])
            with torch.cuda.stream(upload_stream):
                dev[y0:y1].copy_(host[y0:y1], non_blocking=True)

        def run():
            upload_stream.wait_stream(stream)
            tasks = [
                pools[threads].submit(stage, a, host, dev, y0, y1)
                for a, host, dev in zip(inputs(), pinned, devs, strict=True)
                for y0, y1 in chunks(height, parts)
            ]
            for t in tasks:
                t.result()
            stream.wait_stream(upload_stream)

        return run

    def torch_copy(bands):
        def run():
            for a, host, dev in zip(inputs(), pinned, devs, strict=True):
                src = torch.from_numpy(a)
                for y0, y1 in chunks(height, bands):
                    host[y0:y1].copy_(src[y0:y1])
                    dev[y0:y1].copy_(host[y0:y1], non_blocking=True)

        return run

    def pin_memory():
        keep = []
        for a, dev in zip(inputs(), devs, strict=True):
            p = torch.from_numpy(a).pin_memory()
            dev.copy_(p, non_blocking=True)
            keep.append(p)
        torch.cuda.synchronize()

    def check(code, what):
        code = int(code)
        if code != 0:
            raise RuntimeError(f"{what} failed with cudaError {code}")

    def register():
        arrays = inputs()
        for a in arrays:
            check(cudart.cudaHostRegister(a.ctypes.data, a.nbytes, 0), "cudaHostRegister")
        for a, dev in zip(arrays, devs, strict=True):
            dev.copy_(torch.from_numpy(a), non_blocking=True)
        torch.cuda.synchronize()
        for a in arrays:
            check(cudart.cudaHostUnregister(a.ctypes.data), "cudaHostUnregister")

    def register_only():
        arrays = inputs()
        for a in arrays:
            check(cudart.cudaHostRegister(a.ctypes.data, a.nbytes, 0), "cudaHostRegister")
        for a in arrays:
            check(cudart.cudaHostUnregister(a.ctypes.data), "cudaHostUnregister")

    def pageable():
        for a, dev in zip(inputs(), devs, strict=True):
            dev.copy_(torch.from_numpy(a))

    uploads = {
        "pool 16/16 round per image (before)": pool_per_image(16, 16),
        "pool 8/8 round per image": pool_per_image(8, 8),
        "pool 3/1 round per image": pool_per_image(3, 1),
        "pool 4/4 one round": pool_one_round(4, 4),
        "pool 8/8 one round": pool_one_round(8, 8),
        "pool 16/16 one round": pool_one_round(16, 16),
        "pool 8/2 one round": pool_one_round(8, 2),
        "torch copy, per image": torch_copy(1),
        "torch copy, 4 bands": torch_copy(4),
        "pin_memory()": pin_memory,
        "cudaHostRegister + upload + unregister": register,
        "cudaHostRegister + unregister alone": register_only,
        "pageable": pageable,
    }
    results: dict[str, dict[str, float | str]] = {"upload": {}, "download": {}, "info": {}}
    results["info"] = {
        "torch_threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "size": args.size,
        "runs": args.runs,
    }
    for name, fn in uploads.items():
        try:
            ms = timed(fn, args.runs)
            for dev in devs:
                dev.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            current = sets[counter[0] % 2]
            ok = name == "cudaHostRegister + unregister alone" or all(
                torch.equal(dev.cpu(), torch.from_numpy(a))
                for dev, a in zip(devs, current, strict=True)
            )
            results["upload"][name] = round(ms, 3) if ok else f"WRONG ({ms:.3f})"
        except Exception as exc:  # one failing strategy must not hide the others
            results["upload"][name] = f"error: {exc}"
        print(f"upload   {name:45} {results['upload'][name]}", flush=True)

    # downloads: dev_out -> target
    dev_out = torch.rand(shape, device="cuda")
    expected = dev_out.cpu().numpy()
    host_out = torch.empty(shape, pin_memory=True)
    targets = [np.empty(shape, np.float32) for _ in range(2)]
    for t in targets:
        t.fill(0)

    def target():
        counter[0] += 1
        return targets[counter[0] % 2]

    def banded(bands, threads, parts):
        def run():
            out = target()
            events = []
            for y0, y1 in chunks(height, bands):
                host_out[y0:y1].copy_(dev_out[y0:y1], non_blocking=True)
                e = torch.cuda.Event()
                e.record(stream)
                events.append(e)
            hn = host_out.numpy()
            if threads == 0:
                dst = torch.from_numpy(out)
                for e, (y0, y1) in zip(events, chunks(height, bands), strict=True):
                    e.synchronize()
                    dst[y0:y1].copy_(host_out[y0:y1])
                return

            def copy_out(e, y0, y1):
                e.synchronize()
                np.copyto(out[y0:y1], hn[y0:y1])

            tasks = [
                pools[threads].submit(copy_out, e, b0 + c0, b0 + c1)
                for e, (b0, b1) in zip(events, chunks(height, bands), strict=True)
                for c0, c1 in chunks(b1 - b0, parts)
            ]
            for t in tasks:
                t.result()

        return run

    def banded_rounds(bands, threads, parts):  # the code before: one pool round per band
        def run():
            out = target()
            events = []
            for y0, y1 in chunks(height, bands):
                host_out[y0:y1].copy_(dev_out[y0:y1], non_blocking=True)
                e = torch.cuda.Event()
                e.record(stream)
                events.append(e)
            hn = host_out.numpy()
            for e, (b0, b1) in zip(events, chunks(height, bands), strict=True):
                e.synchronize()
                list(
                    pools[threads].map(
                        lambda c, b0=b0: np.copyto(
                            out[b0 + c[0] : b0 + c[1]], hn[b0 + c[0] : b0 + c[1]]
                        ),
                        chunks(b1 - b0, parts),
                    )
                )

        return run

    def register_out():
        out = target()
        check(cudart.cudaHostRegister(out.ctypes.data, out.nbytes, 0), "cudaHostRegister")
        torch.from_numpy(out).copy_(dev_out, non_blocking=True)
        torch.cuda.synchronize()
        check(cudart.cudaHostUnregister(out.ctypes.data), "cudaHostUnregister")

    def pageable_out():
        torch.from_numpy(target()).copy_(dev_out)

    downloads = {
        "4 bands, pool 16/16 round per band (before)": banded_rounds(4, 16, 16),
        "4 bands, pool 8 one round (2/band)": banded(4, 8, 2),
        "4 bands, pool 16 one round (4/band)": banded(4, 16, 4),
        "4 bands, pool 4 one round (1/band)": banded(4, 4, 1),
        "1 band, pool 8 (8 parts)": banded(1, 8, 8),
        "4 bands, torch copy": banded(4, 0, 0),
        "1 band, torch copy": banded(1, 0, 0),
        "cudaHostRegister output": register_out,
        "pageable": pageable_out,
    }
    for name, fn in downloads.items():
        try:
            ms = timed(fn, args.runs)
            for t in targets:
                t.fill(np.nan)
            fn()
            torch.cuda.synchronize()
            ok = np.array_equal(targets[counter[0] % 2], expected)
            results["download"][name] = round(ms, 3) if ok else f"WRONG ({ms:.3f})"
        except Exception as exc:
            results["download"][name] = f"error: {exc}"
        print(f"download {name:45} {results['download'][name]}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
