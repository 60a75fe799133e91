"""Row-kernel tiles for the few-channel layers on a GPU: sweep, accuracy, tuning cache.

    python3 bench/h200_rows_sweep.py OUT.json [CACHE.json]

For ``rt_hdr_alb_nrm`` (fp16, the default ``project`` tail) at 1088x1920 on random input:

1. compiles every candidate tile of every layer the row kernel can run, in parallel worker
   processes (into Triton's disk cache);
2. times each such step with its per-layer kernel and with each row tile (CUDA graphs of
   10 launches, medians), and checks each row tile's output against the per-layer
   kernel's on the same input (relative L2, max abs);
3. the whole network's raw output with the fastest tiles against the per-layer one;
4. writes the fastest tile per layer signature (where it beats the per-layer kernel) as
   ``rows:`` entries of a tuning cache (default ``~/.cache/oidn-gpu/cuda-tuning.json``),
   which `CudaExecutor` then uses without tuning, and OUT.json with every number.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict

import torch

from oidn_gpu.backends.cuda.bench import _graph_of, _time_events
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.fusion import FusedTail
from oidn_gpu.backends.cuda.tuning import (
    RowsConfig,
    Tuner,
    project_signature,
    rows_eligible,
    rows_key,
)
from oidn_gpu.model.weights import load_builtin

SIZE = (1088, 1920)
CANDIDATES = [  # block_w, rows, warps, stages
    RowsConfig(64, 16, 4, 3),
    RowsConfig(64, 32, 4, 3),
    RowsConfig(64, 16, 4, 2),
    RowsConfig(64, 32, 4, 4),
    RowsConfig(128, 16, 8, 2),
    RowsConfig(128, 16, 4, 2),
    RowsConfig(128, 32, 8, 3),
]


def _executor(rows: bool) -> CudaExecutor:
    return CudaExecutor(load_builtin("rt_hdr_alb_nrm"), precision="fp16", engine="triton",
                        tune=False, bridge=False, fused="project", rows=rows)  # fmt: skip


def _rowed_steps(ex: CudaExecutor, prep) -> list[tuple[int, object, str]]:
    """(step index, step, layer signature) of every step the row kernel can run."""
    out = []
    for i, step in enumerate(ex.steps):
        conv = step.hidden if isinstance(step, FusedTail) else step
        if rows_eligible(conv):
            out.append((i, step, ex.layer_signature(prep, conv)))
    return out


def _set(ex: CudaExecutor, prep, step, config) -> None:
    if isinstance(step, FusedTail):
        prep.configs[project_signature(step.hidden)] = config
    else:
        prep.configs[step.name] = config


def _output(ex: CudaExecutor, prep, step):
    return prep.scratch if isinstance(step, FusedTail) else prep.views[step.value]


_WORKER: list[CudaExecutor] = []  # a compile worker's executor, built on its first job


def _compile(job: tuple[int, int]) -> str:
    """Worker: run step ``job[0]``'s candidate ``job[1]`` once (compiles it)."""
    index, candidate = job
    if not _WORKER:
        _WORKER.append(_executor(False))
    ex = _WORKER[0]
    prep = ex.prepare(*SIZE)
    step = ex.steps[index]
    _set(ex, prep, step, CANDIDATES[candidate])
    start = time.perf_counter()
    try:
        ex.launch_step(prep, step, ex._raw_target(prep))
        torch.cuda.synchronize()
    except Exception as err:  # reported, the sweep skips it
        return f"{index}/{candidate}: {type(err).__name__}: {err}"[:300]
    return f"{index}/{candidate}: {time.perf_counter() - start:.1f}s"


def _time(ex: CudaExecutor, prep, step) -> float:
    target = ex._raw_target(prep)
    graph = _graph_of(torch, lambda: ex.launch_step(prep, step, target), 10)
    return statistics.median(_time_events(torch, graph.replay, 30, 3)) / 10


def _rel(a, b) -> tuple[float, float]:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm()), float((a - b).abs().max())


def _kernel_stats(ex: CudaExecutor) -> dict[str, object]:
    """wgmma and registers of each compiled row-kernel specialization."""
    out: dict[str, object] = {}
    try:
        caches = [c[0] for c in ex.row_kernels().conv_rows_kernel.device_caches.values()]
    except Exception as err:  # another Triton's cache layout: reported, not fatal
        return {"error": str(err)[:200]}
    for cache in caches:
        for key, kernel in cache.items():
            ptx = kernel.asm.get("ptx", "")
            out[str(key)[:60] + str(len(out))] = {
                "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
                "mma.sync": len(re.findall(r"mma\.sync", ptx)),
                "cp.async": len(re.findall(r"cp\.async\.c[ag]", ptx)),
                "regs": getattr(kernel, "n_regs", None),
                "spills": getattr(kernel, "n_spills", None),
            }  # fmt: skip
    return out


