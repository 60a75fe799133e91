"""The input pass's channels joined or selected, on a GPU: bits and time per launch.

    python3 bench/h200_input22.py OUT.json

For 1280x720, 1920x1080 and 3840x2160 random HDR colour, albedo and normal (float32,
3 channels), the benchmark's tile plan and a fixed input scale: `runner.INPUT_JOIN` on and
off, alternating twice, each a CUDA graph of 10 input passes (`CudaDenoiser._tile`'s
launch), median of 30 replays, and the network input it writes, bit for bit.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

from oidn_gpu.backends.cuda import runner
from oidn_gpu.backends.cuda.bench import _graph_of, _time_events, e2e_inputs
from oidn_gpu.backends.cuda.executor import CudaExecutor, kernels, transfer_id
from oidn_gpu.backends.cuda.images import describe
from oidn_gpu.model.weights import load_builtin

SIZES = [(720, 1280), (1080, 1920), (2160, 3840)]


def _launch(ex, prep, images, tile, plan, mode, scale, join):
    main, alb, nrm = images
    inp = ex.input_view(prep, plan.tile_h, plan.tile_w)
    kernels().input_pass_kernel[(-(-plan.tile_h * plan.tile_w // runner.INPUT_BLOCK),)](
        main.tensor, main.offset, main.pixel_stride, main.row_stride, main.channels,
        alb.tensor, alb.offset, alb.pixel_stride, alb.row_stride, alb.channels,
        nrm.tensor, nrm.offset, nrm.pixel_stride, nrm.row_stride, nrm.channels,
        scale, inp, plan.tile_h, plan.tile_w, ex.input_stored,
        tile.in_y, tile.in_x, tile.in_h, tile.in_w, tile.buf_y, tile.buf_x,
        IMAGES=3, TRANSFER=transfer_id(mode.transfer), HDR=bool(mode.hdr),
        SNORM=bool(mode.snorm), BLOCK=runner.INPUT_BLOCK, CHANNELS=ex.input_stored, JOIN=join,
    )  # fmt: skip
    return inp


def main(out_path: str) -> None:
    ex = CudaExecutor(load_builtin("rt_hdr_alb_nrm"), precision="fp16", engine="triton",
                      tune=False, bridge=False)  # fmt: skip
    rows = []
    for height, width in SIZES:
        _, tensors, _, mode, plan = e2e_inputs(torch, ex, ex.model, height, width)
        images = [describe(t, n) for t, n in zip(tensors, ("main", "albedo", "normal"))]
        prep = ex.prepare(plan.tile_h, plan.tile_w)
        scale = torch.tensor([0.37], dtype=torch.float32, device="cuda")
        tile = plan.tiles[0]
        out = {}
        row = {"size": [height, width], "tile": [plan.tile_h, plan.tile_w], "us": {}}
        for join in (True, False, True, False):
            inp = _launch(ex, prep, images, tile, plan, mode, scale, join)
            out.setdefault(join, inp.clone())
            graph = _graph_of(torch, lambda join=join: _launch(ex, prep, images, tile, plan,
                                                               mode, scale, join), 10)  # fmt: skip
            us = statistics.median(_time_events(torch, graph.replay, 30, 3)) / 10 * 1e3
            row["us"].setdefault("joined" if join else "selected", []).append(us)
        row["same_bits"] = bool(torch.equal(out[True].view(torch.int16), out[False].view(torch.int16)))
        print(json.dumps(row), flush=True)
        rows.append(row)
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
