"""Where the cuda backend's whole-denoise GPU time goes, and which tiles would cut it.

    python3 bench/h200_fused3_probe.py OUT.json

1. ``e2e``: for each row of the benchmark (720p, 1080p, 1080p fast): the command-line
   benchmark's ``e2e GPU`` (CUDA events around `CudaDenoiser.denoise_tensors`), the same
   with the host's enqueue hidden behind a GPU sleep queued first, the host time of the
   call, the network graph alone, and the frame's kernels by device time (torch profiler);
2. ``sweep``: steps timed alone (CUDA graphs of 10 launches, medians) with other tiles
   than the shipped ones, each output against the shipped tile's on the same input
   (relative L2, max abs, bit equality): the row kernel's layers of both networks at
   1080p and 720p, ``dec_conv1a``'s per-layer tiles.
Compiles run first in parallel worker processes (into Triton's disk cache).
"""

from __future__ import annotations

import json
import multiprocessing
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import torch

from oidn_gpu.backends.cuda import layout
from oidn_gpu.backends.cuda.bench import _graph_of, _time_events, e2e_inputs
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.fusion import FusedTail
from oidn_gpu.backends.cuda.runner import CudaDenoiser
from oidn_gpu.backends.cuda.tuning import RowsConfig, TileConfig, project_signature, rows_eligible
from oidn_gpu.model.weights import load_builtin

ROWS = [RowsConfig(64, 32, 4, 3), RowsConfig(64, 16, 4, 3), RowsConfig(64, 16, 4, 2),
        RowsConfig(128, 16, 8, 2), RowsConfig(64, 8, 4, 3)]  # fmt: skip
DEC1A = [TileConfig(128, 64, 32, 4, 3), TileConfig(128, 64, 64, 4, 3),
         TileConfig(256, 64, 32, 8, 3), TileConfig(64, 64, 32, 4, 4),
         TileConfig(128, 64, 64, 8, 4), TileConfig(256, 64, 64, 8, 3),
         TileConfig(128, 64, 32, 4, 4), TileConfig(64, 64, 64, 4, 3),
         TileConfig(128, 64, 16, 4, 4)]  # fmt: skip
SIZES = {"720p": (720, 1280), "1080p": (1088, 1920)}
NETS = {"high": "rt_hdr_alb_nrm", "fast": "rt_hdr_alb_nrm_small"}


def _executor(net: str, rows: bool = True) -> CudaExecutor:
    return CudaExecutor(load_builtin(NETS[net]), precision="fp16", engine="triton", tune=False,
                        bridge=False, rows=rows)  # fmt: skip


def _key(ex: CudaExecutor, step) -> str:
    return project_signature(step.hidden) if isinstance(step, FusedTail) else step.name


def _jobs() -> tuple[list[tuple[str, str, int, object]], list[tuple[str, str, int, object]]]:
    """(net, size, step index, config) of every candidate, and of every shipped tile."""
    out, shipped = [], []
    for net in NETS:
        ex = _executor(net)
        prep = ex.prepare(64, 64)
        for i, step in enumerate(ex.steps):
            shipped.append((net, "1080p", i, prep.configs[_key(ex, step)]))
            conv = step.hidden if isinstance(step, FusedTail) else step
            level = round(np.log2(64 / layout.conv_shapes(prep.plan, conv)[0]))
            if net == "fast" and (conv.name in ("enc_conv0", "enc_conv1") or level > 2):
                continue  # the high network's signatures, or a layer of a few microseconds
            if rows_eligible(conv):
                sizes = SIZES if net == "high" or isinstance(step, FusedTail) else ("1080p",)
                out += [(net, s, i, c) for s in sizes for c in ROWS]
            if net == "high" and conv.name == "dec_conv1a":
                out += [(net, s, i, c) for s in SIZES for c in DEC1A]
        ex.close()
    return out, shipped


_WORKERS: dict[str, CudaExecutor] = {}


def _compile(job) -> str:
    net, size, index, config = job
    ex = _WORKERS.get(net) or _WORKERS.setdefault(net, _executor(net))
    prep = ex.prepare(*SIZES["1080p"])
    step = ex.steps[index]
    prep.configs[_key(ex, step)] = config
    start = time.perf_counter()
    try:
        ex.launch_step(prep, step, ex._raw_target(prep))
        torch.cuda.synchronize()
    except Exception as err:
        return f"{net} {index} {config}: {type(err).__name__}: {err}"[:300]
    return f"{net} {index}: {time.perf_counter() - start:.1f}s"


def _time(fn) -> float:
    graph = _graph_of(torch, fn, 10)
    return statistics.median(_time_events(torch, graph.replay, 30, 3)) / 10


def _output(prep, step):
    return prep.scratch if isinstance(step, FusedTail) else prep.views[step.value]


