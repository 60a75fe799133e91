"""The row kernel's input rows through TMA, on a GPU: bits and time per step.

    python3 bench/h200_tma22.py OUT.json

For the default network at 1280x720 and 1920x1080 and the fast network at 1920x1080: each
step the row kernel runs (`enc_conv0`, `enc_conv1` + pool, the `project` tail with its tap
sum) alone, a CUDA graph of 10 launches, median of 30 replays, with the loads as now
(`row_conv.TMA_STAGES` None) and as TMA tensor-descriptor loads pipelined 1, 2 or 3 deep;
each step's output and the whole network's raw output against the plain loads, bit for bit.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

from oidn_gpu.backends.cuda import row_conv
from oidn_gpu.backends.cuda.bench import _graph_of, _time_events
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.fusion import FusedTail
from oidn_gpu.backends.cuda.tuning import RowsConfig, project_signature
from oidn_gpu.model.weights import load_builtin

CASES = [("rt_hdr_alb_nrm", 720, 1280), ("rt_hdr_alb_nrm", 1088, 1920),
         ("rt_hdr_alb_nrm_small", 1088, 1920)]  # fmt: skip
VARIANTS = [None, 1, 2, 3, None]


def _row_steps(ex, prep):
    steps = []
    for step in ex.steps:
        if isinstance(step, FusedTail):
            if isinstance(prep.configs.get(project_signature(step.hidden)), RowsConfig):
                steps.append(("project", step, prep.scratch))
        elif isinstance(prep.configs[step.name], RowsConfig):
            steps.append((step.name, step, prep.views[step.value]))
    return steps


def main(out_path: str) -> None:
    rows = []
    for weights, height, width in CASES:
        ex = CudaExecutor(load_builtin(weights), precision="fp16", engine="triton", tune=False,
                          bridge=False)  # fmt: skip
        prep = ex.prepare(height, width)
        x = ex.input_view(prep, height, width)
        torch.manual_seed(0)
        x.copy_(torch.rand(x.shape, device="cuda").to(x.dtype))
        x[..., ex.input_channels:] = 0
        target = ex._raw_target(prep)
        raw = {}
        row = {"weights": weights, "size": [height, width], "steps": {}, "same_bits": {}}
        for variant in VARIANTS:
            row_conv.TMA_STAGES = variant
            out = ex.forward(x, prep=prep)
            torch.cuda.synchronize()
            raw.setdefault(variant, out.clone())
            for name, step, value in _row_steps(ex, prep):
                def call(ex=ex, prep=prep, step=step, target=target):
                    ex.launch_step(prep, step, target)
                call()
                got = value.clone()
                graph = _graph_of(torch, call, 10)
                ms = statistics.median(_time_events(torch, graph.replay, 30, 3)) / 10
                row["steps"].setdefault(name, {}).setdefault(str(variant), []).append(ms)
                key = f"{name}:{variant}"
                base = row.setdefault("_ref", {}).setdefault(name, got)
                same = torch.equal(got.view(torch.int16), base.view(torch.int16))
                row["same_bits"][key] = bool(same)
            graph = _graph_of(torch, lambda ex=ex, x=x, prep=prep: ex.forward(x, prep=prep), 1)
            net = statistics.median(_time_events(torch, graph.replay, 30, 3))
            row.setdefault("network", {}).setdefault(str(variant), []).append(net)
            row["same_bits"][f"raw:{variant}"] = bool(torch.equal(raw[variant], raw[None]))
        row_conv.TMA_STAGES = None
        row.pop("_ref")
        print(json.dumps(row), flush=True)
        rows.append(row)
        ex.close()
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
