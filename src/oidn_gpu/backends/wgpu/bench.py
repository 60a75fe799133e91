"""Benchmark of the wgpu executor: one network size, N timed runs, GPU and wall-clock times.

`run_bench` loads a model, builds a `WgpuExecutor`, compiles, warms up, then
times ``runs`` executions of the network on a random input of the requested
size: wall clock per run (submit to completion, including the GPU wait but not
host packing or readback), then, when the device has timestamps, ``runs`` more
profiled runs giving the GPU time of each layer (one compute pass per layer). It reports median and p95, the
top layers by GPU time, and GFLOP/s against the model's convolution FLOPs.

The image size is the network size: it is rounded up to the graph's alignment
(16), as OIDN pads; a size above OIDN's default tile limit (2160^2 px) is
still run as one tile, which is what ``--size 3840x2160`` measures.

Library use: ``run_bench(size="1080p", weights=..., precision="fp16")`` returns
a `BenchResult` (``.table()``, ``.to_json()``). Command line::

    python -m oidn_gpu.backends.wgpu.bench --size 1920x1080 --weights PATH \\
        --precision fp16 --runs 20 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.errors import InvalidArgumentError, OIDNGPUError

SIZES = {"720p": (720, 1280), "1080p": (1080, 1920), "4k": (2160, 3840)}
DEFAULT_WEIGHTS = "rt_hdr_alb_nrm"
ALIGNMENT = 16


def parse_size(size: str | tuple[int, int]) -> tuple[int, int]:
    """``"720p"``, ``"1080p"``, ``"4k"`` or ``"WxH"`` -> ``(height, width)``."""
    if isinstance(size, tuple):
        height, width = size
    else:
        text = str(size).strip().lower()
        if text in SIZES:
            return SIZES[text]
        parts = text.split("x")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise InvalidArgumentError(
                f"unknown size {size!r}; expected '720p', '1080p', '4k' or WIDTHxHEIGHT"
            )
        width, height = int(parts[0]), int(parts[1])
    if height < 1 or width < 1:
        raise InvalidArgumentError(f"size {width}x{height} must be positive")
    return int(height), int(width)


@dataclass(frozen=True)
class LayerStat:
    name: str
    kernel: str
    median_ms: float
    share: float  # fraction of the median GPU total
    gflops_per_s: float


@dataclass(frozen=True)
class BenchResult:
    """Benchmark numbers of one configuration."""

    device: str
    backend_type: str
    weights: str
    precision: str
    kernel: str
    height: int
    width: int
    network_height: int
    network_width: int
    runs: int
    warmup: int
    wall_ms: tuple[float, ...]
    gpu_ms: tuple[float, ...]
    wall_median_ms: float
    wall_p95_ms: float
    gpu_median_ms: float | None
    gpu_p95_ms: float | None
    gflop: float
    gflops_per_s: float
    top_layers: tuple[LayerStat, ...] = field(default=())
    compile_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def table(self) -> str:
        """A human-readable summary."""
        gpu = (
            f"{self.gpu_median_ms:.2f} ms median, {self.gpu_p95_ms:.2f} ms p95"
            if self.gpu_median_ms is not None
            else "n/a (no timestamp-query)"
        )
        lines = [
            f"device     {self.device} ({self.backend_type})",
            f"weights    {self.weights}  precision {self.precision}  kernel {self.kernel}",
            f"size       {self.width}x{self.height} (network {self.network_width}x"
            f"{self.network_height}), {self.runs} runs after {self.warmup} warm-up",
            f"compile    {self.compile_s:.2f} s",
            f"wall       {self.wall_median_ms:.2f} ms median, {self.wall_p95_ms:.2f} ms p95",
            f"gpu        {gpu}",
            f"work       {self.gflop:.1f} GFLOP -> {self.gflops_per_s:.0f} GFLOP/s",
        ]
        if self.top_layers:
            lines.append("")
            lines.append(f"{'layer':<14} {'kernel':<14} {'ms':>9} {'share':>7} {'GFLOP/s':>9}")
            for layer in self.top_layers:
                lines.append(
                    f"{layer.name:<14} {layer.kernel:<14} {layer.median_ms:>9.3f} "
                    f"{layer.share * 100:>6.1f}% {layer.gflops_per_s:>9.0f}"
                )
        return "\n".join(lines)


def _percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, np.float64), q))


def _load(weights: str | Path) -> Any:
    from oidn_gpu.model import unet

    path = Path(weights)
    if path.suffix == ".tza" or path.exists():
        return unet.load_model(path)
    from oidn_gpu.model import weights as builtin

    return builtin.load_builtin(str(weights))


def run_bench(
    *,
    size: str | tuple[int, int] = "1080p",
    weights: str | Path = DEFAULT_WEIGHTS,
    precision: str = "auto",
    kernel: str = "auto",
    gemm: Any = None,
    runs: int = 20,
    warmup: int = 3,
    top: int = 8,
    device: Any = None,
    seed: int = 0,
) -> BenchResult:
    """Benchmark the network at one size; see the module docstring.

    Raises:
        InvalidArgumentError: bad size, runs or options.
    """
    from oidn_gpu.backends.wgpu.executor import WgpuExecutor

    if runs < 1 or warmup < 0:
        raise InvalidArgumentError(f"runs must be >= 1 and warmup >= 0, got {runs} and {warmup}")
    height, width = parse_size(size)
    net_h = -(-height // ALIGNMENT) * ALIGNMENT
    net_w = -(-width // ALIGNMENT) * ALIGNMENT
    model = _load(weights)
    start = time.perf_counter()
    executor = WgpuExecutor(
        model, device=device, precision=precision, kernel=kernel, gemm=gemm, shape_cache_size=1
    )
    try:
        executor.prewarm([(net_h, net_w)])
        compile_s = time.perf_counter() - start
        rng = np.random.default_rng(seed)
        x = rng.random((executor.input_channels, net_h, net_w), dtype=np.float32)
        executor.run(x)  # upload once; later runs reuse the packed input in place
        gpu = executor.device
        for _ in range(warmup):
            _timed_run(executor, net_h, net_w)
        wall: list[float] = []
        gpu_total: list[float] = []
        per_layer: dict[str, list[float]] = {}
        kernels: dict[str, str] = {}
        flops_by_layer: dict[str, float] = {}
        for _ in range(runs):  # wall clock without timestamps (one compute pass)
            wall.append(_timed_run(executor, net_h, net_w))
        for _ in range(runs):  # GPU time: one pass per layer with timestamps
            if executor.profile_next_execution():
                _timed_run(executor, net_h, net_w)
                profile = executor.last_profile()
                assert profile is not None
                gpu_total.append(profile.total_ms)
                for layer in profile.layers:
                    per_layer.setdefault(layer.name, []).append(layer.elapsed_ms)
                    kernels[layer.name] = layer.kernel
                    flops_by_layer[layer.name] = layer.flops
        info = executor.info()
        total_flops = executor.network_flops(net_h, net_w)
        caps = gpu.capabilities
    finally:
        executor.close()
    gpu_median = statistics.median(gpu_total) if gpu_total else None
    layers: list[LayerStat] = []
    if gpu_total:
        medians = {name: statistics.median(times) for name, times in per_layer.items()}
        for name, ms in sorted(medians.items(), key=lambda item: -item[1])[:top]:
            layers.append(
                LayerStat(
                    name=name,
                    kernel=kernels[name],
                    median_ms=ms,
                    share=ms / gpu_median if gpu_median else 0.0,
                    gflops_per_s=flops_by_layer[name] / (ms * 1e6) if ms > 0 else 0.0,
                )
            )
    reference_ms = gpu_median if gpu_median else statistics.median(wall)
    return BenchResult(
        device=caps.adapter.device,
        backend_type=caps.adapter.backend_type,
        weights=getattr(model, "name", None) or str(weights),
        precision=info.precision,
        kernel=info.kernel,
        height=height,
        width=width,
        network_height=net_h,
        network_width=net_w,
        runs=runs,
        warmup=warmup,
        wall_ms=tuple(wall),
        gpu_ms=tuple(gpu_total),
        wall_median_ms=statistics.median(wall),
        wall_p95_ms=_percentile(wall, 95),
        gpu_median_ms=gpu_median,
        gpu_p95_ms=_percentile(gpu_total, 95) if gpu_total else None,
        gflop=total_flops / 1e9,
        gflops_per_s=total_flops / (reference_ms * 1e6) if reference_ms > 0 else 0.0,
        top_layers=tuple(layers),
        compile_s=compile_s,
    )


def _timed_run(executor: Any, height: int, width: int) -> float:
    """Submit the network on the already packed input and wait; wall ms."""
    device = executor.device
    start = time.perf_counter()
    executor.execute_packed(height, width)
    device.wait_idle()
    return (time.perf_counter() - start) * 1e3


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m oidn_gpu.backends.wgpu.bench", description="Benchmark the wgpu executor."
    )
    parser.add_argument("--size", default="1080p", help="720p, 1080p, 4k or WIDTHxHEIGHT")
    parser.add_argument("--weights", default=DEFAULT_WEIGHTS, help="a .tza path or built-in name")
    parser.add_argument("--precision", default="auto", choices=("auto", "fp16", "fp32"))
    parser.add_argument("--kernel", default="auto")
    parser.add_argument("--gemm", default=None, help="GEMM options as JSON, e.g. '{\"rows_per_thread\": 4}'")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--json", dest="json_path", default=None, help="write the result as JSON")
    args = parser.parse_args(argv)
    try:
        gemm = json.loads(args.gemm) if args.gemm else None
        result = run_bench(
            size=args.size,
            weights=args.weights,
            precision=args.precision,
            kernel=args.kernel,
            gemm=gemm,
            runs=args.runs,
            warmup=args.warmup,
            top=args.top,
        )
    except (OIDNGPUError, json.JSONDecodeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2 if isinstance(err, (InvalidArgumentError, json.JSONDecodeError)) else 1
    print(result.table())
    if args.json_path:
        Path(args.json_path).write_text(result.to_json() + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
