"""Split K for the small low-resolution convs, and the input pass's block, on an NVIDIA GPU.

For each size (and the fast network at 1080p): every conv that can split its K loop
(`tuning.split_eligible`) at resolution level 2 or lower, timed alone (a CUDA graph of
10 launches, median of 30) with its shipped tile and with split forms of a few tiles;
then the network graph and the benchmark's ``e2e GPU`` (CUDA events around
`CudaDenoiser.denoise_tensors`, median of 100; and with the host's enqueue hidden behind
a GPU sleep) with the shipped tiles and with each layer's fastest tile, alternating, and
the raw outputs' relative L2. The input pass alone with other blocks of pixels per
program (elementwise: the same bits), median of 200 launches in a graph.

    python bench/h200_split22.py out.json 720p,1080p,fast,4k,input

It needs the split-K kernel of commit ``3010cb5`` (`TileConfig.split_k`,
`tuning.split_eligible`), measured and not kept (docs/benchmarks.md); the run in
``bench/h200_split22/`` stopped after each size's first round (a key clash in this
script, fixed since), so its e2e lines are the shipped tiles'.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import time

import torch

import oidn_gpu
from oidn_gpu.backends.cuda import bench as cb
from oidn_gpu.backends.cuda import runner as runner_module
from oidn_gpu.backends.cuda.executor import CudaExecutor, kernels
from oidn_gpu.backends.cuda.runner import CudaDenoiser
from oidn_gpu.backends.cuda.tuning import TileConfig, split_eligible

SIZES = {"720p": (720, 1280), "1080p": (1080, 1920), "4k": (2160, 3840)}
SLEEP_CYCLES = 3_000_000


def _tiles(shipped: TileConfig, others: bool) -> list[TileConfig]:
    """The shipped tile split 1-8 ways; with ``others`` three more tiles split 1, 2, 4 ways."""
    out = [dataclasses.replace(shipped, split_k=split) for split in (1, 2, 3, 4, 6, 8)]
    bases = [TileConfig(64, shipped.block_n, 32, 4, 4), TileConfig(64, 64, 32, 4, 3),
             TileConfig(128, shipped.block_n, 32, 4, 3)] if others else []  # fmt: skip
    for base in bases:
        for split in (1, 2, 4):
            tile = dataclasses.replace(base, split_k=split)
            if tile not in out:
                out.append(tile)
    return out


def _time_layer(ex, prep, launch, tile) -> float:
    def one() -> None:
        ex._launch(prep, launch, tile, None)

    graph = cb._graph_of(torch, one, cb.LAYER_REPEAT)
    return statistics.median(cb._time_events(torch, graph.replay, 30, 3)) / cb.LAYER_REPEAT


def _network(ex, prep, x) -> tuple[float, torch.Tensor]:
    graph = cb._graph_of(torch, lambda: ex.forward(x, prep=prep))
    ms = statistics.median(cb._time_events(torch, graph.replay, 100, 10))
    ex.forward(x, prep=prep)
    return ms, prep.views[ex.graph.output].clone()


def _e2e(ex, model, height, width) -> tuple[float, float]:
    _, images, out, mode, plan = cb.e2e_inputs(torch, ex, model, height, width)
    den = CudaDenoiser(ex)

    def call() -> None:
        den.denoise_tensors(*images, mode=mode, plan=plan, out=out, autoexposure=True)

    for _ in range(20):
        call()
    torch.cuda.synchronize()
    shown, hidden = [], []
    for index in range(200):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if index % 2:
            torch.cuda._sleep(SLEEP_CYCLES)
        start.record()
        call()
        end.record()
        end.synchronize()
        (hidden if index % 2 else shown).append(start.elapsed_time(end))
    den.close()
    return statistics.median(shown), statistics.median(hidden)


def _size(name: str, weights: str, height: int, width: int, log, others: bool) -> dict:
    model = cb._load(weights)
    ex = CudaExecutor(model, bridge=False, engine="triton")
    net_h = -(-height // 16) * 16
    prep = ex.prepare(net_h, width)
    x = ex.input_view(prep, net_h, width)
    x.copy_(torch.rand(x.shape, device=x.device).to(x.dtype))
    x[..., ex.input_channels :] = 0
    ex.forward(x, prep=prep)
    torch.cuda.synchronize()
    shipped = dict(prep.configs)
    best, layers = {}, {}
    for launch in ex.launches:
        tile = shipped[launch.name]
        level = ex.layer_signature(prep, launch).rsplit("@", 1)[1]
        if not isinstance(tile, TileConfig) or int(level) < 2:
            continue
        rows = []
        for cand in _tiles(tile, others):
            if cand.split_k > 1 and not split_eligible(launch, cand.block_k):
                continue
            try:
                ms = _time_layer(ex, prep, launch, cand)
            except Exception as err:  # a tile that does not fit: report, go on
                log(f"  {launch.name} {cand.describe()} FAILED {type(err).__name__}: {err}")
                continue
            rows.append((ms, cand))
        again = _time_layer(ex, prep, launch, tile)  # the shipped tile once more, last
        rows.sort(key=lambda r: r[0])
        layers[launch.name] = {
            "signature": ex.layer_signature(prep, launch),
            "shipped": tile.describe(), "shipped_ms": [r[0] for r in rows if r[1] == tile][0],
            "shipped_again_ms": again,
            "tiles": [(c.describe(), ms) for ms, c in rows],
        }  # fmt: skip
        log(f"  {launch.name} {layers[launch.name]['signature']}: shipped {tile.describe()} "
            f"{layers[launch.name]['shipped_ms'] * 1e3:.1f} us (again {again * 1e3:.1f}); best "
            + ", ".join(f"{c.describe()} {ms * 1e3:.1f}" for ms, c in rows[:4]))  # fmt: skip
        if rows[0][1] != tile and rows[0][0] < 0.97 * min(again, layers[launch.name]["shipped_ms"]):
            best[launch.name] = rows[0][1]
    result: dict = {"layers": layers, "best": {k: v.describe() for k, v in best.items()}}
    for round_ in range(2):
        for label, configs in (("shipped", shipped), ("best", {**shipped, **best})):
            prep.configs.clear()
            prep.configs.update(configs)
            ex._split_buffers(prep, [(lc, configs[lc.name]) for lc in ex.launches])
            net_ms, raw = _network(ex, prep, x)
            shown, hidden = _e2e(ex, model, height, width)
            result.setdefault(f"runs_{label}", []).append({"network": net_ms, "e2e": shown,
                                                 "e2e_hidden": hidden})  # fmt: skip
            result.setdefault(f"raw_{label}", raw)
            log(f"  round {round_} {label}: network {net_ms:.4f} ms, e2e GPU {shown:.4f}, "
                f"enqueue hidden {hidden:.4f}")
    a, b = result.pop("raw_shipped").float(), result.pop("raw_best").float()
    result["raw_rel_l2"] = float((a - b).norm() / a.norm())
    log(f"  raw output best vs shipped: rel L2 {result['raw_rel_l2']:.3e}")
    ex.close()
    return result


def _input_pass(height: int, width: int, log) -> dict:
    tk = kernels()
    images = [torch.rand((height, width, 3), device="cuda") for _ in range(3)]
    scale = torch.ones(1, device="cuda")
    out = torch.empty((height, width, 16), dtype=torch.float16, device="cuda")
    results, outputs = {}, {}
    for block, warps in ((128, 4), (256, 4), (512, 4), (512, 8), (1024, 8), (64, 2)):

        def one(block=block, warps=warps) -> None:
            tk.input_pass_kernel[(-(-height * width // block),)](
                *(v for img in images for v in (img, 0, 3, 3 * width, 3)),
                scale, out, height, width, 16, 0, 0, height, width, 0, 0,
                IMAGES=3, TRANSFER=2, HDR=True, SNORM=False, BLOCK=block, CHANNELS=16,
                num_warps=warps,
            )  # fmt: skip

        graph = cb._graph_of(torch, one, 20)
        ms = statistics.median(cb._time_events(torch, graph.replay, 30, 3)) / 20
        one()
        outputs[(block, warps)] = out.clone()
        results[f"{block}/w{warps}"] = ms
    ref = outputs[(128, 4)]
    same = {f"{b}/w{w}": bool(torch.equal(o, ref)) for (b, w), o in outputs.items()}
    log(f"  input pass {width}x{height}: " + ", ".join(
        f"{k} {v * 1e3:.1f} us{'' if same[k] else ' (DIFFERENT BITS)'}" for k, v in results.items()))
    return {"us": {k: v * 1e3 for k, v in results.items()}, "same_bits": same}


def main() -> None:
    out_path, runs = sys.argv[1], sys.argv[2].split(",")
    lines: list[str] = []

    def log(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    log(f"{torch.cuda.get_device_name()} torch {torch.__version__} oidn_gpu {oidn_gpu.__file__}")
    log(f"input block now {runner_module.INPUT_BLOCK}; {time.strftime('%Y-%m-%d %H:%M:%S')}")
    out: dict = {}
    for name, weights, size in (("720p", "rt_hdr_alb_nrm", SIZES["720p"]),
                                ("1080p", "rt_hdr_alb_nrm", SIZES["1080p"]),
                                ("fast", "rt_hdr_alb_nrm_small", SIZES["1080p"]),
                                ("4k", "rt_hdr_alb_nrm", SIZES["4k"])):  # fmt: skip
        if name not in runs:
            continue
        log(f"== {name} ({weights})")
        try:
            out[name] = _size(name, weights, *size, log, others=name in ("720p", "1080p"))
        except Exception as err:
            log(f"FAILED {name}: {type(err).__name__}: {err}")
        with open(out_path, "w") as f:
            json.dump(out, f, indent=1)
    for name in ("720p", "1080p"):
        if "input" not in runs:
            break
        try:
            out[f"input_{name}"] = _input_pass(*SIZES[name], log)
        except Exception as err:
            log(f"FAILED input pass {name}: {type(err).__name__}: {err}")
    with open(out_path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
