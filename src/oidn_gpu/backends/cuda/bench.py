"""Benchmark of the CUDA backend: network and whole-denoise GPU times, per-layer table, memory.

Fields follow the wgpu bench (``oidn_gpu.backends.wgpu.bench``); times are CUDA
events, medians and p95 over ``runs`` timed runs after ``warmup`` runs:

- ``network_gpu_*``: the network alone (one CUDA graph of all conv launches) on
  a random input of the network size (the image size rounded up to 16);
- ``gpu_*``: the sum of the layers, each timed alone (``layers``: every conv with
  its kernel and tile, time, share of the network, TFLOP/s and the share of the
  tensor-core floor, i.e. its FLOPs at ``--peak-tflops`` over its time);
- ``e2e_gpu_*``: a whole denoise with the data on the GPU (GPU autoexposure,
  input pass, network, output pass: one CUDA graph replay) from random HDR
  colour, albedo and normal tensors into an output tensor;
- ``e2e_wall_*``: wall clock of `CudaDenoiser.denoise_tensors` until the stream
  is idle; ``host_wall_*``: `CudaDenoiser.denoise` on NumPy arrays (pinned
  staging, upload, denoise, readback), its stages timed apart
  (``host_breakdown_ms``), and ``host_direct_wall_median_ms`` through pageable copies;
- ``api_ms``: the public API per call, filled by `benchmark.CudaBenchmark` with the rows
  the command line lends (`oidn_gpu.cli.bench_api`: the backend layer does not import
  the filter);
- ``peak_memory_mb``: torch's peak device allocation during the benchmark.

``--baseline`` runs the same benchmark a second time on the plain cuDNN port
(`torch_ops.TorchNetwork`, channels-last fp16 ``conv2d`` in one CUDA graph,
torch input and output passes) and prints both.

Its command line is `benchmark.CudaBenchmark` (``oidn-gpu bench --backend cuda``)::

    oidn-gpu bench --backend cuda --size 1080p --weights rt_hdr_alb_nrm \\
        --runs 100 --baseline --json out.json
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.backends import bench_result
from oidn_gpu.backends.bench_result import check_size, e2e_summaries, percentile
from oidn_gpu.backends.cuda import layout, torch_ops
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.options import TILE_LIMITS
from oidn_gpu.backends.cuda.runner import CudaDenoiser
from oidn_gpu.backends.cuda.tuning import TileConfig, cache_path
from oidn_gpu.backends.plan import WHOLE_IMAGE, plan_tiles
from oidn_gpu.errors import OIDNGPUError
from oidn_gpu.graph.plan import plan
from oidn_gpu.image.process import mode_for
from oidn_gpu.model.unet import load_model
from oidn_gpu.model.weights import load_builtin

DEFAULT_WEIGHTS = "rt_hdr_alb_nrm"
ALIGNMENT = 16
LAYER_REPEAT = 10  # launches of one layer per timed graph replay
PEAK_TFLOPS = 790.0  # dense fp16/bf16 tensor-core rate measured on an H200 (KINDS.md)


@dataclass(frozen=True)
class LayerStat(bench_result.LayerStat):
    tflops_per_s: float
    floor_share: float  # tensor-core floor time / measured time


@dataclass(frozen=True)
class BenchResult(bench_result.BenchResult):
    """Benchmark numbers of one configuration (the wgpu bench's fields, plus memory)."""

    gemm: str = ""
    layers: tuple[LayerStat, ...] = field(default=())
    host_direct_wall_median_ms: float | None = None  # NumPy through pageable copies
    transfers: dict[str, float] = field(default_factory=dict)
    host_breakdown_ms: dict[str, float] = field(default_factory=dict)  # upload, frame, download
    peak_memory_mb: float = 0.0
    floor_ms: float = 0.0  # the network's FLOPs at the tensor-core rate
    api_ms: dict[str, float] = field(default_factory=dict)  # cli.bench_api.ROWS, median wall

    def table(self) -> str:
        """A human-readable summary."""
        lines = [
            f"device     {self.device} ({self.backend_type}, {self.kernel})",
            f"weights    {self.weights}  precision {self.precision}",
            f"size       {self.width}x{self.height} (network {self.network_width}x"
            f"{self.network_height}), {self.runs} runs after {self.warmup} warm-up",
            f"compile    {self.compile_s:.2f} s (with tuning)",
            f"gpu net    {self.network_gpu_median_ms:.3f} ms median, "
            f"{self.network_gpu_p95_ms:.3f} ms p95 (one CUDA graph)",
            "layers     "
            + (
                f"{self.gpu_median_ms:.3f} ms (sum of per-layer medians)"
                if self.gpu_median_ms is not None
                else "n/a (cuDNN: timed as a whole)"
            ),
            f"work       {self.gflop:.1f} GFLOP -> {self.gflops_per_s / 1e3:.0f} TFLOP/s; "
            f"tensor-core floor {self.floor_ms:.3f} ms",
        ]
        if self.end_to_end:
            lines += [
                f"e2e gpu    {self.e2e_gpu_median_ms:.3f} ms median, "
                f"{self.e2e_gpu_p95_ms:.3f} ms p95 (autoexposure + input pass + network + "
                f"output pass, {self.e2e_tiles} tile(s))",
                f"e2e wall   {self.e2e_wall_median_ms:.3f} ms median (torch tensors in and out)",
                f"host wall  {self.host_wall_median_ms:.3f} ms median, "
                f"{self.host_wall_p95_ms:.3f} ms p95 (NumPy in and out, pinned staging); "
                f"{self.host_direct_wall_median_ms:.3f} ms through pageable copies",
                "host parts "
                + ", ".join(f"{k} {v:.2f}" for k, v in self.host_breakdown_ms.items()),
                "transfers  "
                + ", ".join(f"{k} {v:.1f}" for k, v in self.transfers.items() if k != "bytes"),
            ]
        lines.append(f"memory     {self.peak_memory_mb:.0f} MiB peak device allocation")
        if self.layers:
            lines.append("")
            lines.append(
                f"{'layer':<20} {'kernel':<56} {'ms':>7} {'share':>6} {'TFLOP/s':>8} {'floor':>6}"
            )
            for layer in self.layers:
                lines.append(
                    f"{layer.name:<20} {layer.kernel[:56]:<56} {layer.median_ms:>7.3f} "
                    f"{layer.share * 100:>5.1f}% {layer.tflops_per_s:>8.1f} "
                    f"{layer.floor_share * 100:>5.1f}%"
                )
        return "\n".join(lines)


def tune_tiles(
    size: tuple[int, int], weights: str | Path = DEFAULT_WEIGHTS, precision: str = "fp16"
) -> tuple[Path | None, dict[str, TileConfig]]:
    """Time every layer's tile candidates at ``size`` (rounded up to 16) and keep the
    fastest in the tuning cache; returns the cache path and this network's choices."""
    executor = CudaExecutor(
        _load(weights), precision=precision, engine="triton", tune=True, bridge=False
    )
    try:
        height, width = (-(-v // ALIGNMENT) * ALIGNMENT for v in size)
        prep = executor.prepare(height, width)
        assert prep is not None
        choices = {
            executor.layer_signature(prep, launch): prep.configs[launch.name]
            for launch in executor.launches
        }
        return cache_path(), choices
    finally:
        executor.close()


def _load(weights: str | Path) -> Any:
    path = Path(weights)
    if path.suffix == ".tza" or path.exists():
        return load_model(path)
    return load_builtin(str(weights))


def _graph_of(torch: Any, fn: Any, repeat: int = 1) -> Any:
    """A CUDA graph of ``repeat`` calls of ``fn`` (after one warm-up call on a side stream)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(repeat):
            fn()
    return graph


def _time_events(torch: Any, fn: Any, runs: int, warmup: int) -> list[float]:
    """Per-run GPU milliseconds of ``fn`` between two CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def _time_wall(torch: Any, fn: Any, runs: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def run_bench(
    *,
    size: tuple[int, int] = (1080, 1920),
    weights: str | Path = DEFAULT_WEIGHTS,
    precision: str = "fp16",
    engine: str = "auto",
    runs: int = 100,
    warmup: int = 10,
    host_runs: int = 20,
    end_to_end: bool = True,
    peak_tflops: float = PEAK_TFLOPS,
) -> BenchResult:
    """Benchmark one configuration on the current CUDA device (see the module docstring)."""
    torch = torch_ops.torch
    height, width = check_size(size)
    net_h, net_w = -(-height // ALIGNMENT) * ALIGNMENT, -(-width // ALIGNMENT) * ALIGNMENT
    model = _load(weights)
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    # The benchmark times the chosen engine itself: no cuDNN bridge while Triton compiles.
    executor = CudaExecutor(model, precision=precision, engine=engine, bridge=False)
    prep = executor.prepare(net_h, net_w)
    x = executor.input_view(prep, net_h, net_w)
    x.copy_(torch.rand(x.shape, device=x.device).to(x.dtype))
    x[..., executor.input_channels :] = 0
    executor.forward(x, prep=prep)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - start

    graph = _graph_of(torch, lambda: executor.forward(x, prep=prep))
    network = _time_events(torch, graph.replay, runs, warmup)
    wall = _time_wall(torch, graph.replay, runs, warmup)

    launches = executor.launches
    shapes = plan(executor.graph, net_h, net_w)
    flops = {launch.name: launch.flops(*layout.conv_shapes(shapes, launch)) for launch in launches}
    layer_ms = _time_steps(torch, executor, prep, runs) if executor.engine == "triton" else {}
    kernels = executor.kernel_names()
    layers = _layer_stats(executor, flops, kernels, layer_ms, peak_tflops)
    total_layers = sum(layer_ms.values())
    total_flops = sum(flops.values())
    net_median = statistics.median(network)
    e2e: dict[str, Any] = {}
    if end_to_end:
        e2e = _end_to_end(torch, executor, model, height, width, runs, warmup, host_runs)
    torch.cuda.synchronize()
    peak_mb = torch.cuda.max_memory_allocated() / 2**20
    result = BenchResult(
        device=torch.cuda.get_device_name(),
        backend_type=f"cuda (torch {torch.__version__})",
        weights=str(weights),
        precision=precision,
        kernel=executor.engine + (f" (fallback: {executor.fallback})" if executor.fallback else ""),
        height=height,
        width=width,
        network_height=net_h,
        network_width=net_w,
        runs=runs,
        warmup=warmup,
        wall_ms=tuple(wall),
        gpu_ms=(total_layers,) if layer_ms else (),
        wall_median_ms=statistics.median(wall),
        wall_p95_ms=percentile(wall, 95),
        gpu_median_ms=total_layers if layer_ms else None,
        gpu_p95_ms=total_layers if layer_ms else None,
        gflop=total_flops / 1e9,
        gflops_per_s=total_flops / (net_median * 1e6),
        top_layers=tuple(sorted(layers, key=lambda s: -s.median_ms)[:8]),
        compile_s=compile_s,
        network_gpu_ms=tuple(network),
        network_gpu_median_ms=net_median,
        network_gpu_p95_ms=percentile(network, 95),
        gemm=", ".join(f"{k}: {v}" for k, v in kernels.items()),
        layers=tuple(layers),
        peak_memory_mb=peak_mb,
        floor_ms=total_flops / (peak_tflops * 1e9),
        **_summaries(e2e),
    )
    executor.close()
    return result


def _step_layers(step: Any) -> tuple[Any, ...]:
    """The conv launches one executor step covers (two for the fused tail)."""
    return getattr(step, "layers", (step,))


def _time_steps(torch: Any, executor: CudaExecutor, prep: Any, runs: int) -> dict[str, float]:
    """Median milliseconds of each executor step (a conv, or the fused tail), timed alone."""
    target = executor._raw_target(prep)
    out = {}
    for step in executor.steps:

        def one(step: Any = step) -> None:
            executor.launch_step(prep, step, target)

        layer_graph = _graph_of(torch, one, LAYER_REPEAT)
        times = _time_events(torch, layer_graph.replay, max(10, runs // 4), 3)
        out[step.name] = statistics.median(times) / LAYER_REPEAT
    return out


def _layer_stats(
    executor: CudaExecutor,
    flops: dict[str, float],
    kernels: dict[str, str],
    layer_ms: dict[str, float],
    peak_tflops: float,
) -> list[LayerStat]:
    """One row per executor step: a fused kernel is one row named after the layers it
    covers (``dec_conv1b+dec_conv0``), with their FLOPs (not the recomputed halo's)."""
    total = sum(layer_ms.values())
    stats = []
    for step in executor.steps:
        if step.name not in layer_ms:
            continue
        ms = layer_ms[step.name]
        work = sum(flops[launch.name] for launch in _step_layers(step))
        tflops = work / (ms * 1e9) if ms > 0 else 0.0
        floor = work / (peak_tflops * 1e9)
        stats.append(
            LayerStat(
                step.name,
                kernels[_step_layers(step)[-1].name],
                ms,
                ms / total if total else 0.0,
                tflops * 1e3,
                tflops,
                floor / ms if ms > 0 else 0.0,
            )
        )
    return stats


def e2e_inputs(
    torch: Any, executor: CudaExecutor, model: Any, height: int, width: int
) -> tuple[list[np.ndarray], list[Any], Any, Any, Any]:
    """The end-to-end runs' random HDR colour (and albedo, normal as the network takes
    them): host arrays, their device copies, the output tensor, the mode and the tile plan."""
    rng = np.random.default_rng(20261130)
    channels = executor.input_channels // 3
    host = [
        (rng.random((height, width, 3)) * 4).astype(np.float32),
        rng.random((height, width, 3)).astype(np.float32),
        (rng.random((height, width, 3)) * 2 - 1).astype(np.float32),
    ][:channels]
    images = [torch.from_numpy(a).cuda() for a in host]
    out = torch.empty((height, width, 3), dtype=torch.float32, device="cuda")
    plan = plan_tiles(model, height, width, WHOLE_IMAGE, TILE_LIMITS)
    return host, images, out, mode_for("RT", hdr=True), plan


def _end_to_end(
    torch: Any,
    executor: CudaExecutor,
    model: Any,
    height: int,
    width: int,
    runs: int,
    warmup: int,
    host_runs: int,
) -> dict[str, Any]:
    host, images, out, mode, plan = e2e_inputs(torch, executor, model, height, width)
    denoiser = CudaDenoiser(executor)

    def on_tensors() -> None:
        denoiser.denoise_tensors(*images, mode=mode, plan=plan, out=out, autoexposure=True)

    on_tensors()
    torch.cuda.synchronize()
    gpu = _time_events(torch, on_tensors, runs, warmup)
    wall = _time_wall(torch, on_tensors, runs, warmup)
    result = np.empty((height, width, 3), np.float32)

    def on_host() -> None:
        denoiser.denoise(*host, mode=mode, plan=plan, autoexposure=True, output=result)

    host_wall = _time_wall(torch, on_host, host_runs, 3)
    breakdown = _host_breakdown(torch, denoiser, host, mode, plan, result, host_runs)
    if not np.isfinite(result).all():
        raise OIDNGPUError("the benchmark's denoised image has NaN or Inf values")
    denoiser.close()
    expected = result.copy()
    direct = CudaDenoiser(executor, host_transfer="direct")

    def on_host_direct() -> None:
        direct.denoise(*host, mode=mode, plan=plan, autoexposure=True, output=result)

    result.fill(np.nan)
    host_direct = _time_wall(torch, on_host_direct, host_runs, 3)
    direct.close()
    # the same kernels on the same data: equal up to the order of the autoexposure sums
    error = np.linalg.norm(result - expected) / np.linalg.norm(expected)
    if not error <= 1e-6:
        raise OIDNGPUError(f"the pageable NumPy path is {error:.2e} (relative L2) from the staged")
    return {
        "tiles": len(plan.tiles),
        "e2e_gpu": gpu,
        "e2e_wall": wall,
        "host_wall": host_wall,
        "host_direct_wall_median_ms": statistics.median(host_direct),
        "host_breakdown_ms": breakdown,
        "transfers": _transfers(torch, host),
    }


def _host_breakdown(
    torch: Any,
    denoiser: CudaDenoiser,
    host: list[np.ndarray],
    mode: Any,
    plan: Any,
    result: np.ndarray,
    runs: int,
) -> dict[str, float]:
    """Medians of the NumPy path's stages, each run to completion on its own."""
    stream = torch.cuda.current_stream()
    images = denoiser._upload(host)
    out = denoiser._dev["out"]

    def upload() -> None:
        denoiser._upload(host)

    def frame() -> None:
        denoiser.denoise_tensors(*images, mode=mode, plan=plan, out=out, autoexposure=True)

    def download() -> None:
        denoiser._download(out, result, stream)

    return {
        name: statistics.median(_time_wall(torch, fn, runs, 2))
        for name, fn in (("upload", upload), ("frame", frame), ("download", download))
    }


def _transfers(torch: Any, host: list[np.ndarray]) -> dict[str, float]:
    """GB/s of the copies a NumPy denoise makes (the inputs' bytes), for the record."""
    array = np.concatenate([a.reshape(-1) for a in host])
    size = array.nbytes
    pinned = torch.empty(array.size, dtype=torch.float32, pin_memory=True)
    pinned_np = pinned.numpy()
    device = torch.empty(array.size, dtype=torch.float32, device="cuda")
    out: dict[str, float] = {"bytes": float(size)}

    def rate(fn: Any) -> float:
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(5):
            start = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        return size / statistics.median(times) / 1e9

    out["host_copy_1_thread_gbps"] = rate(lambda: np.copyto(pinned_np, array))
    with ThreadPoolExecutor(16) as pool:
        parts = np.array_split(np.arange(array.size), 16)

        def threaded() -> None:
            list(
                pool.map(
                    lambda p: np.copyto(pinned_np[p[0] : p[-1] + 1], array[p[0] : p[-1] + 1]), parts
                )
            )

        out["host_copy_16_threads_gbps"] = rate(threaded)
    out["h2d_pinned_gbps"] = rate(lambda: device.copy_(pinned, non_blocking=True))
    out["d2h_pinned_gbps"] = rate(lambda: pinned.copy_(device, non_blocking=True))
    out["h2d_pageable_gbps"] = rate(lambda: device.copy_(torch.from_numpy(array)))
    return out


def _summaries(e2e: dict[str, Any]) -> dict[str, Any]:
    if not e2e:
        return {}
    return {
        **e2e_summaries(e2e),
        "host_direct_wall_median_ms": e2e["host_direct_wall_median_ms"],
        "host_breakdown_ms": e2e["host_breakdown_ms"],
        "transfers": e2e["transfers"],
    }
