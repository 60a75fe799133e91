"""The cuda backend's registry entry: Triton (or cuDNN) kernels on NVIDIA GPUs through PyTorch.

Importing this module needs no torch: its options validate and its probe reports
a missing torch or GPU as the reason the backend is unavailable. ``backend="auto"``
tries it first, and picks it wherever torch sees a CUDA GPU; a torch device given
as ``device=`` asks for it. `CudaBenchmark` is its benchmark (``oidn-gpu bench --backend
cuda``; its engine, `bench`, imports torch when it runs).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.backends.base import (
    Availability,
    DenoiseImages,
    NetworkExecutor,
    Progress,
    TileRunner,
)
from oidn_gpu.backends.bench_result import JSON_HELP, parse_size, write_bench_json
from oidn_gpu.backends.benchmark import add_cold_arguments, run_cold_start
from oidn_gpu.backends.cuda import available, kernel_specs
from oidn_gpu.backends.cuda.options import ENGINES, PRECISIONS, TILE_LIMITS, CudaOptions
from oidn_gpu.backends.cuda.placement import cuda_device_for_gpu
from oidn_gpu.backends.host_runner import report_progress
from oidn_gpu.backends.phases import timed_phase
from oidn_gpu.backends.plan import DenoisePlan
from oidn_gpu.errors import InvalidArgumentError, MissingDependencyError

_LOG = logging.getLogger(__name__)


class CudaTileRunner:
    """The cuda `TileRunner` (and `AutoexposureRunner`, `DeviceRunner`, `HostInputsRunner`,
    `CoverageRunner`, `BesideRunner`): a whole frame (all tiles) per call on `CudaDenoiser`,
    from NumPy arrays or from tensors on its device.

    A frame is one CUDA graph replay, so ``progress`` hears 1.0 when it is done (and
    0.0 from the filter before it); returning False then still leaves the caller's
    output untouched.
    """

    def __init__(self, denoiser: Any) -> None:
        self.denoiser = denoiser

    def run(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> np.ndarray:
        return self._denoise(images, plan, progress, autoexposure=False)

    def run_autoexposed(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> tuple[np.ndarray, float]:
        """`AutoexposureRunner.run_autoexposed`: OIDN's autoexposure of the colour computed
        on the GPU inside the frame's CUDA graph; the scale is read back after the frame."""
        result = self._denoise(images, plan, progress, autoexposure=True)
        return result, self.denoiser.input_scale()

    def run_with_alpha(
        self,
        images: DenoiseImages,
        plan: DenoisePlan,
        alpha: Callable[[Any, Any], Any],
        progress: Progress | None = None,
        *,
        autoexposure: bool = False,
    ) -> tuple[np.ndarray, Any]:
        """`AlphaRunner.run_with_alpha`: one upload of the RGBA image, the alpha queued on a
        side stream beside the colour's CUDA graph, one read back (`CudaDenoiser.denoise`)."""
        result = self._denoise(images, plan, progress, autoexposure=autoexposure, alpha=alpha)
        scale = self.denoiser.input_scale() if autoexposure else plan.mode.input_scale
        return result, scale

    def _denoise(
        self,
        images: DenoiseImages,
        plan: DenoisePlan,
        progress: Progress | None,
        *,
        autoexposure: bool,
        staged: bool = False,
        alpha: Callable[[Any, Any], Any] | None = None,
    ) -> Any:
        """One frame: NumPy images through `CudaDenoiser.denoise` (``alpha``: with the
        alpha computed beside), or device tensors (``staged``) through
        `CudaDenoiser.denoise_staged`."""
        if not TILE_LIMITS.fits(*plan.tile_shape):
            tile_h, tile_w = plan.tile_shape
            raise InvalidArgumentError(
                f"a {tile_w}x{tile_h} px tile is past the cuda backend's tiles of at most "
                f"{TILE_LIMITS.max_pixels} px (32-bit indexing); plan_denoise with "
                "tile_limits('cuda') plans within them"
            )
        entry = self.denoiser.denoise_staged if staged else self.denoiser.denoise
        # A scratch destination (a result with room for the alpha, a float16 result) is
        # written in place; the caller's own array only through the result, so a failed
        # frame leaves it as it was.
        into = images.output if not staged and images.output_is_scratch else None
        given: dict[str, Any] = {} if into is None else {"output": into}
        if alpha is not None:
            given["alpha"] = alpha
        # The denoiser's buffers are updated in place every frame: never inference tensors,
        # also when the caller runs under torch.inference_mode.
        with self.denoiser._torch.inference_mode(False):
            result = entry(
                images.main,
                images.albedo,
                images.normal,
                mode=plan.mode,
                plan=plan.tiles,
                out_channels=images.out_channels,
                autoexposure=autoexposure,
                **given,
            )
        report_progress(progress, 1.0)
        return result

    # -- device tensors (`DeviceRunner`) -----------------------------------------------

    @property
    def device(self) -> Any:
        return self.denoiser.device

    def run_device(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> Any:
        """`DeviceRunner.run_device`: the tensors staged into the denoiser's buffers
        (`CudaDenoiser.denoise_staged`), one graph replay, nothing read back."""
        return self._denoise(images, plan, progress, autoexposure=False, staged=True)

    def run_device_autoexposed(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> tuple[Any, Any]:
        """`DeviceRunner.run_device_autoexposed`: the scale stays on the GPU until read."""
        result = self._denoise(images, plan, progress, autoexposure=True, staged=True)
        return result, self.denoiser.last_input_scale()

    def host_inputs(self) -> dict[str, Any]:
        """`HostInputsRunner.host_inputs`: the device copies of the last NumPy frame."""
        return self.denoiser.host_inputs()

    def queued(self) -> Any:
        """`BesideRunner.queued`: an event on the current stream."""
        return self.denoiser.queued()

    def beside(self, start: Any = None) -> AbstractContextManager[Callable[[Any], Any]]:
        """`BesideRunner.beside`: a side stream (`CudaDenoiser.beside`)."""
        return self.denoiser.beside(start)

    def fit_coverage(self, alpha: Any, guide: Any, *, clip: bool = False) -> Any:
        """`CoverageRunner.fit_coverage`: `coverage_kernels.fit_coverage`."""
        from oidn_gpu.backends.cuda import coverage_kernels  # Triton: on first use

        return coverage_kernels.fit_coverage(alpha, guide, clip=clip)

    def wait_compiled(self, timeout: float | None = None) -> bool:
        """Wait for the Triton kernels compiling behind the cuDNN bridge."""
        return bool(self.denoiser.wait_compiled(timeout))

    def close(self) -> None:
        self.denoiser.close()


def _engine(what: str) -> Any:
    """`backends.cuda.bench`, or `MissingDependencyError` saying what needs it."""
    try:
        # The benchmark engine needs torch: imported only when asked for.
        from oidn_gpu.backends.cuda import bench
    except ImportError as err:
        raise MissingDependencyError(
            f"{what} needs the cuda backend: pip install 'oidn-gpu[cuda]' ({err})"
        ) from err
    return bench


class CudaBenchmark:
    """The `Benchmark` of the cuda backend."""

    description = "Benchmark the CUDA backend (CUDA events, medians)."
    default = False

    def add_arguments(self, parser: Any) -> None:
        add = parser.add_argument
        add("--size", default="1080p", help="720p, 1080p, 4k or WIDTHxHEIGHT")
        add("--weights", default="rt_hdr_alb_nrm", help="a .tza path or built-in name")
        add("--precision", default="fp16", choices=[p.value for p in PRECISIONS])
        add("--engine", default="auto", choices=ENGINES)
        add("--runs", type=int, default=100)
        add("--warmup", type=int, default=10)
        add("--host-runs", type=int, default=20)
        add("--no-end-to-end", action="store_true")
        add("--baseline", action="store_true", help="also run the plain cuDNN port and print both")
        add("--peak-tflops", type=float, default=None, help="tensor-core peak")
        add_cold_arguments(parser, frames="100,400")
        add(
            "--tune",
            action="store_true",
            help="time the tile candidates of every layer at --size on this GPU and keep the "
            "fastest in the tuning cache (OIDN_GPU_CUDA_TUNING names it; default "
            "cuda-tuning.json in the per-user cache folder), which later processes read",
        )
        add("--json", dest="json_path", default=None, help=JSON_HELP)

    def run(self, args: Any, tools: Any) -> int:
        if args.cold:
            # A user of this backend has torch: the script imports it first (CUDA init).
            return run_cold_start("cuda", args, tools, import_torch=True, oidn_device="cuda")
        if args.tune:
            return _tune(args)
        bench = _engine("the CUDA benchmark")
        kwargs = {
            "size": parse_size(args.size),
            "weights": args.weights,
            "precision": args.precision,
            "runs": args.runs,
            "warmup": args.warmup,
            "host_runs": args.host_runs,
            "end_to_end": not args.no_end_to_end,
        }
        if args.peak_tflops is not None:
            kwargs["peak_tflops"] = args.peak_tflops
        results = {}
        for name, engine in [("cuda", args.engine)] + [("baseline", "cudnn")] * args.baseline:
            results[name] = bench.run_bench(engine=engine, **kwargs)
            if name == "cuda" and not args.no_end_to_end:
                rows = tools.api_rows(
                    backend="cuda",
                    size=kwargs["size"],
                    weights=args.weights,
                    precision=args.precision,
                    engine=engine,
                    runs=args.runs,
                    host_runs=args.host_runs,
                    warmup=args.warmup,
                )
                results[name] = replace(results[name], api_ms=rows)
            if args.json_path:
                data = {key: r.to_dict() for key, r in results.items()}
                write_bench_json(args.json_path, "cuda", "configurations", data)
            print(f"== {name} ({args.size}, {args.weights})")
            print(results[name].table(), flush=True)
            for row, value in results[name].api_ms.items():
                print(
                    f"api        {value:.3f} ms median wall: {tools.api_row_names[row]}", flush=True
                )
        return 0


def _tune(args: Any) -> int:
    """``--tune``: `bench.tune_tiles`."""
    bench = _engine("tuning")
    path, choices = bench.tune_tiles(parse_size(args.size), args.weights, args.precision)
    for key, config in sorted(choices.items()):
        print(f"{key:<24} {config.describe()}")
    print(f"tuning cache: {path if path is not None else 'not written (OIDN_GPU_CUDA_TUNING=off)'}")
    return 0


BENCHMARK = CudaBenchmark()


class CudaBackend:
    """CUDA through PyTorch, with the fused device-side denoise pipeline as its runner."""

    name = "cuda"
    priority = 200
    description = "Triton (or cuDNN) kernels on NVIDIA GPUs through PyTorch"
    Options = CudaOptions
    precisions = PRECISIONS
    benchmark = "oidn_gpu.backends.cuda.backend:BENCHMARK"
    tile_limits = TILE_LIMITS
    uses_gpu = True

    def probe(self) -> Availability:
        ok, detail = available()
        if ok:
            return Availability(True, f"{detail} kernels on a CUDA GPU", auto=True)
        # TRITON_INTERPRET=1 (executor.interpreting): the Triton kernels run on CPU tensors
        interpret = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
        if interpret and importlib.util.find_spec("torch") is not None:
            return Availability(True, f"{detail}; Triton's CPU interpreter (TRITON_INTERPRET=1)")
        return Availability(False, detail)

    def export_kernels(self, destination: Path) -> list[str]:
        """Write the kernels compiled on this GPU as the package ships them (`oidn-gpu
        prepare --export`): this user's kernel lists of the GPU's architecture and
        Triton version, and every entry of Triton's disk cache (prepare with an empty
        ``TRITON_CACHE_DIR`` so that it holds only these kernels)."""
        import torch

        from oidn_gpu.backends.cuda import shipped_kernels

        version = kernel_specs.triton_version()
        if version is None:
            raise MissingDependencyError(
                "exporting kernels needs Triton: pip install 'oidn-gpu[cuda]'"
            )
        major, minor = torch.cuda.get_device_capability()
        capability = major * 10 + minor
        return shipped_kernels.export(version, capability, Path(destination))

    def describe(self) -> tuple[str, ...]:
        try:
            # torch is this backend's optional dependency: imported only when asked for.
            import torch

            count = torch.cuda.device_count()
            return tuple(f"device cuda:{i} {torch.cuda.get_device_name(i)}" for i in range(count))
        except Exception as err:
            return (f"no CUDA device ({type(err).__name__}: {err})",)

    def create_executor(self, model: Any, options: CudaOptions) -> NetworkExecutor:
        # The engine imports torch (and Triton): only when asked for.
        from oidn_gpu.backends.cuda.executor import CudaExecutor
        from oidn_gpu.backends.cuda.torch_cache import ensure_torch_kernel_cache
        from oidn_gpu.backends.cuda.torch_ops import torch

        ensure_torch_kernel_cache()  # before PyTorch's first run-time compiled kernel
        # its buffers are written in place (see the runner)
        with timed_phase(_LOG, "build the network"), torch.inference_mode(False):
            return CudaExecutor(model, options=options)

    def create_runner(self, executor: NetworkExecutor) -> TileRunner:
        from oidn_gpu.backends.cuda.runner import CudaDenoiser
        from oidn_gpu.backends.cuda.torch_ops import torch

        with torch.inference_mode(False):
            return CudaTileRunner(CudaDenoiser(executor))  # type: ignore[arg-type]

    def place_on_gpu(self, options: CudaOptions, gpu_id: int) -> tuple[CudaOptions, str]:
        # CUDA numbers the GPUs that CUDA_VISIBLE_DEVICES lets this process see
        if options.device is not None:
            return options, ""
        device = cuda_device_for_gpu(gpu_id, os.environ)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
        where = f"{device}, CUDA_VISIBLE_DEVICES={visible}"
        return dataclasses.replace(options, device=device), where

    def temporal_passes(self, options: CudaOptions) -> Any:
        """The temporal mode's passes in torch on the options' device."""
        from oidn_gpu.backends.cuda.temporal import TorchTemporalPasses

        return TorchTemporalPasses(options.device)

    def temporal_session(self, frames: Any) -> Any:
        """The temporal mode with its history on the GPU of ``frames`` (a denoiser's
        `backends.temporal_seam.FrameSource`), its passes as Triton kernels
        (`temporal_session.CudaTemporalSession`); None where Triton does not import or no
        device runs its kernels (the `TemporalPasses` on host arrays then)."""
        from oidn_gpu.backends.cuda import temporal_kernels
        from oidn_gpu.backends.cuda.temporal import session_device
        from oidn_gpu.backends.cuda.temporal_session import CudaTemporalSession
        from oidn_gpu.backends.cuda.triton_loader import interpreting

        if temporal_kernels.UNAVAILABLE is not None:
            return None
        device = session_device(frames.backend_options.device, interpreting())
        return None if device is None else CudaTemporalSession(frames, device)


BACKEND = CudaBackend()
