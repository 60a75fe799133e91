"""The aux input pass beside the autoexposure against one after the other, on an NVIDIA GPU.

For each size: `CudaDenoiser.denoise_tensors` with autoexposure on random HDR colour,
albedo and normal (the benchmark's inputs), ``aux_beside`` off and on alternating
(two rounds each): ``e2e GPU`` (CUDA events around the call, median of 100) and with
the host's enqueue hidden behind a GPU sleep (median of 100), and whether both forms
give the same image bits.

    python bench/h200_beside22.py 720p,1080p,fast,4k

It needs `CudaDenoiser.aux_beside` and the input pass's ``PART`` of commit ``433db4c``,
measured and not kept: beside the autoexposure, the frame was 0.04 ms (720p) to 0.41 ms
(4K) slower (bench/h200_cuda22/cuda22.log; docs/benchmarks.md).
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

import oidn_gpu
from oidn_gpu.backends.cuda import bench as cb
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.runner import CudaDenoiser

RUNS = {"720p": ("rt_hdr_alb_nrm", 720, 1280), "1080p": ("rt_hdr_alb_nrm", 1080, 1920),
        "fast": ("rt_hdr_alb_nrm_small", 1080, 1920), "4k": ("rt_hdr_alb_nrm", 2160, 3840)}
SLEEP_CYCLES = 3_000_000


def _measure(ex, model, height, width, beside: bool) -> tuple[float, float, torch.Tensor]:
    _, images, out, mode, plan = cb.e2e_inputs(torch, ex, model, height, width)
    den = CudaDenoiser(ex)
    den.aux_beside = beside

    def call() -> None:
        den.denoise_tensors(*images, mode=mode, plan=plan, out=out, autoexposure=True)

    for _ in range(20):
        call()
    torch.cuda.synchronize()
    shown, hidden = [], []
    for index in range(200):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if index % 2:
            torch.cuda._sleep(SLEEP_CYCLES)
        start.record()
        call()
        end.record()
        end.synchronize()
        (hidden if index % 2 else shown).append(start.elapsed_time(end))
    image = out.clone()
    den.close()
    return statistics.median(shown), statistics.median(hidden), image


def main() -> None:
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__} oidn_gpu "
          f"{oidn_gpu.__file__}; {time.strftime('%Y-%m-%d %H:%M:%S')}")  # fmt: skip
    for name in sys.argv[1].split(","):
        weights, height, width = RUNS[name]
        model = cb._load(weights)
        ex = CudaExecutor(model, bridge=False, engine="triton")
        images = {}
        for round_ in range(2):
            for beside in (False, True):
                shown, hidden, images[beside] = _measure(ex, model, height, width, beside)
                print(f"{name} round {round_} beside={beside}: e2e GPU {shown:.4f} ms, "
                      f"enqueue hidden {hidden:.4f} ms", flush=True)
        same = torch.equal(images[False], images[True])
        print(f"{name}: the same image bits with and without: {same}", flush=True)
        ex.close()


if __name__ == "__main__":
    main()
