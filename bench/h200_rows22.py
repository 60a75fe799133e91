"""Rows per program of the row kernel, against the GPU's waves: bits and time per step.

    python3 bench/h200_rows22.py OUT.json

For the default network at 1280x720 and 1920x1088 and the fast network at 1920x1088: each
step the row kernel runs (its shipped strip of 64 columns, 4 warps, 3 stages) alone with
``rows`` output rows per program from 16 to 64 (a CUDA graph of 10 launches, median of 30
replays), its output against the shipped 32 rows', bit for bit; the programs of each
launch and the compiled kernels' registers, spills and shared memory, from which the
programs one multiprocessor holds at once follow.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

from oidn_gpu.backends.cuda.bench import _graph_of, _time_events
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.fusion import FusedTail
from oidn_gpu.backends.cuda.tuning import RowsConfig, project_signature
from oidn_gpu.model.weights import load_builtin

CASES = [("rt_hdr_alb_nrm", 720, 1280), ("rt_hdr_alb_nrm", 1088, 1920),
         ("rt_hdr_alb_nrm_small", 1088, 1920)]  # fmt: skip
ROWS = [32, 16, 24, 28, 36, 38, 40, 44, 48, 56, 64, 32]


def _row_steps(ex, prep):
    steps = []
    for step in ex.steps:
        if isinstance(step, FusedTail):
            key = project_signature(step.hidden)
            if isinstance(prep.configs.get(key), RowsConfig):
                steps.append(("project", key, step, prep.scratch, step.hidden))
        elif isinstance(prep.configs[step.name], RowsConfig):
            steps.append((step.name, step.name, step, prep.views[step.value], step))
    return steps


def _compiled(ex) -> list:
    kernel = ex.row_kernels().conv_rows_kernel
    found = []
    for cache in getattr(kernel, "device_caches", {}).values():
        for compiled in cache[0].values():
            try:
                compiled._init_handles()
                found.append({"regs": compiled.n_regs, "spills": compiled.n_spills,
                              "shared": compiled.metadata.shared,
                              "name": str(getattr(compiled, "name", ""))})  # fmt: skip
            except Exception as error:
                found.append({"error": repr(error)[:120]})
    return found


def main(out_path: str) -> None:
    rows = []
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for weights, height, width in CASES:
        ex = CudaExecutor(load_builtin(weights), precision="fp16", engine="triton", tune=False,
                          bridge=False)  # fmt: skip
        prep = ex.prepare(height, width)
        x = ex.input_view(prep, height, width)
        torch.manual_seed(0)
        x.copy_(torch.rand(x.shape, device="cuda").to(x.dtype))
        x[..., ex.input_channels:] = 0
        ex.forward(x, prep=prep)
        torch.cuda.synchronize()
        target = ex._raw_target(prep)
        row = {"weights": weights, "size": [height, width], "sms": sms, "ms": {}, "same": {},
               "programs": {}}  # fmt: skip
        for name, key, step, value, conv in _row_steps(ex, prep):
            shipped = prep.configs[key]
            base = None
            conv_h = prep.views[conv.sources[0].value].shape[0]
            conv_w = prep.views[conv.sources[0].value].shape[1]
            for count in ROWS:
                prep.configs[key] = RowsConfig(shipped.block_w, count, shipped.num_warps,
                                               shipped.num_stages)  # fmt: skip

                def call(ex=ex, prep=prep, step=step, target=target):
                    ex.launch_step(prep, step, target)
                call()
                got = value.clone()
                graph = _graph_of(torch, call, 10)
                ms = statistics.median(_time_events(torch, graph.replay, 30, 3)) / 10
                row["ms"].setdefault(name, {}).setdefault(str(count), []).append(round(ms, 5))
                base = got if base is None else base
                same = torch.equal(got.view(torch.int16), base.view(torch.int16))
                row["same"][f"{name}:{count}"] = bool(same)
                programs = -(-conv_w // shipped.block_w) * -(-conv_h // count)
                row["programs"].setdefault(name, {})[str(count)] = programs
            prep.configs[key] = shipped
        row["compiled"] = _compiled(ex)
        print(json.dumps(row), flush=True)
        rows.append(row)
        ex.close()
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
