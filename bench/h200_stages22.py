"""The row kernel's pipeline depth and warps against its programs per multiprocessor.

    python3 bench/h200_stages22.py OUT.json

The `project` tail's row kernel holds one program per H200 multiprocessor (its shared
memory), `enc_conv1` two. For each row step of the default network at 1280x720 and
1920x1088: the shipped strip of 64 columns with 1-4 stages and 4 or 8 warps, each at
several rows per program, alone (a CUDA graph of 10 launches, median of 30 replays), its
output against the shipped configuration's bit for bit, and each compiled variant's
registers, spills, shared memory and the programs a multiprocessor holds
(`row_conv.resident_programs`).
"""

from __future__ import annotations

import json
import statistics
import sys

import torch
from triton.runtime import driver

from oidn_gpu.backends.cuda import row_conv
from oidn_gpu.backends.cuda.bench import _graph_of, _time_events
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.fusion import FusedTail
from oidn_gpu.backends.cuda.tuning import RowsConfig, project_signature
from oidn_gpu.model.weights import load_builtin

CASES = [(720, 1280), (1088, 1920)]
VARIANTS = [(4, 3), (4, 2), (4, 1), (4, 4), (8, 3), (8, 2)]  # (warps, stages)
ROWS = [16, 28, 32, 42, 50, 56, 64]


def _row_steps(ex, prep):
    steps = []
    for step in ex.steps:
        if isinstance(step, FusedTail):
            key = project_signature(step.hidden)
            if isinstance(prep.configs.get(key), RowsConfig):
                steps.append(("project", key, step, prep.scratch, step.hidden, True))
        elif isinstance(prep.configs[step.name], RowsConfig):
            steps.append((step.name, step.name, step, prep.views[step.value], step, False))
    return steps


def _time(ex, prep, step, target, value, base):
    def call():
        ex.launch_step(prep, step, target)
    call()
    got = value.clone()
    graph = _graph_of(torch, call, 10)
    ms = statistics.median(_time_events(torch, graph.replay, 30, 3)) / 10
    base = got if base is None else base
    return round(ms, 5), bool(torch.equal(got.view(torch.int16), base.view(torch.int16))), base


def main(out_path: str) -> None:
    props = driver.active.utils.get_device_properties(0)
    rows_out = []
    ex = CudaExecutor(load_builtin("rt_hdr_alb_nrm"), precision="fp16", engine="triton",
                      tune=False, bridge=False)  # fmt: skip
    for height, width in CASES:
        prep = ex.prepare(height, width)
        x = ex.input_view(prep, height, width)
        torch.manual_seed(0)
        x.copy_(torch.rand(x.shape, device="cuda").to(x.dtype))
        x[..., ex.input_channels:] = 0
        ex.forward(x, prep=prep)
        torch.cuda.synchronize()
        target = ex._raw_target(prep)
        row = {"size": [height, width], "ms": {}, "same": {}, "compiled": {}, "balanced": {}}
        for name, key, step, value, conv, project in _row_steps(ex, prep):
            shipped = prep.configs[key]
            row["balanced"][name] = shipped.rows
            base = None
            for warps, stages in VARIANTS:
                variant = f"w{warps}s{stages}"
                cfg = RowsConfig(shipped.block_w, 32, warps, stages)
                try:
                    compiled = ex.row_kernels().conv_rows_kernel.warmup(
                        *row_conv._launch_args(ex, prep, conv, cfg, project)[1],
                        grid=(1, 1), **row_conv._launch_args(ex, prep, conv, cfg, project)[2])
                    compiled._init_handles()
                    regs, shared = int(compiled.n_regs), int(compiled.metadata.shared)
                    row["compiled"][f"{name}:{variant}"] = {
                        "regs": regs, "spills": int(compiled.n_spills), "shared": shared,
                        "resident": row_conv.resident_programs(regs, shared, warps, props)}
                except Exception as error:  # a variant that does not fit
                    row["compiled"][f"{name}:{variant}"] = {"error": repr(error)[:160]}
                    continue
                for count in ROWS:
                    prep.configs[key] = RowsConfig(shipped.block_w, count, warps, stages)
                    try:
                        ms, same, base = _time(ex, prep, step, target, value, base)
                    except Exception as error:
                        row["same"][f"{name}:{variant}:{count}"] = repr(error)[:160]
                        continue
                    row["ms"].setdefault(name, {}).setdefault(variant, {})[str(count)] = ms
                    row["same"][f"{name}:{variant}:{count}"] = same
            prep.configs[key] = shipped
        print(json.dumps(row), flush=True)
        rows_out.append(row)
    ex.close()
    with open(out_path, "w") as f:
        json.dump(rows_out, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
