"""The network's tail in one kernel against two, on a GPU: bits, step and network times.

    python3 bench/h200_tail22.py OUT.json

It needs commit ``768e7ed``'s `fusion.ROWS_TAP_SUM` and ``conv_rows_final_kernel``, measured
and not kept (docs/benchmarks.md); on later code it times the two-kernel form only.

For ``rt_hdr_alb_nrm`` at 720x1280 and 1088x1920 and ``rt_hdr_alb_nrm_small`` at
1088x1920 (fp16, the shipped tiles, random input): the raw network output with the tail's
tap sum in the row kernel (`fusion.ROWS_TAP_SUM`, one launch) and with the partial sums
stored for `tap_sum_kernel` (two launches), bit for bit, and a whole HDR denoise of random
colour, albedo and normal with the GPU autoexposure, bit for bit; the tail step alone (a CUDA graph
of 10 launches, median of 30 replays) and the whole network (a CUDA graph of one forward,
median of 50) in each form, alternating; the one-kernel form with other row tiles.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch

from oidn_gpu.backends.cuda import fusion
from oidn_gpu.backends.cuda.bench import _graph_of, _time_events, e2e_inputs
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.fusion import FusedTail
from oidn_gpu.backends.cuda.runner import CudaDenoiser
from oidn_gpu.backends.cuda.tuning import RowsConfig, project_signature
from oidn_gpu.model.weights import load_builtin

CASES = [("rt_hdr_alb_nrm", 720, 1280), ("rt_hdr_alb_nrm", 1088, 1920),
         ("rt_hdr_alb_nrm_small", 1088, 1920)]  # fmt: skip
TILES = [RowsConfig(64, 16, 4, 3), RowsConfig(64, 32, 4, 2), RowsConfig(128, 32, 8, 3),
         RowsConfig(64, 32, 8, 3),
         RowsConfig(32, 32, 4, 3), RowsConfig(64, 64, 4, 3)]  # fmt: skip


def _step_ms(ex, prep, step, target) -> float:
    graph = _graph_of(torch, lambda: ex.launch_step(prep, step, target), 10)
    return statistics.median(_time_events(torch, graph.replay, 30, 3)) / 10


def _network_ms(ex, prep, x) -> float:
    graph = _graph_of(torch, lambda: ex.forward(x, prep=prep))
    return statistics.median(_time_events(torch, graph.replay, 50, 5))


def _case(name: str, height: int, width: int) -> dict:
    ex = CudaExecutor(load_builtin(name), precision="fp16", engine="triton", tune=False,
                      bridge=False)  # fmt: skip
    prep = ex.prepare(height, width)
    torch.manual_seed(0)
    x = ex.input_view(prep, height, width)
    x.copy_(torch.rand(x.shape, device=x.device).to(x.dtype))
    x[..., ex.input_channels :] = 0
    tail = ex.steps[-1]
    assert isinstance(tail, FusedTail), tail
    key = project_signature(tail.hidden)
    shipped = prep.configs[key]
    target = ex._raw_target(prep)
    row = {"weights": name, "size": [height, width], "tile": shipped.describe()}
    outputs = {}
    for one in (False, True):
        fusion.ROWS_TAP_SUM = one
        start = time.perf_counter()
        ex.forward(x, prep=prep)
        torch.cuda.synchronize()
        row[f"first_forward_s_{int(one)}"] = time.perf_counter() - start
        outputs[one] = prep.views[ex.graph.output].clone()
    row["same_bits"] = bool(torch.equal(outputs[False], outputs[True]))
    denoised = {}
    for one in (False, True):  # a whole HDR denoise: autoexposure, output pass
        fusion.ROWS_TAP_SUM = one
        _, images, out, mode, plan = e2e_inputs(torch, ex, ex.model, height, width)
        with CudaDenoiser(ex) as den:
            den.denoise_tensors(*images, mode=mode, plan=plan, out=out, autoexposure=True)
            torch.cuda.synchronize()
        denoised[one] = out.clone()
    row["denoised_same_bits"] = bool(torch.equal(denoised[False], denoised[True]))
    row["max_abs"] = float((outputs[False].float() - outputs[True].float()).abs().max())
    for form in ("two", "one", "two", "one"):
        fusion.ROWS_TAP_SUM = form == "one"
        row.setdefault(f"tail_ms_{form}", []).append(_step_ms(ex, prep, tail, target))
        row.setdefault(f"network_ms_{form}", []).append(_network_ms(ex, prep, x))
    fusion.ROWS_TAP_SUM = True
    row["tiles"] = {}
    for config in TILES:
        prep.configs[key] = config
        try:
            ex.forward(x, prep=prep)
            same = bool(torch.equal(prep.views[ex.graph.output], outputs[True]))
            row["tiles"][config.describe()] = {"ms": _step_ms(ex, prep, tail, target),
                                               "same_bits": same}  # fmt: skip
        except Exception as err:  # reported, the sweep goes on
            row["tiles"][config.describe()] = {"error": f"{type(err).__name__}: {err}"[:300]}
    prep.configs[key] = shipped
    ex.close()
    print(json.dumps(row), flush=True)
    return row


def main(out_path: str) -> None:
    rows = []
    for case in CASES:
        try:
            rows.append(_case(*case))
        except Exception as err:  # the next case still runs
            print(f"{case}: {type(err).__name__}: {err}"[:2000], flush=True)
            rows.append({"case": list(case), "error": f"{type(err).__name__}: {err}"[:2000]})
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
