"""The host side of a repeated frame, and the autoexposure's launches, on an NVIDIA GPU.

Run with either source tree first on the path (the same code times both):

- ``enqueue``: host time of one `CudaDenoiser.denoise_tensors` call of a render loop (the
  same tensors every call; the call returns once the frame graph is queued), median of
  300; and the benchmark's ``e2e GPU`` (CUDA events around the call) with the host's
  enqueue shown, and hidden behind a GPU sleep queued before the first event;
- ``api`` (default weights): host time of `oidn_gpu.Denoiser.denoise` on CUDA tensors
  (median of 200, the GPU busy with a sleep meanwhile);
- ``autoexposure`` (with ``--autoexposure``): one launch against two, each captured in a
  CUDA graph, per replay (median of 7 rounds of 200 replays), and whether the scales are
  equal bit for bit. It needs the one-launch kernel of commit ``fc5fc1d``'s
  `backends.cuda.autoexposure` (``steps``, ``new_counter``), which was measured and not
  kept (docs/benchmarks.md).

    python bench/e2e22_host.py 1280x720 [--weights rt_hdr_alb_nrm_small] [--autoexposure]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import oidn_gpu
from oidn_gpu.backends.cuda import bench as cuda_bench
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.runner import CudaDenoiser

SLEEP_CYCLES = 3_000_000  # about 1.5 ms of GPU sleep: the enqueue finishes under it


def _enqueue(executor, model, height, width):
    _, images, out, mode, plan = cuda_bench.e2e_inputs(torch, executor, model, height, width)
    den = CudaDenoiser(executor)

    def call():
        den.denoise_tensors(*images, mode=mode, plan=plan, out=out, autoexposure=True)

    for _ in range(20):
        call()
    torch.cuda.synchronize()
    host, shown, hidden = [], [], []
    for index in range(300):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if index % 2:
            torch.cuda._sleep(SLEEP_CYCLES)
        start.record()
        t0 = time.perf_counter()
        call()
        host.append((time.perf_counter() - t0) * 1e3)
        end.record()
        end.synchronize()
        (hidden if index % 2 else shown).append(start.elapsed_time(end))
    den.close()
    med = statistics.median
    print(f"enqueue {height}x{width}: host {med(host) * 1e3:.1f} us per call; e2e GPU "
          f"{med(shown):.3f} ms, enqueue hidden {med(hidden):.3f} ms")


def _api(height, width):
    images = [torch.rand((height, width, 3), device="cuda") for _ in range(3)]
    with oidn_gpu.Denoiser(backend="cuda", engine="triton", hdr=True) as den:
        for _ in range(20):
            den.denoise(*images)
        torch.cuda.synchronize()
        host = []
        for _ in range(200):
            torch.cuda._sleep(SLEEP_CYCLES)
            t0 = time.perf_counter()
            den.denoise(*images)
            host.append((time.perf_counter() - t0) * 1e3)
            torch.cuda.synchronize()
        print(f"api {height}x{width}: Denoiser.denoise host {statistics.median(host) * 1e3:.1f} "
              f"us per call ({den.info().device})")


def _autoexposure(height, width):
    from oidn_gpu.backends.cuda.autoexposure import autoexposure, new_counter
    from oidn_gpu.backends.cuda.images import describe

    color = describe(torch.rand((height, width, 3), device="cuda") ** 3 * 4, "color")
    scales, times = {}, {}
    for steps in (1, 2):
        scale, counter = torch.zeros(1, device="cuda"), new_counter("cuda")
        autoexposure(color, scale, "triton", counter=counter, steps=steps)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            autoexposure(color, scale, "triton", counter=counter, steps=steps)
        rounds = []
        for _ in range(7):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(200):
                graph.replay()
            end.record()
            end.synchronize()
            rounds.append(start.elapsed_time(end) / 200)
        scales[steps], times[steps] = scale.clone(), statistics.median(rounds)
    same = torch.equal(scales[1].view(torch.int32), scales[2].view(torch.int32))
    print(f"autoexposure {height}x{width}: one launch {times[1] * 1e3:.2f} us, two launches "
          f"{times[2] * 1e3:.2f} us per graph replay; scales equal: {same} ({scales[1].item()!r})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("size")
    parser.add_argument("--weights", default=cuda_bench.DEFAULT_WEIGHTS)
    parser.add_argument("--autoexposure", action="store_true")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    print("oidn_gpu", oidn_gpu.__file__, "weights", args.weights)
    model = cuda_bench._load(args.weights)
    steps = [lambda: _enqueue(CudaExecutor(model, bridge=False), model, height, width)]
    if args.weights == cuda_bench.DEFAULT_WEIGHTS:
        steps.append(lambda: _api(height, width))
    if args.autoexposure:
        steps.append(lambda: _autoexposure(height, width))
    for step in steps:
        try:
            step()
        except Exception as err:  # report and go on: one call on the GPU runs them all
            print(f"FAILED {type(err).__name__}: {err}")


if __name__ == "__main__":
    main()
