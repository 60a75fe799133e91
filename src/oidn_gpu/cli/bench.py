"""``oidn-gpu bench``: the benchmarks' command line, and the reference benchmark.

``oidn-gpu bench [--backend wgpu]`` parses the flags of the wgpu benchmark and
runs `oidn_gpu.backends.wgpu.bench.run_bench` (GPU timestamps, per-layer times,
end to end); ``--backend reference`` runs `run_reference_bench` below.

The reference benchmark times the NumPy reference backend on the CPU. Two
numbers per size, each the median (and p95) of ``runs`` wall-clock runs after
``warmup`` runs: the network alone (`ReferenceExecutor.run` on the padded
network input, or on one tile's with ``--max-memory-mb``) and the whole denoise
(`Denoiser.denoise` on a random HDR color+albedo+normal image: autoexposure, input
processing, tiling, network, output processing; ``--max-memory-mb`` is OIDN's
``maxMemoryMB``). The process's peak RSS after the first denoise (before the
network alone runs) is reported too: the memory a denoise needs, images included. With ``--oidn``
Intel OIDN 2.5.1's CPU device (the ``pyoidn`` package, all cores) denoises the
same image with the same weights for comparison, each of its runs right after
one of the whole denoise's, so that both see the same load on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.backends.base import AUTO, backend_names
from oidn_gpu.backends.plan import DenoiseOptions, model_alignment, plan_tiles
from oidn_gpu.backends.reference import ReferenceExecutor
from oidn_gpu.cli import bench_api, bench_cold
from oidn_gpu.cli.sizes import parse_size
from oidn_gpu.errors import InvalidArgumentError, OIDNGPUError, require
from oidn_gpu.files import write_bytes_atomic
from oidn_gpu.filter import Denoiser
from oidn_gpu.model import weights as builtin

EXIT_USAGE = 2
EXIT_FAILURE = 1
# The backend `oidn-gpu bench` measures when none is named.
DEFAULT_BENCH_BACKEND = "wgpu"


@dataclass(frozen=True)
class ReferenceBench:
    """Measured wall-clock times (ms) of one size on the reference backend."""

    weights: str
    height: int
    width: int
    runs: int
    warmup: int
    network_ms: tuple[float, ...]
    denoise_ms: tuple[float, ...]
    network_median_ms: float
    network_p95_ms: float
    denoise_median_ms: float
    denoise_p95_ms: float
    peak_rss_mib: float
    oidn_median_ms: float | None = None
    oidn_ms: tuple[float, ...] = ()
    threads: int = 1
    max_memory_mb: int | None = None
    tiles: int = 1
    network_height: int = 0  # the network input timed alone (padded image, or one tile)
    network_width: int = 0

    def table(self) -> str:
        network = f"{self.network_width}x{self.network_height}"
        budget = "" if self.max_memory_mb is None else f", max_memory_mb {self.max_memory_mb}"
        lines = [
            f"backend    reference (NumPy fp32, {self.threads} threads), weights {self.weights}",
            f"size       {self.width}x{self.height}, {self.runs} runs after {self.warmup} warm-up",
            f"network    {self.network_median_ms:.0f} ms median, {self.network_p95_ms:.0f} ms p95"
            f" ({network})",
            f"denoise    {self.denoise_median_ms:.0f} ms median, {self.denoise_p95_ms:.0f} ms p95"
            f" ({self.tiles} tile{'s' * (self.tiles != 1)}{budget})",
            f"peak RSS   {self.peak_rss_mib:.0f} MiB (after the first denoise)",
        ]
        if self.oidn_median_ms is not None:
            ratio = self.denoise_median_ms / self.oidn_median_ms
            lines.append(
                f"Intel OIDN {self.oidn_median_ms:.0f} ms median (CPU device); "
                f"reference is {ratio:.1f}x"
            )
        return "\n".join(lines)


def _times(fn: Callable[[], object], runs: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _p95(values: Sequence[float]) -> float:
    return float(np.percentile(values, 95))


def run_reference_bench(
    *, size: str = "1080p", weights: str = "rt_hdr_alb_nrm", runs: int = 5, warmup: int = 1,
    oidn: bool = False, threads: int | None = None, max_memory_mb: int | None = None,
) -> ReferenceBench:
    """Benchmark the reference backend; see the module docstring."""
    if runs < 1 or warmup < 0:
        raise InvalidArgumentError(f"runs must be >= 1 and warmup >= 0, got {runs} and {warmup}")
    height, width = parse_size(size)
    model = builtin.load_builtin(weights)
    if model.input_channels != 9:
        raise InvalidArgumentError(
            f"the benchmark uses color+albedo+normal weights; '{weights}' takes "
            f"{model.input_channels} channels"
        )
    rng = np.random.default_rng(0)
    color = (rng.random((height, width, 3), np.float32) * 4).astype(np.float32)
    albedo = rng.random((height, width, 3), np.float32)
    normal = rng.random((height, width, 3), np.float32) * 2 - 1
    oidn_times: list[float] = []
    with Denoiser(
        hdr=True, weights=builtin.weights_path(weights), backend="reference", threads=threads,
        max_memory_mb=max_memory_mb,
    ) as den:
        first = _times(lambda: den.denoise(color, albedo, normal), 1, 0)
        # before Intel OIDN and the network alone allocate anything: the denoise's own peak
        peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        tiles = den.info().tiles
        _times(lambda: den.denoise(color, albedo, normal), 0, warmup - 1)
        denoise = first if warmup == 0 else []
        if not oidn:
            denoise += _times(lambda: den.denoise(color, albedo, normal), runs - len(denoise), 0)
        else:  # alternating runs: both see the same load on a shared machine
            with _oidn_filter(weights, color, albedo, normal) as execute:
                for run in range(runs):
                    if run or warmup:
                        denoise += _times(lambda: den.denoise(color, albedo, normal), 1, 0)
                    oidn_times += _times(execute, 1, warmup if run == 0 else 0)
    if max_memory_mb is None:  # the padded image, as OIDN runs an untiled image
        alignment = model_alignment(model)
        net_h, net_w = -(-height // alignment) * alignment, -(-width // alignment) * alignment
    else:  # one tile of the denoise's plan
        plan = plan_tiles(model, height, width, DenoiseOptions(max_memory_mb=max_memory_mb))
        net_h, net_w = plan.tile_h, plan.tile_w
    x = rng.random((9, net_h, net_w), np.float32)
    with ReferenceExecutor(model, threads=threads) as executor:
        network = _times(lambda: executor.run(x), runs, warmup)
        used_threads = executor.workers()
    oidn_ms = statistics.median(oidn_times) if oidn_times else None
    return ReferenceBench(
        weights=weights,
        height=height,
        width=width,
        runs=runs,
        warmup=warmup,
        network_ms=tuple(network),
        denoise_ms=tuple(denoise),
        network_median_ms=statistics.median(network),
        network_p95_ms=_p95(network),
        denoise_median_ms=statistics.median(denoise),
        denoise_p95_ms=_p95(denoise),
        peak_rss_mib=peak_rss,
        oidn_median_ms=oidn_ms,
        oidn_ms=tuple(oidn_times),
        threads=used_threads,
        max_memory_mb=max_memory_mb,
        tiles=tiles,
        network_height=net_h,
        network_width=net_w,
    )


@contextmanager
def _oidn_filter(
    weights: str, color: np.ndarray, albedo: np.ndarray, normal: np.ndarray
) -> Iterator[Callable[[], None]]:
    """Intel OIDN's CPU device on the same images, weights chosen by OIDN (same file):
    yields its ``execute``."""
    pyoidn = require("pyoidn", "dev")
    device = pyoidn.Device(pyoidn.OIDN_DEVICE_TYPE_CPU)
    device.commit()
    flt = pyoidn.Filter(device, pyoidn.OIDN_FILTER_TYPE_RT)
    output = np.empty_like(color)  # pyoidn keeps raw pointers: every array lives until here
    for name, image in (("color", color), ("albedo", albedo), ("normal", normal)):
        flt.set_image(getattr(pyoidn, f"OIDN_IMAGE_{name.upper()}"), image,
                      pyoidn.OIDN_FORMAT_FLOAT3)
    flt.set_image(pyoidn.OIDN_IMAGE_OUTPUT, output, pyoidn.OIDN_FORMAT_FLOAT3)
    flt.set_bool("hdr", True)
    flt.set_int("quality", 5 if weights == "rt_hdr_alb_nrm" else 4)  # balanced / fast
    flt.commit()
    try:
        yield flt.execute
    finally:
        flt.release()
        device.release()


def reference_main(argv: Sequence[str] | None = None) -> int:
    """``oidn-gpu bench --backend reference ...``."""
    parser = argparse.ArgumentParser(prog="oidn-gpu bench --backend reference",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1080p", help="720p, 1080p, 4k or WIDTHxHEIGHT")
    parser.add_argument("--weights", default="rt_hdr_alb_nrm",
                        help="built-in color+albedo+normal weights name")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--oidn", action="store_true", help="also time Intel OIDN (pyoidn)")
    parser.add_argument("--threads", type=int, default=None,
                        help="reference backend threads (default: the usable cores, 1 to 8)")
    parser.add_argument("--max-memory-mb", type=int, default=None, metavar="MB",
                        help="OIDN's maxMemoryMB for the denoise (the network alone then "
                        "runs on one tile)")
    parser.add_argument("--json", dest="json_path", default=None, help="write the result as JSON")
    args = parser.parse_args(argv)
    try:
        result = run_reference_bench(size=args.size, weights=args.weights, runs=args.runs,
                                     warmup=args.warmup, oidn=args.oidn, threads=args.threads,
                                     max_memory_mb=args.max_memory_mb)
    except OIDNGPUError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2 if isinstance(err, InvalidArgumentError) else 1
    print(result.table())
    if args.json_path:
        write_bytes_atomic(args.json_path, json.dumps(asdict(result), indent=2).encode("utf-8"))
    return 0


def time_denoiser(
    executor: Any, model: Any, weights: str | Path, arrays: list[np.ndarray], runs: int, warmup: int
) -> dict[str, Any]:
    """Time `Denoiser.denoise` on host arrays on the wgpu executor's device (its compiled
    pipelines are reused): the ``facade_*`` timings of `backends.wgpu.bench.run_bench`."""
    path = Path(weights)
    if not (path.suffix == ".tza" or path.exists()):
        path = builtin.weights_path(str(weights))
    hdr = "ldr" not in str(getattr(model, "name", "") or "").lower()
    info = executor.info()
    denoiser = Denoiser(
        hdr=hdr,
        weights=path,
        backend="wgpu",
        precision=info.precision,
        device=executor.device.handle,
    )
    walls: list[float] = []
    output_walls: list[float] = []
    parts: list[dict[str, float]] = []
    output = np.empty_like(arrays[0])
    with denoiser:
        for i in range(warmup + runs):
            start = time.perf_counter()
            result = denoiser.denoise(*arrays)
            elapsed = (time.perf_counter() - start) * 1e3
            if i >= warmup:
                walls.append(elapsed)
                runner = next(iter(denoiser._engines.values())).runner
                parts.append(dict(runner.last_host_ms))
        for i in range(warmup + runs):
            start = time.perf_counter()
            denoiser.denoise(*arrays, output=output)
            elapsed = (time.perf_counter() - start) * 1e3
            if i >= warmup:
                output_walls.append(elapsed)
        tiles = denoiser.info().tiles
    # (float16 results of untrained weights may overflow to Inf; NaN means a broken path)
    if result.dtype != arrays[0].dtype or np.isnan(result).any():
        raise OIDNGPUError("the benchmark's Denoiser.denoise gave a wrong dtype or NaN")
    return {
        "facade_wall": walls,
        "facade_output_wall": output_walls,
        "facade_parts": parts,
        "facade_tiles": tiles,
    }


def wgpu_main(argv: Sequence[str] | None = None) -> int:
    """``oidn-gpu bench [--backend wgpu] ...``: flags of `backends.wgpu.bench.run_bench`."""
    parser = argparse.ArgumentParser(
        prog="oidn-gpu bench [--backend wgpu]",
        description="Benchmark the wgpu executor (the default backend of bench).",
        epilog="Other backends have their own flags: 'oidn-gpu bench --backend reference "
        "--help', 'oidn-gpu bench --backend cuda --help'.",
    )
    parser.add_argument("--size", default="1080p", help="720p, 1080p, 4k or WIDTHxHEIGHT")
    parser.add_argument(
        "--weights", default="rt_hdr_alb_nrm", help="a .tza path or built-in name"
    )
    parser.add_argument("--precision", default="auto", choices=("auto", "fp16", "fp32"))
    parser.add_argument("--kernel", default="auto")
    parser.add_argument(
        "--gemm", default=None, help="GEMM options as JSON, e.g. '{\"rows_per_thread\": 4}'"
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--json", dest="json_path", default=None, help="write the result as JSON")
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
    args = parser.parse_args(argv)
    try:
        # The benchmark engine needs wgpu: imported only when asked for.
        from oidn_gpu.backends.wgpu import bench
    except ImportError as err:
        print(
            f"error: the wgpu benchmark needs the wgpu backend: pip install 'oidn-gpu[wgpu]' "
            f"({err})",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    try:
        gemm = json.loads(args.gemm) if args.gemm else None
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
            facade=time_denoiser if args.facade else None,
        )
    except (OIDNGPUError, json.JSONDecodeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE if isinstance(err, (InvalidArgumentError, json.JSONDecodeError)) else 1
    print(result.table())
    if args.json_path:
        write_bytes_atomic(args.json_path, (result.to_json() + "\n").encode("utf-8"))
    return 0


def cuda_main(argv: Sequence[str] | None = None) -> int:
    """``oidn-gpu bench --backend cuda ...``: flags of `backends.cuda.bench.run_bench`."""
    parser = argparse.ArgumentParser(
        prog="oidn-gpu bench --backend cuda",
        description="Benchmark the CUDA backend (CUDA events, medians).",
    )
    parser.add_argument("--size", default="1080p", help="720p, 1080p, 4k or WIDTHxHEIGHT")
    parser.add_argument("--weights", default="rt_hdr_alb_nrm", help="a .tza path or built-in name")
    parser.add_argument("--precision", default="fp16", choices=("fp16", "bf16"))
    parser.add_argument("--engine", default="auto", choices=("auto", "triton", "cudnn"))
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--host-runs", type=int, default=20)
    parser.add_argument("--no-end-to-end", action="store_true")
    parser.add_argument(
        "--baseline", action="store_true", help="also run the plain cuDNN port and print both"
    )
    parser.add_argument("--peak-tflops", type=float, default=None, help="tensor-core peak")
    parser.add_argument(
        "--cold", action="store_true",
        help="time fresh processes with empty caches instead: start to first image, import "
        "torch, first and second denoise, a second size (beside Intel OIDN's when installed)",
    )  # fmt: skip
    parser.add_argument("--cold-runs", type=int, default=3, help="fresh processes for --cold")
    parser.add_argument(
        "--tune", action="store_true",
        help="time the tile candidates of every layer at --size on this GPU and keep the "
        "fastest in the tuning cache (OIDN_GPU_CUDA_TUNING names it; default "
        "~/.cache/oidn-gpu/cuda-tuning.json), which later processes read",
    )  # fmt: skip
    parser.add_argument("--second-size", default="1000x750", help="--cold: the second size")
    parser.add_argument("--json", dest="json_path", default=None, help="write the result as JSON")
    args = parser.parse_args(argv)
    if args.cold:
        return _cuda_cold(args)
    if args.tune:
        return _cuda_tune(args)
    try:
        # The benchmark engine needs torch: imported only when asked for.
        from oidn_gpu.backends.cuda import bench
    except ImportError as err:
        print(
            f"error: the CUDA benchmark needs the cuda backend: pip install 'oidn-gpu[cuda]' "
            f"({err})",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    try:
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
                rows = bench_api.api_rows(
                    size=kwargs["size"], weights=args.weights, precision=args.precision,
                    engine=engine, runs=args.runs, host_runs=args.host_runs, warmup=args.warmup,
                )  # fmt: skip
                results[name] = replace(results[name], api_ms=rows)
            if args.json_path:
                data = {key: r.to_dict() for key, r in results.items()}
                write_bytes_atomic(args.json_path, json.dumps(data).encode("utf-8"))
            print(f"== {name} ({args.size}, {args.weights})")
            print(results[name].table(), flush=True)
            for row, value in results[name].api_ms.items():
                print(f"api        {value:.3f} ms median wall: {bench_api.ROWS[row]}", flush=True)
    except OIDNGPUError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE if isinstance(err, InvalidArgumentError) else EXIT_FAILURE
    return 0


def _cuda_cold(args: argparse.Namespace) -> int:
    """``oidn-gpu bench --backend cuda --cold``: `cli.bench_cold.run_cold`."""
    try:
        result = bench_cold.run_cold(
            parse_size(args.size), parse_size(args.second_size), runs=args.cold_runs,
            progress=lambda text: print(text, file=sys.stderr, flush=True),
        )  # fmt: skip
    except (OIDNGPUError, RuntimeError, subprocess.TimeoutExpired) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json_path:
        write_bytes_atomic(args.json_path, json.dumps(result.to_dict()).encode("utf-8"))
    print(result.table(), flush=True)
    return 0


def _cuda_tune(args: argparse.Namespace) -> int:
    """``oidn-gpu bench --backend cuda --tune``: `backends.cuda.bench.tune_tiles`."""
    try:
        from oidn_gpu.backends.cuda import bench
    except ImportError as err:
        print(f"error: tuning needs the cuda backend: pip install 'oidn-gpu[cuda]' ({err})",
              file=sys.stderr)  # fmt: skip
        return EXIT_FAILURE
    try:
        path, choices = bench.tune_tiles(parse_size(args.size), args.weights, args.precision)
    except OIDNGPUError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE if isinstance(err, InvalidArgumentError) else EXIT_FAILURE
    for key, config in sorted(choices.items()):
        print(f"{key:<24} {config.describe()}")
    print(f"tuning cache: {path if path is not None else 'not written (OIDN_GPU_CUDA_TUNING=off)'}")
    return 0


# Backend name -> its benchmark's command line; a backend without one is reported as such.
BENCHMARKS: dict[str, Callable[[Sequence[str]], int]] = {
    "reference": reference_main,
    "wgpu": wgpu_main,
    "cuda": cuda_main,
}


def main(argv: Sequence[str]) -> int:
    """``oidn-gpu bench [--backend NAME] ...``: the named backend's benchmark (default wgpu)."""
    rest = list(argv)
    backend = DEFAULT_BENCH_BACKEND
    for index, arg in enumerate(rest):
        if arg == "--backend" and index + 1 < len(rest):
            backend = rest[index + 1]
            del rest[index : index + 2]
            break
        if arg.startswith("--backend="):
            backend = arg.split("=", 1)[1]
            del rest[index]
            break
    if backend == AUTO:
        backend = DEFAULT_BENCH_BACKEND
    run = BENCHMARKS.get(backend)
    if run is None:
        known = [n for n in backend_names() if n in BENCHMARKS]
        reason = "it has no benchmark" if backend in backend_names() else "not a backend"
        print(
            f"error: unknown bench backend '{backend}' ({reason}); expected "
            + " or ".join(f"'{n}'" for n in known),
            file=sys.stderr,
        )
        return EXIT_USAGE
    return int(run(rest) or 0)
