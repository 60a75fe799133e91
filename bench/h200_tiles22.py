"""Per-layer tiles of the implicit-GEMM conv beyond the tuner's candidates, on an NVIDIA GPU.

For each size (the fast network at 1080p too): every conv on the per-layer kernel at
resolution level 1 or lower (the row kernel's layers and the fused tail excluded) is
timed alone with its shipped tile and with more tiles (M 64-256, N 64 or 128, K 32 or
64, 4 or 8 warps, 3 or 4 stages): a CUDA graph of 10 launches, median of 30, the
shipped tile timed again last. Then the network graph (median of 100) and ``e2e GPU``
(CUDA events around `CudaDenoiser.denoise_tensors`, median of 100, and with the host's
enqueue hidden behind a GPU sleep) with the shipped tiles and with ``--try`` tiles
(signature=tile), alternating twice, and the raw outputs' relative L2.

    python bench/h200_tiles22.py out.json 720p,1080p,fast [--no-sweep]
        [--try '80->96@4=64,64,32,4,3' ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

import oidn_gpu
from oidn_gpu.backends.cuda import bench as cb
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.runner import CudaDenoiser
from oidn_gpu.backends.cuda.tuning import TileConfig

RUNS = {"720p": ("rt_hdr_alb_nrm", 720, 1280), "1080p": ("rt_hdr_alb_nrm", 1080, 1920),
        "fast": ("rt_hdr_alb_nrm_small", 1080, 1920), "4k": ("rt_hdr_alb_nrm", 2160, 3840)}
SLEEP_CYCLES = 3_000_000


def _tiles(shipped: TileConfig, out_stored: int, wide: bool) -> list[TileConfig]:
    widths = [64, 128] if out_stored > 64 else [max(32, shipped.block_n)]
    shapes = [(64, 32, 4, 3), (64, 32, 4, 4), (64, 64, 4, 3), (128, 32, 4, 3), (128, 64, 4, 3),
              (128, 32, 8, 3), (256, 32, 8, 3)]  # fmt: skip
    if wide:
        shapes += [(128, 32, 4, 4), (128, 64, 8, 3), (256, 64, 8, 3)]
    out = [shipped]
    for n in widths:
        for m, k, warps, stages in shapes:
            tile = TileConfig(m, n, k, warps, stages)
            if tile not in out:
                out.append(tile)
    return out


def _time_layer(ex, prep, launch, tile) -> float:
    def one() -> None:
        ex._launch(prep, launch, tile, None)

    graph = cb._graph_of(torch, one, cb.LAYER_REPEAT)
    return statistics.median(cb._time_events(torch, graph.replay, 30, 3)) / cb.LAYER_REPEAT


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


def _run(name: str, tries: dict[str, TileConfig], sweep: bool, log) -> dict:
    weights, height, width = RUNS[name]
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
    result: dict = {"layers": {}}
    signatures = {lc.name: ex.layer_signature(prep, lc) for lc in ex.launches}
    for launch in ex.launches if sweep else ():
        tile = shipped[launch.name]
        level = int(signatures[launch.name].rsplit("@", 1)[1])
        if not isinstance(tile, TileConfig) or level < 1 or launch.final:
            continue
        rows = []
        for cand in _tiles(tile, launch.out_stored, name != "fast"):
            try:
                rows.append((_time_layer(ex, prep, launch, cand), cand))
            except Exception as err:  # a tile that does not fit: report, go on
                log(f"  {launch.name} {cand.describe()} FAILED {type(err).__name__}")
        again = _time_layer(ex, prep, launch, tile)
        first = [ms for ms, c in rows if c == tile][0]
        rows.sort(key=lambda r: r[0])
        result["layers"][launch.name] = {
            "signature": signatures[launch.name], "shipped": tile.describe(),
            "shipped_ms": first, "shipped_again_ms": again,
            "tiles": [(c.describe(), ms) for ms, c in rows],
        }  # fmt: skip
        log(f"  {launch.name} {signatures[launch.name]}: shipped {tile.describe()} "
            f"{first * 1e3:.1f} us (again {again * 1e3:.1f}); best "
            + ", ".join(f"{c.describe()} {ms * 1e3:.1f}" for ms, c in rows[:4]))  # fmt: skip
    trial = dict(shipped)
    for launch in ex.launches:
        if signatures[launch.name] in tries:
            trial[launch.name] = tries[signatures[launch.name]]
    raws = {}
    for round_ in range(2):
        for label, configs in (("shipped", shipped), ("trial", trial)):
            prep.configs.clear()
            prep.configs.update(configs)
            graph = cb._graph_of(torch, lambda: ex.forward(x, prep=prep))
            net_ms = statistics.median(cb._time_events(torch, graph.replay, 100, 10))
            ex.forward(x, prep=prep)
            raws[label] = prep.views[ex.graph.output].clone()
            shown, hidden = _e2e(ex, model, height, width)
            result.setdefault(f"runs_{label}", []).append(
                {"network": net_ms, "e2e": shown, "e2e_hidden": hidden})
            log(f"  round {round_} {label}: network {net_ms:.4f} ms, e2e GPU {shown:.4f}, "
                f"enqueue hidden {hidden:.4f}")
    a, b = raws["shipped"].float(), raws["trial"].float()
    result["raw_rel_l2"] = float((a - b).norm() / a.norm())
    result["trial"] = {k: v.describe() for k, v in tries.items()}
    log(f"  raw output trial vs shipped: rel L2 {result['raw_rel_l2']:.3e}")
    ex.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("runs")
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--try", dest="tries", action="append", default=[])
    args = parser.parse_args()
    tries = {}
    for item in args.tries:
        key, value = item.split("=")
        tries[key] = TileConfig(*(int(v) for v in value.split(",")))
    lines: list[str] = []

    def log(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    log(f"{torch.cuda.get_device_name()} torch {torch.__version__} oidn_gpu {oidn_gpu.__file__}")
    log(f"{time.strftime('%Y-%m-%d %H:%M:%S')}; trial tiles: "
        + ", ".join(f"{k}={v.describe()}" for k, v in tries.items()))  # fmt: skip
    out: dict = {}
    for name in args.runs.split(","):
        log(f"== {name} ({RUNS[name][0]})")
        try:
            out[name] = _run(name, tries, not args.no_sweep, log)
        except Exception as err:
            log(f"FAILED {name}: {type(err).__name__}: {err}")
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
