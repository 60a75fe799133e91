"""Sweep implicit-GEMM options (`GemmOptions`) on one device, in one process.

The story: the seeds' GEMM defaults were tuned on Apple GPUs. This script builds
one `WgpuExecutor` per configuration on a single shared device (the pipeline
cache is per device, so kernels shared between configurations compile once),
times the network at one size and precision with GPU timestamps, and prints a
table sorted by the GPU median of the whole network (one submission, one
compute pass; ``net``), next to the sum of the per-layer passes (``layers``,
the number `bench` reports as ``gpu``). It also reports, per layer, the fastest
configuration, and writes everything as JSON.

Configurations: ``--configs screen`` (tile shapes: workgroup, rows, columns per
thread, K tile; then the secondary options on the default and the best shapes),
``--configs FILE.json`` (a list of option mappings), or ``--configs default``.
``--budget-s`` stops the sweep in time (the remaining configurations are
listed as skipped), so a lease is never overrun.

    python bench/gemm_sweep.py --size 1080p --precision fp16 --runs 20 \\
        --configs screen --json sweep.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from oidn_gpu.cli.sizes import parse_size

from oidn_gpu.backends.wgpu import bench, command_timer
from oidn_gpu.backends.wgpu.executor import WgpuExecutor
from oidn_gpu.errors import OIDNGPUError
from oidn_gpu.kernels.gemm import GemmOptions


def _shape(ws: tuple[int, int], rows: int, cols: int, k: int, **extra: Any) -> dict[str, Any]:
    return {
        # an explicit workgroup size alone would mean the fixed tile policy
        "tile_policy": "output-aligned",
        "workgroup_size": list(ws),
        "rows_per_thread": rows,
        "cols_per_thread": cols,
        "k_tile": k,
        **extra,
    }


def screen_configs() -> list[dict[str, Any]]:
    """Tile shapes first (most promising first), then secondary options on a few shapes."""
    configs: list[dict[str, Any]] = [{}]  # the seeds' defaults
    shapes = []
    for cols, rows, ws, k in itertools.product(
        (2, 1, 4), (8, 4), ((8, 8), (8, 16), (16, 8), (4, 16), (16, 16), (4, 8)), (8, 16)
    ):
        # keep the register tile and the unrolled code in bounds
        if rows * cols > 16 or rows * cols * k > 256:
            continue
        if ws == (16, 16) and rows * cols > 8:
            continue
        shapes.append(_shape(ws, rows, cols, k))
    configs += shapes
    secondary = [
        {"load_mode": "packed-all"},
        {"load_mode": "packed-weights"},
        {"accumulation_order": "row-major"},
        {"address_mode": "base-offset"},
        {"address_mode": "analytic"},
        {"shared_layout": "linear"},
        {"shared_layout": "padded"},
        {"shared_layout": "padded-weights"},
        {"weight_layout": "output-major"},
        {"decoder_load": "source-first"},
        {"tile_policy": "fixed"},
    ]
    for base in (_shape((8, 16), 8, 2, 8), _shape((8, 8), 8, 2, 16)):
        configs += [{**base, **extra} for extra in secondary]
    configs += [{}, *({**s} for s in secondary)]
    unique: list[dict[str, Any]] = []
    seen = set()
    for c in configs:
        key = GemmOptions(**c)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


def _options_text(config: dict[str, Any]) -> str:
    if not config:
        return "(seed defaults)"
    parts = []
    for name, value in config.items():
        if isinstance(value, (list, tuple)):
            value = "x".join(map(str, value))
        parts.append(f"{name}={value}")
    return " ".join(parts)


def run_config(
    model: Any,
    device: Any,
    config: dict[str, Any],
    precision: str,
    net_h: int,
    net_w: int,
    runs: int,
    warmup: int,
    x: np.ndarray,
    reference: list[np.ndarray],
) -> dict[str, Any]:
    """Compile and time one configuration; GPU ms of the network and of each layer.

    The output is compared with ``reference[0]`` (the first configuration's output,
    stored there when the list is empty): every option keeps the K order and the f16
    partial grouping, so outputs should be bit-identical.
    """
    start = time.perf_counter()
    executor = WgpuExecutor(
        model, device=device, precision=precision, gemm=GemmOptions(**config), shape_cache_size=1
    )
    try:
        executor.prewarm([(net_h, net_w)])
        compile_s = time.perf_counter() - start
        executor.run(x)
        for _ in range(warmup):
            executor.execute_packed(net_h, net_w)
            device.wait_idle()
        timer = command_timer.CommandTimer(device)
        with timer:
            for _ in range(runs):
                executor.execute_packed(net_h, net_w)
                device.wait_idle()
        net = timer.elapsed_ms()
        totals: list[float] = []
        per_layer: dict[str, list[float]] = {}
        kernels: dict[str, str] = {}
        flops: dict[str, float] = {}
        for _ in range(runs):
            if not executor.profile_next_execution():
                break
            executor.execute_packed(net_h, net_w)
            device.wait_idle()
            profile = executor.last_profile()
            totals.append(profile.total_ms)
            for layer in profile.layers:
                per_layer.setdefault(layer.name, []).append(layer.elapsed_ms)
                kernels[layer.name] = layer.kernel
                flops[layer.name] = layer.flops
        executor.run(x)
        out = executor.read_output(net_h, net_w)
        finite = bool(np.isfinite(out).all())
        if not reference:
            reference.append(out)
        identical = bool(np.array_equal(out, reference[0]))
        max_diff = float(np.max(np.abs(out.astype(np.float64) - reference[0])))
        total_flops = executor.network_flops(net_h, net_w)
    finally:
        executor.close()
    net_median = statistics.median(net) if net else None
    layers_median = statistics.median(totals) if totals else None
    layers = {
        name: {
            "kernel": kernels[name],
            "median_ms": statistics.median(t),
            "tflops": flops[name] / (statistics.median(t) * 1e9) if statistics.median(t) else 0,
        }
        for name, t in per_layer.items()
    }
    return {
        "config": config,
        "options": GemmOptions(**config).describe(),
        "compile_s": compile_s,
        "net_ms": net,
        "net_median_ms": net_median,
        "layers_median_ms": layers_median,
        "tflops": total_flops / (net_median * 1e9) if net_median else None,
        "layers": layers,
        "finite": finite,
        "identical_to_first": identical,
        "max_abs_diff_vs_first": max_diff,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1080p")
    parser.add_argument("--weights", default=bench.DEFAULT_WEIGHTS)
    parser.add_argument("--precision", default="fp16", choices=("fp16", "fp32"))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--configs", default="screen", help="screen, default or a JSON file")
    parser.add_argument("--limit", type=int, default=0, help="at most this many configurations")
    parser.add_argument("--budget-s", type=float, default=0.0, help="stop after this long")
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)

    if args.configs == "screen":
        configs = screen_configs()
    elif args.configs == "default":
        configs = [{}]
    else:
        configs = json.loads(Path(args.configs).read_text())
    if args.limit:
        configs = configs[: args.limit]
    height, width = parse_size(args.size)
    net_h = -(-height // bench.ALIGNMENT) * bench.ALIGNMENT
    net_w = -(-width // bench.ALIGNMENT) * bench.ALIGNMENT
    model = bench._load(args.weights)
    device = command_timer.open_timed_device()
    caps = device.capabilities
    adapter = caps.adapter
    print(f"device {adapter.device} ({adapter.backend_type}, {adapter.adapter_type})")
    print(f"{len(configs)} configurations, {args.size} {args.precision}, {args.runs} runs each")
    x = np.random.default_rng(0).random((model.input_channels, net_h, net_w), dtype=np.float32)
    start = time.perf_counter()
    reference: list[np.ndarray] = []
    results: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for index, config in enumerate(configs):
        if args.budget_s and time.perf_counter() - start > args.budget_s:
            skipped = configs[index:]
            print(f"budget reached: {len(skipped)} configurations skipped")
            break
        try:
            r = run_config(
                model,
                device,
                config,
                args.precision,
                net_h,
                net_w,
                args.runs,
                args.warmup,
                x,
                reference,
            )
        except OIDNGPUError as err:
            print(f"[{index}] {_options_text(config)}: error {err}")
            results.append({"config": config, "error": str(err)})
            continue
        results.append(r)
        bits = "same" if r["identical_to_first"] else f"DIFF {r['max_abs_diff_vs_first']:.3g}"
        print(
            f"[{index}] net {r['net_median_ms'] or float('nan'):7.3f} ms  layers "
            f"{r['layers_median_ms'] or float('nan'):7.3f} ms  compile {r['compile_s']:5.1f} s  "
            f"{bits}  "
            f"{_options_text(config)}",
            flush=True,
        )
        if args.json_path:
            _write(args, caps, results, skipped, configs[index + 1 :])
    ok = [r for r in results if "error" not in r and r["net_median_ms"] is not None]
    ok.sort(key=lambda r: r["net_median_ms"])
    best_layers: dict[str, dict[str, Any]] = {}
    for r in ok:
        for name, layer in r["layers"].items():
            if name not in best_layers or layer["median_ms"] < best_layers[name]["median_ms"]:
                best_layers[name] = {**layer, "config": _options_text(r["config"])}
    if args.json_path:
        _write(args, caps, results, skipped, [], best_layers)
    print()
    print(f"{'rank':>4} {'net ms':>8} {'layers ms':>9} {'TFLOP/s':>8} {'bits':>5}  options")
    for rank, r in enumerate(ok, 1):
        print(
            f"{rank:>4} {r['net_median_ms']:8.3f} {r['layers_median_ms'] or 0:9.3f} "
            f"{r['tflops'] or 0:8.1f} {'same' if r['identical_to_first'] else 'DIFF':>5}  "
            f"{_options_text(r['config'])}"
        )
    _print_layer_table(results)
    if best_layers:
        print()
        print(
            "fastest configuration per layer (sum of bests "
            f"{sum(b['median_ms'] for b in best_layers.values()):.3f} ms):"
        )
        for name, b in sorted(best_layers.items(), key=lambda kv: -kv[1]["median_ms"]):
            print(
                f"  {name:<12} {b['median_ms']:7.3f} ms {b['tflops']:6.1f} TFLOP/s  {b['config']}"
            )
    return 0


def _print_layer_table(results: list[dict[str, Any]]) -> None:
    """GPU ms per layer (rows) and configuration (columns, by index), slowest layers first."""
    ok = [(i, r) for i, r in enumerate(results) if "error" not in r and r["layers"]]
    if not ok:
        return
    names = sorted(ok[0][1]["layers"], key=lambda n: -ok[0][1]["layers"][n]["median_ms"])
    print()
    print("GPU ms per layer and configuration ([index] as above):")
    print(f"  {'layer':<12}" + "".join(f"{'[' + str(i) + ']':>9}" for i, _ in ok))
    for name in names:
        cells = "".join(
            f"{r['layers'][name]['median_ms']:9.3f}" if name in r["layers"] else f"{'-':>9}"
            for _, r in ok
        )
        print(f"  {name:<12}{cells}")
    totals = "".join(f"{r['layers_median_ms'] or 0:9.3f}" for _, r in ok)
    print(f"  {'(layers)':<12}{totals}")
    nets = "".join(f"{r['net_median_ms'] or 0:9.3f}" for _, r in ok)
    print(f"  {'(network)':<12}{nets}")


def _write(args, caps, results, skipped, pending, best_layers=None) -> None:
    data = {
        "device": caps.adapter.device,
        "backend_type": caps.adapter.backend_type,
        "adapter_type": caps.adapter.adapter_type,
        "size": args.size,
        "weights": str(args.weights),
        "precision": args.precision,
        "runs": args.runs,
        "results": results,
        "skipped": skipped + pending,
        "best_per_layer": best_layers or {},
    }
    Path(args.json_path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
