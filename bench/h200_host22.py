"""Where a render loop's frame waits on the host, on a GPU: a profile and the host's parts.

    python3 bench/h200_host22.py OUT.json [HEIGHTxWIDTH]

At 720p (default), the benchmark's end-to-end setup (`backends.cuda.bench.e2e_inputs`:
random HDR colour, albedo, normal, GPU autoexposure, one tile):

1. host time per call (median of 300, the GPU kept busy by a sleep so nothing blocks):
   the whole `CudaDenoiser.denoise_tensors` call, its `LastRequest.find`, the frame
   graph's `replay` alone, one CUDA event record, and a one-kernel graph's replay;
2. a torch profiler trace of 20 calls timed as the benchmark times them (CUDA events
   around each call): per call the time from the first event's record to the graph
   launch's host call, that call's host duration, from it to the first kernel, the
   kernels' count, their summed time and the gaps between them;
3. the same profile with the host's enqueue hidden (a GPU sleep queued first). Its summary
   in ``bench/h200_host22/`` counts the sleep kernel among the frame's (torch names it
   without "sleep"): only the first profile's numbers are used (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time

import torch

from oidn_gpu.backends.cuda import bench as cuda_bench
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.runner import CudaDenoiser
from oidn_gpu.model.weights import load_builtin

SLEEP = 3_000_000  # GPU cycles: about 1.5 ms, longer than any enqueue here


def _host_us(fn, runs: int = 300) -> float:
    times = []
    for _ in range(runs):
        torch.cuda._sleep(SLEEP)
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def _profile(call, hidden: bool) -> dict:
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(20):
            if hidden:
                torch.cuda._sleep(SLEEP)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            end.synchronize()
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    runtime = sorted((e for e in events if e.get("cat") == "cuda_runtime"), key=lambda e: e["ts"])
    launches = [e for e in runtime if "GraphLaunch" in e["name"]]
    records = [e for e in runtime if "EventRecord" in e["name"]]
    others = sorted({e["name"] for e in runtime})
    rows = []
    for index, launch in enumerate(launches):
        nxt = launches[index + 1]["ts"] if index + 1 < len(launches) else float("inf")
        mine = [k for k in kernels if launch["ts"] <= k["ts"] < nxt and "sleep" not in k["name"]]
        before = [r for r in records if r["ts"] <= launch["ts"]]
        if not mine or not before:
            continue
        gaps = [b["ts"] - (a["ts"] + a["dur"]) for a, b in zip(mine, mine[1:])]
        rows.append({
            "record_to_launch_us": launch["ts"] - before[-1]["ts"],
            "launch_call_us": launch["dur"],
            "launch_to_first_kernel_us": mine[0]["ts"] - launch["ts"],
            "kernels": len(mine),
            "kernel_sum_us": sum(k["dur"] for k in mine),
            "span_us": mine[-1]["ts"] + mine[-1]["dur"] - mine[0]["ts"],
            "gap_sum_us": sum(gaps),
            "gap_max_us": max(gaps) if gaps else 0.0,
        })  # fmt: skip
    summary = {k: statistics.median(r[k] for r in rows) for k in rows[0]} if rows else {}
    first = [k["name"][:60] for k in kernels if "sleep" not in k["name"]][: summary.get(
        "kernels", 0) and int(summary["kernels"])]  # fmt: skip
    return {"summary": summary, "calls": len(rows), "kernels_of_a_frame": first,
            "runtime_calls": others}  # fmt: skip


def main(out_path: str, size: str = "720x1280") -> None:
    height, width = (int(v) for v in size.split("x"))
    ex = CudaExecutor(load_builtin("rt_hdr_alb_nrm"), precision="fp16", engine="triton",
                      tune=False, bridge=False)  # fmt: skip
    _, images, out, mode, plan = cuda_bench.e2e_inputs(torch, ex, ex.model, height, width)
    den = CudaDenoiser(ex)

    def call():
        den.denoise_tensors(*images, mode=mode, plan=plan, out=out, autoexposure=True)

    for _ in range(20):
        call()
    torch.cuda.synchronize()
    tensors = (*images, out)
    options = (mode, plan, None, True)
    frame = den._replay[1]
    one = torch.zeros(1, device="cuda")
    small = cuda_bench._graph_of(torch, lambda: one.add_(1.0))
    event = torch.cuda.Event(enable_timing=True)
    result = {"size": [height, width], "host_us": {
        "denoise_tensors": _host_us(call),
        "find": _host_us(lambda: den._last_request.find(tensors, options)),
        "frame_graph_replay": _host_us(frame.graph.replay),
        "event_record": _host_us(event.record),
        "one_kernel_graph_replay": _host_us(small.replay),
    }}  # fmt: skip
    print(json.dumps(result["host_us"]), flush=True)
    for hidden in (False, True):
        key = "profile_hidden" if hidden else "profile"
        result[key] = _profile(call, hidden)
        print(key, json.dumps(result[key]["summary"]), flush=True)
    print("kernels:", result["profile"]["kernels_of_a_frame"], flush=True)
    print("runtime calls:", result["profile"]["runtime_calls"], flush=True)
    den.close()
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
