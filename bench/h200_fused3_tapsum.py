"""The ``project`` tail (row kernel, then `tap_sum_kernel`) timed alone with other tap-sum
blocks than `fusion.TAP_SUM_BLOCK`, each output against the shipped block's (bit equality).

    python3 bench/h200_fused3_tapsum.py OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

from oidn_gpu.backends.cuda import fusion
from oidn_gpu.backends.cuda.bench import _graph_of, _time_events
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.model.weights import load_builtin

BLOCKS = [(8, 32), (4, 64), (2, 128), (16, 32), (8, 64), (4, 128), (16, 16)]
CASES = [("rt_hdr_alb_nrm", (1088, 1920)), ("rt_hdr_alb_nrm", (720, 1280)),
         ("rt_hdr_alb_nrm_small", (1088, 1920))]  # fmt: skip


def _time(fn) -> float:
    graph = _graph_of(torch, fn, 10)
    return statistics.median(_time_events(torch, graph.replay, 30, 3)) / 10


def main(out_path: str) -> None:
    rows = []
    shipped = fusion.TAP_SUM_BLOCK
    for weights, size in CASES:
        torch.manual_seed(0)
        ex = CudaExecutor(load_builtin(weights), precision="fp16", engine="triton", tune=False,
                          bridge=False)  # fmt: skip
        prep = ex.prepare(*size)
        x = ex.input_view(prep, *size)
        x.copy_(torch.rand(x.shape, device=x.device).to(x.dtype))
        x[..., ex.input_channels :] = 0
        target = ex._raw_target(prep)
        for step in ex.steps[:-1]:
            ex.launch_step(prep, step, target)
        tail = ex.steps[-1]
        source = prep.views[tail.hidden.sources[0].value].clone()
        out = prep.views[ex.graph.output]
        reference = None
        for block in BLOCKS:
            fusion.TAP_SUM_BLOCK = block
            prep.views[tail.hidden.sources[0].value].copy_(source)
            ex.launch_step(prep, tail, target)
            if reference is None:
                reference = out.clone()
            same = bool(torch.equal(out, reference))
            ms = _time(lambda: ex.launch_step(prep, tail, target))
            row = {"weights": weights, "size": size, "block": block, "ms": ms, "same": same}
            print(json.dumps(row), flush=True)
            rows.append(row)
        fusion.TAP_SUM_BLOCK = shipped
        ex.close()
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
