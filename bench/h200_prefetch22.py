"""The row kernel's next input row asked for early, on a GPU: bits, step and network times.

    python3 bench/h200_prefetch22.py OUT.json BEST_FILE

It needs commit ``f2c2f47``'s `row_conv.ROW_PREFETCH`, measured and not kept
(docs/benchmarks.md).

`row_conv.ROW_PREFETCH` 0 (the row loaded when its products start), 1 (the next row loaded
into registers before the current row's products) and 2 (``prefetch.global.L1`` of the
next row's lines), alternating twice, for ``rt_hdr_alb_nrm`` at 720x1280 and 1088x1920 and
``rt_hdr_alb_nrm_small`` at 1088x1920 (fp16, shipped tiles, random input): the raw network
output of each form against form 0, bit for bit; each row-kernel step alone (a CUDA graph of
10 launches, median of 30 replays; the ``project`` tail with its tap sum) and the whole
network (a CUDA graph, median of 50). Writes the form with the fastest 720p network into
BEST_FILE.
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
FORMS = (0, 1, 2)


def _rowed(ex, prep):
    out = []
    for step in ex.steps:
        key = project_signature(step.hidden) if isinstance(step, FusedTail) else step.name
        if isinstance(prep.configs.get(key), RowsConfig):
            out.append(step)
    return out


def _case(name: str, height: int, width: int) -> dict:
    ex = CudaExecutor(load_builtin(name), precision="fp16", engine="triton", tune=False,
                      bridge=False)  # fmt: skip
    prep = ex.prepare(height, width)
    torch.manual_seed(0)
    x = ex.input_view(prep, height, width)
    x.copy_(torch.rand(x.shape, device=x.device).to(x.dtype))
    x[..., ex.input_channels :] = 0
    target = ex._raw_target(prep)
    steps = _rowed(ex, prep)
    row = {"weights": name, "size": [height, width], "steps": [s.name for s in steps],
           "same_bits": {}, "step_ms": {}, "network_ms": {}}  # fmt: skip
    reference = None
    for form in FORMS + FORMS:
        row_conv.ROW_PREFETCH = form
        ex.forward(x, prep=prep)
        out = prep.views[ex.graph.output].clone()
        if reference is None:
            reference = out
        row["same_bits"].setdefault(str(form), []).append(bool(torch.equal(out, reference)))
        for step in steps:
            graph = _graph_of(torch, lambda step=step: ex.launch_step(prep, step, target), 10)
            ms = statistics.median(_time_events(torch, graph.replay, 30, 3)) / 10
            row["step_ms"].setdefault(f"{step.name} {form}", []).append(ms)
        graph = _graph_of(torch, lambda: ex.forward(x, prep=prep))
        ms = statistics.median(_time_events(torch, graph.replay, 50, 5))
        row["network_ms"].setdefault(str(form), []).append(ms)
    row_conv.ROW_PREFETCH = 0
    ex.close()
    print(json.dumps(row), flush=True)
    return row


def main(out_path: str, best_path: str) -> None:
    rows = []
    for case in CASES:
        try:
            rows.append(_case(*case))
        except Exception as err:  # the next case still runs
            print(f"{case}: {type(err).__name__}: {err}"[:3000], flush=True)
            rows.append({"case": list(case), "error": f"{type(err).__name__}: {err}"[:3000]})
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)
    first = rows[0]
    best = 0
    if "network_ms" in first:
        best = min(FORMS, key=lambda f: min(first["network_ms"][str(f)]))
    with open(best_path, "w") as f:
        f.write(str(best))
    print("best form at 720p:", best, flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