def main(out_path: str, cache_path: str | None = None) -> None:
    torch.manual_seed(0)
    ex = _executor(False)
    prep = ex.prepare(*SIZE)
    x = ex.input_view(prep, *SIZE)
    x.copy_(torch.rand(x.shape, device=x.device).to(x.dtype))
    x[..., ex.input_channels :] = 0
    steps = _rowed_steps(ex, prep)
    print("row-kernel steps:", [(i, s.name, sig) for i, s, sig in steps], flush=True)
    start = time.perf_counter()
    jobs = [(i, c) for i, _, _ in steps for c in range(len(CANDIDATES))]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(12, len(jobs)), mp_context=context) as pool:
        compiled = list(pool.map(_compile, jobs))
    print(f"compiled {len(jobs)} in {time.perf_counter() - start:.1f}s:", compiled, flush=True)
    # per-layer reference outputs: the steps in order, each eligible step's output kept
    target = ex._raw_target(prep)
    reference = {}
    for i, step in enumerate(ex.steps):
        ex.launch_step(prep, step, target)
        if any(i == j for j, _, _ in steps):
            reference[i] = _output(ex, prep, step).clone()
    layers_out = prep.views[ex.graph.output].clone()
    results = {"steps": [], "compiled": compiled}
    best = {}
    for i, step, sig in steps:
        old = prep.configs[project_signature(step.hidden) if isinstance(step, FusedTail)
                           else step.name]  # fmt: skip
        base_ms = _time(ex, prep, step)
        row = {"step": step.name, "signature": sig, "per_layer": old.describe(),
               "per_layer_ms": base_ms, "tiles": []}  # fmt: skip
        for config in CANDIDATES:
            _set(ex, prep, step, config)
            try:
                for j in range(i):  # the step's inputs as the per-layer run made them
                    ex.launch_step(prep, ex.steps[j], target)
                ex.launch_step(prep, step, target)
                rel, max_abs = _rel(_output(ex, prep, step), reference[i])
                ms = _time(ex, prep, step)
            except Exception as err:
                row["tiles"].append({"tile": config.describe(), "error": str(err)[:200]})
                continue
            row["tiles"].append({"tile": config.describe(), "ms": ms, "rel_l2": rel,
                                 "max_abs": max_abs})  # fmt: skip
            print(f"{step.name:<22} {config.describe():<28} {ms:.4f} ms (per-layer "
                  f"{base_ms:.4f}) rel L2 {rel:.2e} max abs {max_abs:.2e}", flush=True)
            if ms < base_ms * 0.98 and rel < 2e-3 and ms < best.get(sig, (None, 1e9))[1]:
                best[sig] = (config, ms)
        _set(ex, prep, step, old)
        results["steps"].append(row)
    # the whole network with the fastest tiles against the per-layer kernels
    for i, step, sig in steps:
        if sig in best:
            _set(ex, prep, step, best[sig][0])
    ex.forward(x, prep=prep)
    rel, max_abs = _rel(prep.views[ex.graph.output], layers_out)
    results["network_vs_per_layer"] = {"rel_l2": rel, "max_abs": max_abs}
    again = prep.views[ex.graph.output].clone()
    ex.forward(x, prep=prep)
    results["network_repeatable"] = bool(torch.equal(again, prep.views[ex.graph.output]))
    print("network with the fastest tiles vs per-layer:", results["network_vs_per_layer"],
          "repeatable:", results["network_repeatable"], flush=True)  # fmt: skip
    results["best"] = {sig: {**asdict(c), "ms": ms} for sig, (c, ms) in best.items()}
    try:  # after the numbers that matter: a Triton without these fields costs only this
        results["kernels"] = _kernel_stats(ex)
    except Exception as err:
        results["kernels"] = {"error": str(err)[:200]}
    tuner = Tuner(ex._device_key(), None if cache_path is None else __import__(
        "pathlib").Path(cache_path))  # fmt: skip
    for sig, (config, _) in best.items():
        tuner.choose(rows_key(sig), (config,), lambda c: 0.0)
    results["cache"] = str(tuner.path)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    print("best:", json.dumps(results["best"]), "cache:", tuner.path, flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TRITON_PRINT_AUTOTUNING", "0")
    main(*sys.argv[1:])