def sweep(jobs) -> list[dict]:
    rows = []
    by_case: dict[tuple[str, str], list] = {}
    for net, size, index, config in jobs:
        by_case.setdefault((net, size), []).append((index, config))
    for (net, size), cases in by_case.items():
        torch.manual_seed(0)
        ex = _executor(net)
        prep = ex.prepare(*SIZES[size])
        x = ex.input_view(prep, *SIZES[size])
        x.copy_(torch.rand(x.shape, device=x.device).to(x.dtype))
        x[..., ex.input_channels :] = 0
        target = ex._raw_target(prep)
        shipped = {i: prep.configs[_key(ex, s)] for i, s in enumerate(ex.steps)}
        reference = {}  # each step's output as the shipped tiles make it (slots are reused)
        for i, s in enumerate(ex.steps):
            ex.launch_step(prep, s, target)
            if any(i == j for j, _ in cases):
                reference[i] = _output(prep, s).clone()
        for index, config in cases:
            step = ex.steps[index]
            key = _key(ex, step)
            for j in range(index):
                ex.launch_step(prep, ex.steps[j], target)
            base = _time(lambda: ex.launch_step(prep, step, target))
            prep.configs[key] = config
            row = {"net": net, "size": size, "step": step.name, "shipped": shipped[index]
                   .describe(), "shipped_ms": base, "tile": config.describe()}  # fmt: skip
            try:
                ex.launch_step(prep, step, target)
                out, ref = _output(prep, step).double(), reference[index].double()
                row["rel_l2"] = float((out - ref).norm() / ref.norm())
                row["same_bits"] = bool(torch.equal(_output(prep, step), reference[index]))
                row["ms"] = _time(lambda: ex.launch_step(prep, step, target))
            except Exception as err:
                row["error"] = str(err)[:200]
            prep.configs[key] = shipped[index]
            print(json.dumps(row), flush=True)
            rows.append(row)
        ex.close()
    return rows


def e2e(net: str, size: str) -> dict:
    height, width = {"720p": (720, 1280), "1080p": (1080, 1920)}[size]
    ex = _executor(net)
    _, images, out, mode, plan = e2e_inputs(torch, ex, ex.model, height, width)
    denoiser = CudaDenoiser(ex)

    def call() -> None:
        denoiser.denoise_tensors(*images, mode=mode, plan=plan, out=out, autoexposure=True)

    for _ in range(5):
        call()
    torch.cuda.synchronize()
    plain = statistics.median(_time_events(torch, call, 100, 10))
    hidden, host_ms = [], []
    for _ in range(100):
        torch.cuda._sleep(3_000_000)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t = time.perf_counter()
        call()
        host_ms.append((time.perf_counter() - t) * 1e3)
        end.record()
        end.synchronize()
        hidden.append(start.elapsed_time(end))
    prep = ex.prepare(plan.tile_h, plan.tile_w)
    x = ex.input_view(prep, plan.tile_h, plan.tile_w)
    net_graph = _graph_of(torch, lambda: ex.forward(x, prep=prep))
    net_ms = statistics.median(_time_events(torch, net_graph.replay, 100, 10))
    from torch.profiler import ProfilerActivity, profile

    torch.cuda._sleep(3_000_000)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            call()
        torch.cuda.synchronize()
    kernels = {}
    for event in prof.key_averages():
        us = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
        if us:
            kernels[event.key[:90]] = (us / 5e3, event.count // 5)
    result = {"net": net, "size": size, "e2e_gpu_ms": plain, "e2e_gpu_host_hidden_ms":
              statistics.median(hidden), "host_enqueue_ms": statistics.median(host_ms),
              "network_graph_ms": net_ms,
              "kernels_ms": dict(sorted(kernels.items(), key=lambda kv: -kv[1][0]))}  # fmt: skip
    print(json.dumps(result, indent=1), flush=True)
    denoiser.close()
    ex.close()
    return result


def main(out_path: str) -> None:
    results: dict = {"e2e": []}
    jobs, shipped = _jobs()
    start = time.perf_counter()
    with ProcessPoolExecutor(12, mp_context=multiprocessing.get_context("spawn")) as pool:
        unique = list({(n, i, c): (n, z, i, c) for n, z, i, c in shipped + jobs}.values())
        compiled = list(pool.map(_compile, unique))
    errors = [c for c in compiled if "Error" in c]
    print(f"compiled {len(compiled)} in {time.perf_counter() - start:.1f}s; errors {errors}",
          flush=True)  # fmt: skip
    for net, size in (("high", "720p"), ("high", "1080p"), ("fast", "1080p")):
        results["e2e"].append(e2e(net, size))
        with open(out_path, "w") as f:
            json.dump(results, f, indent=1)
    results["sweep"] = sweep(jobs)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
