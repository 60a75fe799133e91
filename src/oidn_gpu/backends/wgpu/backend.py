"""The wgpu backend's registry entry: WGSL compute shaders on Vulkan, Metal, D3D12, lavapipe.

Importing this module needs no wgpu: its options validate and its probe reports
a missing wgpu as the reason the backend is unavailable. ``backend="auto"``
picks it only when an adapter that is a real GPU exists (a CPU rasterizer such as
lavapipe is slower than NumPy; ask for ``backend="wgpu"`` to use it). On Linux the
probe first reads Vulkan's driver manifests and the GPU device nodes (`icd`): where
they rule a GPU out it answers without importing wgpu. `WgpuBenchmark` is its benchmark,
the default of ``oidn-gpu bench`` (its engine, `bench`, is imported when it runs).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import logging
import time
from typing import Any

from oidn_gpu.backends.base import (
    Availability,
    NetworkExecutor,
    TileRunner,
    precision_choices,
)
from oidn_gpu.backends.bench_result import JSON_HELP, parse_size, write_bench_json
from oidn_gpu.backends.benchmark import add_cold_arguments, run_cold_start
from oidn_gpu.backends.phases import log_phase, paused_gc
from oidn_gpu.backends.wgpu import icd
from oidn_gpu.backends.wgpu.options import KERNELS, PRECISIONS, WgpuOptions
from oidn_gpu.errors import InvalidArgumentError, MissingDependencyError

_LOG = logging.getLogger("oidn_gpu.wgpu")
# Adapter features worth naming in `oidn-gpu info`.
REPORTED_FEATURES = ("shader-f16", "subgroup", "timestamp-query")


class WgpuBenchmark:
    """The `Benchmark` of the wgpu backend (what ``oidn-gpu bench`` runs by default)."""

    description = "Benchmark the wgpu executor (the default backend of bench)."
    default = True

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--size", default="1080p", help="720p, 1080p, 4k or WIDTHxHEIGHT")
        parser.add_argument(
            "--weights", default="rt_hdr_alb_nrm", help="a .tza path or built-in name"
        )
        parser.add_argument("--precision", default="auto", choices=precision_choices(PRECISIONS))
        parser.add_argument("--kernel", default="auto", help=", ".join(KERNELS))
        parser.add_argument(
            "--gemm", default=None, help="GEMM options as JSON, e.g. '{\"rows_per_thread\": 4}'"
        )
        parser.add_argument(
            "--tile-size",
            type=int,
            default=None,
            metavar="PX",
            help="denoise in tiles of at most PX a side and time the network on one, as "
            "'oidn-gpu denoise --tile-size' (default: the whole image, or the largest tile "
            "the device can bind)",
        )
        parser.add_argument("--runs", type=int, default=20)
        parser.add_argument("--warmup", type=int, default=3)
        parser.add_argument("--top", type=int, default=8)
        parser.add_argument("--json", dest="json_path", default=None, help=JSON_HELP)
        parser.add_argument(
            "--no-end-to-end",
            dest="end_to_end",
            action="store_false",
            help="time the network only (skip the GpuDenoiser end-to-end runs)",
        )
        parser.add_argument(
            "--host-dtype",
            default="float32",
            choices=("float32", "float16"),
            help="dtype of the host images of the end-to-end runs",
        )
        parser.add_argument(
            "--no-denoiser",
            dest="facade",
            action="store_false",
            help="skip timing Denoiser.denoise on the host images",
        )
        add_cold_arguments(parser)

    def run(self, args: Any, tools: Any) -> int:
        if args.cold:
            return run_cold_start("wgpu", args, tools)
        try:
            # The benchmark engine needs wgpu: imported only when asked for.
            from oidn_gpu.backends.wgpu import bench
        except ImportError as err:
            raise MissingDependencyError(
                f"the wgpu benchmark needs the wgpu backend: pip install 'oidn-gpu[wgpu]' ({err})"
            ) from err
        try:
            gemm = json.loads(args.gemm) if args.gemm else None
        except json.JSONDecodeError as err:
            raise InvalidArgumentError(f"--gemm is not valid JSON ({err})") from None
        result = bench.run_bench(
            size=parse_size(args.size),
            weights=args.weights,
            precision=args.precision,
            kernel=args.kernel,
            gemm=gemm,
            runs=args.runs,
            warmup=args.warmup,
            top=args.top,
            end_to_end=args.end_to_end,
            host_dtype=args.host_dtype,
            facade=functools.partial(bench.time_denoiser, tools.denoiser) if args.facade else None,
            tile_size=args.tile_size,
        )
        print(result.table())
        if args.json_path:
            write_bench_json(args.json_path, "wgpu", "denoise", result.to_dict())
        return 0


BENCHMARK = WgpuBenchmark()


# What `Availability.warning` says when only a CPU Vulkan driver (or adapter) is there.
CPU_DRIVER_WARNING = (
    "the wgpu backend finds no GPU here and runs on a CPU Vulkan driver (such as lavapipe): "
    "expect seconds per small frame; --backend reference is faster on a CPU"
)


class WgpuBackend:
    """WGSL kernels through wgpu, with the GPU denoise pipeline as its tile runner."""

    name = "wgpu"
    priority = 100
    description = "WGSL compute shaders through wgpu (Vulkan, Metal, D3D12)"
    Options = WgpuOptions
    uses_gpu = True
    precisions = PRECISIONS
    benchmark = "oidn_gpu.backends.wgpu.backend:BENCHMARK"

    def probe(self) -> Availability:
        """Whether the backend runs here (a phase of a first denoise: where a GPU's driver
        is installed, it imports wgpu and asks for an adapter)."""
        started = time.perf_counter()
        try:
            with paused_gc():
                return self._probe()
        finally:
            log_phase(_LOG, "find a GPU adapter", started)

    def _probe(self) -> Availability:
        # On Linux, Vulkan's driver manifests and the device nodes can rule a GPU out
        # without importing wgpu (which takes about a second): see `icd`.
        reason = icd.no_gpu_reason()
        if reason is not None and importlib.util.find_spec("wgpu") is not None:
            cpu = icd.cpu_drivers()
            if not cpu:
                return Availability(
                    False,
                    f"{reason}; no CPU Vulkan driver either (Mesa's lavapipe: "
                    "'apt-get install mesa-vulkan-drivers')",
                )
            return Availability(
                True,
                f"{reason}; 'auto' does not pick {' or '.join(cpu)}, backend='wgpu' does",
                warning=CPU_DRIVER_WARNING,
            )
        try:
            from oidn_gpu.backends.wgpu import device
        except MissingDependencyError as err:
            return Availability(False, str(err))
        if device.has_hardware_adapter():
            return Availability(True, "a GPU adapter", auto=True)
        if device.enumerate_adapters():
            return Availability(
                True, "software adapter only; 'auto' does not pick it", warning=CPU_DRIVER_WARNING
            )
        return Availability(False, "no WebGPU adapter found")

    def describe(self) -> tuple[str, ...]:
        try:
            from oidn_gpu.backends.wgpu import device

            adapters = device.enumerate_adapters()
        except Exception as err:
            return (f"enumerating adapters failed ({err})",)
        lines = []
        for adapter in adapters:
            info: dict[str, Any] = dict(getattr(adapter, "info", {}) or {})
            try:
                features = sorted(str(f) for f in adapter.features if f in REPORTED_FEATURES)
            except Exception:
                features = []
            kind = f"{info.get('backend_type') or '?'}, {info.get('adapter_type') or '?'}"
            extra = f" features: {', '.join(features)}" if features else ""
            lines.append(f"adapter {info.get('device') or '?'} ({kind}){extra}")
        return tuple(lines)

    def create_executor(self, model: Any, options: WgpuOptions) -> NetworkExecutor:
        from oidn_gpu.backends.wgpu.executor import PREPARE_IN_BACKGROUND, WgpuExecutor

        # The kernels compile on the device's compile threads while the runner uploads
        # the first images and compiles its own passes beside them.
        return WgpuExecutor(model, options=options, prepare=PREPARE_IN_BACKGROUND)

    def create_runner(self, executor: NetworkExecutor) -> TileRunner:
        from oidn_gpu.backends.wgpu.runner import GpuDenoiser

        return GpuDenoiser(executor)  # type: ignore[arg-type]

    def place_on_gpu(self, options: WgpuOptions, gpu_id: int) -> tuple[WgpuOptions, str]:
        # WebGPU sees every GPU of the machine: a device on that GPU's adapter
        if options.device is not None:
            return options, ""
        from oidn_gpu.backends.wgpu.placement import open_device_for_gpu

        return dataclasses.replace(options, device=open_device_for_gpu(gpu_id)), ""

    def temporal_passes(self, options: WgpuOptions) -> Any:
        """The temporal mode's passes as WGSL kernels on the options' device (else a new
        device)."""
        from oidn_gpu.backends.wgpu.temporal import WgpuTemporalPasses

        return WgpuTemporalPasses(options.device)

    def temporal_session(self, frames: Any) -> Any:
        """The temporal mode with its history on the device of the engine of ``frames``
        (a denoiser's `backends.temporal_seam.FrameSource`;
        `temporal_session.WgpuTemporalSession`: one readback per frame, tiled frames
        included); None for the RTLightmap filter and ``prefilter="accurate"``, which the
        passes on host arrays serve."""
        options = frames.options
        if options.filter_type != "RT" or options.prefilter == "accurate":
            return None
        from oidn_gpu.backends.wgpu.temporal_session import WgpuTemporalSession

        return WgpuTemporalSession(frames)


BACKEND = WgpuBackend()
