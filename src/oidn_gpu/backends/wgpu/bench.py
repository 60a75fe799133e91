"""Benchmark of the wgpu executor: one network size, N timed runs, GPU and wall-clock times.

`run_bench` loads a model, builds a `WgpuExecutor`, compiles, warms up, then
times ``runs`` executions of the network on a random input of the requested
size: wall clock per run (submit to completion, including the GPU wait but not
host packing or readback) with, when the device has timestamps, the GPU time of
the whole submission (``network_gpu_*``: timestamps at the start and end of its
command buffer); then ``runs`` more profiled runs giving the GPU time of each
layer (one compute pass per layer; ``gpu_*`` is the sum of the layers). It
reports median and p95, the top layers by GPU time, and GFLOP/s against the
model's convolution FLOPs.

End to end (``end_to_end=True``, the default; ``--no-end-to-end`` turns it off):
a `GpuDenoiser` on the same executor denoises random HDR color, albedo and
normal images (as the model takes them) of the requested image size, planned as
one tile (the network size above):

- ``e2e_gpu_*``: GPU time of the whole denoise (for HDR models the autoexposure
  on the GPU, then the input pass from the float32 image buffers already on the
  GPU, the network, output pass into a GPU image), from timestamps around its
  command buffers;
- ``e2e_wall_*``: wall clock of `GpuDenoiser.denoise_buffers` until the queue is
  idle (recording, submission and the GPU);
- ``host_wall_*``: wall clock of `GpuDenoiser.denoise` on host arrays (upload,
  autoexposure on the GPU for HDR, denoise, readback into a NumPy array), with
  its breakdown (medians): ``host_upload`` (queue writes of the images),
  ``host_submit`` (encoding and submitting), ``host_wait`` (until the GPU is
  done), ``host_readback`` (the mapped result copied into the array); and
  ``host_autoexposure_cpu_ms``, what the host autoexposure (the reference
  backend's) takes on the same colour image, for comparison: the wgpu path no
  longer runs it;
- ``facade_*``: the public path, `oidn_gpu.Denoiser.denoise` on the same NumPy
  arrays (validation, planning, the runner, the result in the input's dtype;
  tiled as the filter tiles, ``facade_tiles``), wall clock per call
  (``facade_wall_*``), with ``output=`` a preallocated array
  (``facade_output_wall_median_ms``), and the runner's breakdown of those calls
  (``facade_upload``, ``_submit``, ``_wait`` (the GPU: autoexposure, passes,
  network), ``_readback``) beside the rest (``facade_overhead``).

``host_dtype`` is the dtype of those host images (``float32`` or ``float16``);
``upload_mode`` and ``copy_threads`` say how they reached the GPU
(``OIDN_GPU_UPLOAD``: ``mapped`` upload buffers or ``queue`` writes;
``OIDN_GPU_COPY_THREADS``).

The image size is the network size: it is rounded up to the graph's alignment
(16), as OIDN pads; a size above OIDN's default tile limit (2160^2 px) is
still run as one tile, which is what ``--size 3840x2160`` measures.

Library use: ``run_bench(size=(1080, 1920), weights=..., precision="fp16")``
returns a `BenchResult` (``.table()``, ``.to_json()``). Its command line is
`backend.WgpuBenchmark` (``oidn-gpu bench``)::

    oidn-gpu bench --size 1920x1080 --weights PATH --precision fp16 --runs 20 --json out.json
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.backends import bench_result
from oidn_gpu.backends.bench_result import LayerStat, check_size, e2e_summaries, percentile
from oidn_gpu.backends.plan import DenoiseOptions, plan_denoise
from oidn_gpu.backends.wgpu import kernel_choice
from oidn_gpu.backends.wgpu.bench_tile import network_tile
from oidn_gpu.backends.wgpu.command_timer import CommandTimer, open_timed_device
from oidn_gpu.backends.wgpu.device import STORAGE_USAGE
from oidn_gpu.backends.wgpu.executor import WgpuExecutor
from oidn_gpu.backends.wgpu.runner import GpuDenoiser, GpuImage
from oidn_gpu.errors import InvalidArgumentError, OIDNGPUError
from oidn_gpu.image.autoexposure import autoexposure as host_autoexposure
from oidn_gpu.image.host_copy import copy_threads
from oidn_gpu.kernels.gemm import default_options
from oidn_gpu.model import unet
from oidn_gpu.model import weights as builtin

DEFAULT_WEIGHTS = "rt_hdr_alb_nrm"
ALIGNMENT = unet.DEFAULT_TILE_ALIGNMENT


@dataclass(frozen=True)
class BenchResult(bench_result.BenchResult):
    """Benchmark numbers of one configuration."""

    host_upload_median_ms: float | None = None
    host_submit_median_ms: float | None = None
    host_wait_median_ms: float | None = None
    host_readback_median_ms: float | None = None
    host_autoexposure_cpu_ms: float | None = None
    host_remap_median_ms: float | None = None
    host_dtype: str = "float32"
    upload_mode: str = ""
    copy_threads: int = 0
    facade_tiles: int = 0
    facade_wall_ms: tuple[float, ...] = field(default=())
    facade_wall_median_ms: float | None = None
    facade_wall_p95_ms: float | None = None
    facade_output_wall_median_ms: float | None = None
    facade_upload_median_ms: float | None = None
    facade_submit_median_ms: float | None = None
    facade_wait_median_ms: float | None = None
    facade_readback_median_ms: float | None = None
    facade_overhead_median_ms: float | None = None
    gemm: str = ""
    layers: tuple[LayerStat, ...] = field(default=())
    tile_size: int | None = None  # the tiles' edge; None: the whole image at once
    adapter_type: str = ""  # "CPU" for a CPU Vulkan driver such as lavapipe

    def _rest(self) -> str:
        """What "rest" holds: the filter's own work (checks, planning, the tile loop); on a
        CPU Vulkan driver (lavapipe) the GPU work too, which that driver runs while commands
        are submitted and polled, not in the GPU wait."""
        if self.adapter_type.lower() != "cpu":
            return "; rest: checks, planning and the tile loop"
        return "; on this CPU Vulkan driver the GPU work runs within submit and rest"

    def _tiled(self) -> str:
        if self.tile_size is None:
            return ""
        return f": one tile; denoised in tiles of at most {self.tile_size} px"

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
            f"{self.network_height}{self._tiled()}), {self.runs} runs after {self.warmup} "
            "warm-up",
            f"compile    {self.compile_s:.2f} s",
            f"wall       {self.wall_median_ms:.2f} ms median, {self.wall_p95_ms:.2f} ms p95",
            f"gpu        {gpu} (sum of per-layer passes)",
        ]
        if self.network_gpu_median_ms is not None:
            lines.append(
                f"gpu net    {self.network_gpu_median_ms:.2f} ms median, "
                f"{self.network_gpu_p95_ms:.2f} ms p95 (one pass)"
            )
        lines.append(f"work       {self.gflop:.1f} GFLOP -> {self.gflops_per_s:.0f} GFLOP/s")
        if self.end_to_end:
            e2e_gpu = (
                f"{self.e2e_gpu_median_ms:.2f} ms median, {self.e2e_gpu_p95_ms:.2f} ms p95"
                if self.e2e_gpu_median_ms is not None
                else "n/a (no timestamp-query)"
            )
            gpu_autoexposure = (
                "autoexposure + " if self.host_autoexposure_cpu_ms is not None else ""
            )
            lines += [
                f"e2e gpu    {e2e_gpu} ({gpu_autoexposure}input pass + network + output pass, "
                f"{self.e2e_tiles} tile(s))",
                f"e2e wall   {self.e2e_wall_median_ms:.2f} ms median, "
                f"{self.e2e_wall_p95_ms:.2f} ms p95 (GPU buffers)",
                f"host wall  {self.host_wall_median_ms:.2f} ms median, "
                f"{self.host_wall_p95_ms:.2f} ms p95 (upload + denoise + readback)",
                f"  of which upload {self.host_upload_median_ms:.2f} ms, submit "
                f"{self.host_submit_median_ms:.2f} ms, GPU wait {self.host_wait_median_ms:.2f}"
                f" ms, readback {self.host_readback_median_ms:.2f} ms (medians)",
            ]
            lines.append(
                f"  host images {self.host_dtype}, uploads {self.upload_mode}, "
                f"{self.copy_threads} copy thread(s)"
            )
            if self.facade_wall_median_ms is not None:
                lines += [
                    f"Denoiser   {self.facade_wall_median_ms:.2f} ms median, "
                    f"{self.facade_wall_p95_ms:.2f} ms p95 (Denoiser.denoise on NumPy arrays, "
                    f"{self.facade_tiles} tile(s)); with output= "
                    f"{self.facade_output_wall_median_ms:.2f} ms",
                    f"  of which upload {self.facade_upload_median_ms:.2f} ms, submit "
                    f"{self.facade_submit_median_ms:.2f} ms, GPU wait (autoexposure + passes + "
                    f"network) {self.facade_wait_median_ms:.2f} ms, readback "
                    f"{self.facade_readback_median_ms:.2f} ms, rest "
                    f"{self.facade_overhead_median_ms:.2f} ms (medians){self._rest()}",
                ]
            if self.host_autoexposure_cpu_ms is not None:
                lines.append(
                    f"  autoexposure on the GPU; on the host it would take "
                    f"{self.host_autoexposure_cpu_ms:.2f} ms"
                )
        if self.top_layers:
            lines.append("")
            lines.append(f"{'layer':<14} {'kernel':<14} {'ms':>9} {'share':>7} {'GFLOP/s':>9}")
            for layer in self.top_layers:
                lines.append(
                    f"{layer.name:<14} {layer.kernel:<14} {layer.median_ms:>9.3f} "
                    f"{layer.share * 100:>6.1f}% {layer.gflops_per_s:>9.0f}"
                )
        return "\n".join(lines)


def _load(weights: str | Path) -> Any:
    path = Path(weights)
    if path.suffix == ".tza" or path.exists():
        return unet.load_model(path)

    return builtin.load_builtin(str(weights))


def time_denoiser(
    denoiser: Any,
    executor: Any,
    model: Any,
    weights: str | Path,
    arrays: list[np.ndarray],
    runs: int,
    warmup: int,
    tile_size: int | None = None,
) -> dict[str, Any]:
    """Time ``denoiser`` (`oidn_gpu.Denoiser`, lent by the command line) on host arrays on
    the wgpu executor's device (its compiled pipelines are reused): the ``facade_*``
    timings of `run_bench`."""
    path = Path(weights)
    if not (path.suffix == ".tza" or path.exists()):
        path = builtin.weights_path(str(weights))
    hdr = "ldr" not in str(getattr(model, "name", "") or "").lower()
    info = executor.info()
    facade = denoiser(
        hdr=hdr,
        weights=path,
        backend="wgpu",
        precision=info.precision,
        device=executor.device.handle,
        tile_size=tile_size,
    )
    walls: list[float] = []
    output_walls: list[float] = []
    parts: list[dict[str, float]] = []
    output = np.empty_like(arrays[0])
    with facade:
        for i in range(warmup + runs):
            start = time.perf_counter()
            result = facade.denoise(*arrays)
            elapsed = (time.perf_counter() - start) * 1e3
            if i >= warmup:
                walls.append(elapsed)
                runner = next(iter(facade._engines.values())).runner
                parts.append(dict(runner.last_host_ms))
        for i in range(warmup + runs):
            start = time.perf_counter()
            facade.denoise(*arrays, output=output)
            elapsed = (time.perf_counter() - start) * 1e3
            if i >= warmup:
                output_walls.append(elapsed)
        tiles = facade.info().tiles
    # (float16 results of untrained weights may overflow to Inf; NaN means a broken path)
    if result.dtype != arrays[0].dtype or np.isnan(result).any():
        raise OIDNGPUError("the benchmark's Denoiser.denoise gave a wrong dtype or NaN")
    return {
        "facade_wall": walls,
        "facade_output_wall": output_walls,
        "facade_parts": parts,
        "facade_tiles": tiles,
    }


def run_bench(
    *,
    size: tuple[int, int] = (1080, 1920),
    weights: str | Path = DEFAULT_WEIGHTS,
    precision: str = "auto",
    kernel: str = "auto",
    gemm: Any = None,
    runs: int = 20,
    warmup: int = 3,
    top: int = 8,
    device: Any = None,
    random_seed: int = 0,
    end_to_end: bool = True,
    executor: Any = None,
    host_dtype: str = "float32",
    facade: Callable[..., dict[str, Any]] | None = None,
    tile_size: int | None = None,
) -> BenchResult:
    """Benchmark the network (and, with ``end_to_end``, the whole GPU denoise) at one size.

    See the module docstring. ``size`` is ``(height, width)`` of the image. ``host_dtype``:
    ``"float32"`` or ``"float16"`` host images for the end-to-end runs; ``facade``: called
    as ``facade(executor, model, weights, arrays, runs, warmup, tile_size)`` after the
    end-to-end runs, it times the public ``Denoiser.denoise`` on those host arrays and
    returns its ``facade_*`` timings (`backend.WgpuBenchmark` passes `time_denoiser` with
    the command line's `Denoiser`; this layer cannot import the filter).
    ``executor``: an open `WgpuExecutor` of ``weights`` to reuse (sweeps), left open;
    ``device``/``precision``/``kernel``/``gemm`` are then ignored (its settings are reported).
    ``tile_size``: the tile edge (`bench_tile.network_tile`: by default the whole image, or
    the largest tile the device can bind); the network is timed on one tile.

    Raises:
        InvalidArgumentError: bad size, runs or options.
    """
    height, width, net_h, net_w = _checked(size, runs, warmup, host_dtype)
    model = executor.model if executor is not None else _load(weights)
    start = time.perf_counter()
    with _bench_executor(executor, model, device, precision, kernel, gemm) as executor:
        timer = CommandTimer(executor.device)
        net_h, net_w, edge = network_tile(executor, net_h, net_w, tile_size, ALIGNMENT)
        compile_s = time.perf_counter() - start
        rng = np.random.default_rng(random_seed)
        wall, network_gpu = _network_runs(executor, timer, (net_h, net_w), runs, warmup, rng)
        gpu_total, all_layers = _profiled_layers(executor, net_h, net_w, runs)
        e2e: dict[str, Any] = {}
        if end_to_end:
            e2e = _end_to_end(
                executor, timer, model, (height, width, edge), runs, warmup, rng, host_dtype
            )
            if facade:
                times = facade(executor, model, weights, e2e["arrays"], runs, warmup, edge)
                e2e.update(times)
            e2e.pop("arrays", None)
        info = executor.info()
        total_flops = executor.network_flops(net_h, net_w)
        caps = executor.device.capabilities
        gemm_text = _gemm_text(executor)
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
        top_layers=tuple(all_layers[:top]),
        compile_s=compile_s,
        gemm=gemm_text,
        layers=tuple(all_layers),
        tile_size=edge,
        adapter_type=caps.adapter.adapter_type,
        **_network_fields(wall, gpu_total, network_gpu, total_flops),
        **_summaries(e2e),
    )


def _network_runs(
    executor: WgpuExecutor,
    timer: CommandTimer,
    size: tuple[int, int],
    runs: int,
    warmup: int,
    rng: np.random.Generator,
) -> tuple[list[float], list[float]]:
    """The network alone on one ``size`` input: each run's wall clock and whole-submission
    GPU time (one pass; empty without timestamps), after ``warmup`` runs."""
    net_h, net_w = size
    x = rng.random((executor.input_channels, net_h, net_w), dtype=np.float32)
    executor.run(x)  # upload once; later runs reuse the packed input in place
    for _ in range(warmup):
        _timed_run(executor, net_h, net_w)
    wall: list[float] = []
    with timer:
        for _ in range(runs):
            wall.append(_timed_run(executor, net_h, net_w))
    return wall, timer.elapsed_ms()


def _profiled_layers(
    executor: WgpuExecutor, net_h: int, net_w: int, runs: int
) -> tuple[list[float], list[LayerStat]]:
    """``runs`` network runs with one timestamped pass per layer: the GPU total of each
    run and every layer's median, slowest first (nothing without timestamps)."""
    gpu_total: list[float] = []
    per_layer: dict[str, list[float]] = {}
    kernels: dict[str, str] = {}
    flops_by_layer: dict[str, float] = {}
    for _ in range(runs):
        if executor.profile_next_execution():
            _timed_run(executor, net_h, net_w)
            profile = executor.last_profile()
            assert profile is not None
            gpu_total.append(profile.total_ms)
            for layer in profile.layers:
                per_layer.setdefault(layer.name, []).append(layer.elapsed_ms)
                kernels[layer.name] = layer.kernel
                flops_by_layer[layer.name] = layer.flops
    gpu_median = statistics.median(gpu_total) if gpu_total else None
    all_layers: list[LayerStat] = []
    if gpu_total:
        medians = {name: statistics.median(times) for name, times in per_layer.items()}
        for name, ms in sorted(medians.items(), key=lambda item: -item[1]):
            all_layers.append(
                LayerStat(
                    name=name,
                    kernel=kernels[name],
                    median_ms=ms,
                    share=ms / gpu_median if gpu_median else 0.0,
                    gflops_per_s=flops_by_layer[name] / (ms * 1e6) if ms > 0 else 0.0,
                )
            )
    return gpu_total, all_layers


def _network_fields(
    wall: list[float], gpu_total: list[float], network_gpu: list[float], total_flops: float
) -> dict[str, Any]:
    """The network-only `BenchResult` fields: wall clock, GPU times, GFLOP/s."""
    gpu_median = statistics.median(gpu_total) if gpu_total else None
    reference_ms = gpu_median if gpu_median else statistics.median(wall)
    return {
        "wall_ms": tuple(wall),
        "gpu_ms": tuple(gpu_total),
        "wall_median_ms": statistics.median(wall),
        "wall_p95_ms": percentile(wall, 95),
        "gpu_median_ms": gpu_median,
        "gpu_p95_ms": percentile(gpu_total, 95) if gpu_total else None,
        "gflop": total_flops / 1e9,
        "gflops_per_s": total_flops / (reference_ms * 1e6) if reference_ms > 0 else 0.0,
        "network_gpu_ms": tuple(network_gpu),
        "network_gpu_median_ms": statistics.median(network_gpu) if network_gpu else None,
        "network_gpu_p95_ms": percentile(network_gpu, 95) if network_gpu else None,
    }


def _checked(
    size: tuple[int, int], runs: int, warmup: int, host_dtype: str
) -> tuple[int, int, int, int]:
    """``(height, width)`` of `run_bench`'s arguments, checked, and the network's size."""
    if runs < 1 or warmup < 0:
        raise InvalidArgumentError(f"runs must be >= 1 and warmup >= 0, got {runs} and {warmup}")
    height, width = check_size(size)
    if host_dtype not in ("float32", "float16"):
        raise InvalidArgumentError(f"host_dtype {host_dtype!r}; expected 'float32' or 'float16'")
    return height, width, -(-height // ALIGNMENT) * ALIGNMENT, -(-width // ALIGNMENT) * ALIGNMENT


@contextmanager
def _bench_executor(
    executor: WgpuExecutor | None,
    model: Any,
    device: Any,
    precision: str,
    kernel: str,
    gemm: Any,
) -> Iterator[WgpuExecutor]:
    """The caller's ``executor`` (left open), else a new one on a timed device, closed
    with its device after the benchmark."""
    if executor is not None:
        yield executor
        return
    executor = WgpuExecutor(
        model,
        device=open_timed_device(device),
        precision=precision,
        kernel=kernel,
        gemm=gemm,
        shape_cache_size=1,
    )
    try:
        yield executor
    finally:
        executor.close()
        closer = getattr(executor.device, "close_base", None)
        if closer is not None:
            closer()


def _summaries(e2e: dict[str, Any]) -> dict[str, Any]:
    if not e2e:
        return {}
    out = e2e_summaries(e2e)
    for part in ("upload", "submit", "wait", "readback"):
        values = [times[part] for times in e2e["host_parts"]]
        out[f"host_{part}_median_ms"] = statistics.median(values) if values else None
    out["host_autoexposure_cpu_ms"] = e2e["host_autoexposure_cpu_ms"]
    remaps = [times.get("remap", 0.0) for times in e2e["host_parts"]]
    out["host_remap_median_ms"] = statistics.median(remaps) if remaps else None
    out["host_dtype"] = e2e["host_dtype"]
    out["upload_mode"] = e2e["upload_mode"]
    out["copy_threads"] = copy_threads()
    if "facade_wall" in e2e:
        walls = e2e["facade_wall"]
        out["facade_tiles"] = e2e["facade_tiles"]
        out["facade_wall_ms"] = tuple(walls)
        out["facade_wall_median_ms"] = statistics.median(walls)
        out["facade_wall_p95_ms"] = percentile(walls, 95)
        out["facade_output_wall_median_ms"] = statistics.median(e2e["facade_output_wall"])
        parts = e2e["facade_parts"]
        for part in ("upload", "submit", "wait", "readback"):
            out[f"facade_{part}_median_ms"] = statistics.median(p[part] for p in parts)
        rest = [
            w - sum(p[k] for k in ("upload", "submit", "wait", "readback"))
            for w, p in zip(walls, parts, strict=True)
        ]
        out["facade_overhead_median_ms"] = statistics.median(rest)
    return out


def _gemm_text(executor: Any) -> str:
    """The GEMM options in effect (explicit, else the device default)."""
    options = getattr(executor, "gemm", None)
    if options is None:
        try:
            limits = kernel_choice.device_limits(executor.device.capabilities)
            options = default_options(limits, executor.precision)
        except ImportError:  # pragma: no cover - kernels without GemmOptions
            return ""
    describe = getattr(options, "describe", None)
    return describe() if describe is not None else str(options)


def _end_to_end(
    executor: Any,
    timer: CommandTimer,
    model: Any,
    size: tuple[int, int, int | None],
    runs: int,
    warmup: int,
    rng: np.random.Generator,
    host_dtype: Any = np.float32,
) -> dict[str, Any]:
    """Time `GpuDenoiser` on GPU buffers (GPU + wall) and on host arrays (wall); ``size``:
    height, width and the tile edge (None: the whole image as one tile)."""
    height, width, edge = size
    device = executor.device
    count = executor.input_channels // 3
    hdr = "ldr" not in str(getattr(model, "name", "") or "").lower()
    options = DenoiseOptions(hdr=hdr, whole_image=edge is None, tile_size=edge)
    denoise_plan = plan_denoise(model, height, width, options)
    mode, plan = denoise_plan.mode, denoise_plan.tiles
    arrays = [rng.random((height, width, 3), dtype=np.float32) * (4.0 if hdr else 1.0)]
    arrays += [rng.random((height, width, 3), dtype=np.float32) for _ in range(count - 1)]
    if count >= 3:
        arrays[2] = arrays[2] * 2.0 - 1.0  # normals in [-1, 1]
    buffers = []
    for index, array in enumerate(arrays):
        buffer = device.create_buffer(f"oidn/bench/image{index}", array.nbytes, STORAGE_USAGE)
        device.write_buffer(buffer, 0, array)
        buffers.append(GpuImage(buffer, height, width, 3))
    out_buffer = device.create_buffer("oidn/bench/output", height * width * 12, STORAGE_USAGE)
    output = GpuImage(out_buffer, height, width, 3)
    gpu_ms: list[float] = []
    wall_ms: list[float] = []
    host_ms: list[float] = []
    host_parts: list[dict[str, float]] = []
    host_dtype = np.dtype(host_dtype)
    host_arrays = [a.astype(host_dtype, copy=False) for a in arrays]
    with GpuDenoiser(executor) as denoiser:
        denoiser.prepare(mode)
        upload_mode = denoiser.upload_mode

        def on_buffers() -> float:
            start = time.perf_counter()
            denoiser.denoise_buffers(buffers, output, mode=mode, plan=plan, autoexposure=hdr)
            device.wait_idle()
            return (time.perf_counter() - start) * 1e3

        for _ in range(warmup):
            on_buffers()
        with timer:
            for _ in range(runs):
                wall_ms.append(on_buffers())
        gpu_ms = timer.elapsed_ms()
        for i in range(warmup + runs):
            start = time.perf_counter()
            result = denoiser.denoise(*host_arrays, mode=mode, plan=plan, autoexposure=hdr)
            elapsed = (time.perf_counter() - start) * 1e3
            if i >= warmup:
                host_ms.append(elapsed)
                host_parts.append(dict(denoiser.last_host_ms))
        if not np.isfinite(result).all():
            raise OIDNGPUError("the benchmark denoise produced non-finite values")
    host_autoexposure_ms = None
    if hdr:
        start = time.perf_counter()
        host_autoexposure(arrays[0])
        host_autoexposure_ms = (time.perf_counter() - start) * 1e3
    return {
        "tiles": len(plan.tiles),
        "e2e_gpu": gpu_ms,
        "e2e_wall": wall_ms,
        "host_wall": host_ms,
        "host_parts": host_parts,
        "host_autoexposure_cpu_ms": host_autoexposure_ms,
        "host_dtype": str(host_dtype),
        "upload_mode": upload_mode,
        "arrays": host_arrays,
    }


def _timed_run(executor: Any, height: int, width: int) -> float:
    """Submit the network on the already packed input and wait; wall ms."""
    device = executor.device
    start = time.perf_counter()
    executor.execute_packed(height, width)
    device.wait_idle()
    return (time.perf_counter() - start) * 1e3
