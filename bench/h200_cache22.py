"""The per-layer conv kernel's loads through the L1 cache (``.ca``), on a GPU: bits, time.

    python3 bench/h200_cache22.py OUT.json

For the default network at 1280x720 and 1920x1088 and the fast network at 1920x1088: each
step on the per-layer kernel (`triton_kernels.conv3x3_kernel`) alone, a CUDA graph of 10
launches, median of 30 replays, and the whole network's graph (median of 30), with the
A-operand and weight loads' cache modifiers (`executor.CONV_CACHE`: "" is Triton's
default, ``cp.async.cg``, L2 only; ".ca" also caches in L1); each step's output and the
raw network output against the default's, bit for bit.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

from oidn_gpu.backends.cuda import executor as cuda_executor
from oidn_gpu.backends.cuda.bench import _graph_of, _time_events
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.fusion import FusedTail
from oidn_gpu.backends.cuda.tuning import TileConfig
from oidn_gpu.model.weights import load_builtin

CASES = [("rt_hdr_alb_nrm", 720, 1280), ("rt_hdr_alb_nrm", 1088, 1920),
         ("rt_hdr_alb_nrm_small", 1088, 1920)]  # fmt: skip
FORMS = [("", ""), ("", ".ca"), (".ca", ""), (".ca", ".ca"), ("", "")]


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
        steps = [s for s in ex.steps if not isinstance(s, FusedTail)
                 and isinstance(prep.configs[s.name], TileConfig)]  # fmt: skip
        row = {"weights": weights, "size": [height, width], "steps": {}, "same_bits": {},
               "network": {}}  # fmt: skip
        ref = {}
        for form in FORMS:
            cuda_executor.CONV_CACHE = form
            key = "A" + (form[0] or "cg") + " W" + (form[1] or "cg")
            raw = ex.forward(x, prep=prep).clone()
            torch.cuda.synchronize()
            for step in steps:
                def call(ex=ex, prep=prep, step=step, target=target):
                    ex.launch_step(prep, step, target)
                call()
                got = (target.image if step.final else prep.views[step.value]).clone()
                graph = _graph_of(torch, call, 10)
                ms = statistics.median(_time_events(torch, graph.replay, 30, 3)) / 10
                row["steps"].setdefault(step.name, {}).setdefault(key, []).append(round(ms, 5))
                base = ref.setdefault(step.name, got)
                row["same_bits"][f"{step.name}:{key}"] = bool(torch.equal(got, base))
            graph = _graph_of(torch, lambda ex=ex, x=x, prep=prep: ex.forward(x, prep=prep), 1)
            net = statistics.median(_time_events(torch, graph.replay, 30, 3))
            row["network"].setdefault(key, []).append(round(net, 4))
            base = ref.setdefault("raw", raw)
            row["same_bits"][f"raw:{key}"] = bool(torch.equal(raw, base))
        cuda_executor.CONV_CACHE = ("", "")
        print(json.dumps(row), flush=True)
        rows.append(row)
        ex.close()
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
