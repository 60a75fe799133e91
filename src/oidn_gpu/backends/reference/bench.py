"""The reference benchmark (``oidn-gpu bench --backend reference``): NumPy on the CPU.

It times the NumPy reference backend on the CPU. Two numbers per size, each the
median (and p95) of ``runs`` wall-clock runs after ``warmup`` runs: the network alone
(`ReferenceExecutor.run` on the padded network input, or on one tile's with
``--max-memory-mb``) and the whole denoise (`Denoiser.denoise`, lent by the command
line, on a random HDR color+albedo+normal image: autoexposure, input processing,
tiling, network, output processing; ``--max-memory-mb`` is OIDN's ``maxMemoryMB``).
The process's peak RSS after the first denoise (before the network alone runs) is
reported too: the memory a denoise needs, images included. With ``--oidn`` Intel OIDN
2.5.1's CPU device (the ``pyoidn`` package, all cores) denoises the same image with
the same weights for comparison, each of its runs right after one of the whole
denoise's, so that both see the same load on a shared machine.
"""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from oidn_gpu.backends.bench_result import JSON_HELP, parse_size, write_bench_json
from oidn_gpu.backends.benchmark import BenchTools
from oidn_gpu.backends.plan import DenoiseOptions, model_alignment, plan_tiles
from oidn_gpu.backends.reference.executor import ReferenceExecutor
from oidn_gpu.errors import InvalidArgumentError, require
from oidn_gpu.model import weights as builtin

BACKEND = "reference"


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
    *,
    denoiser: Callable[..., Any],
    size: str = "1080p",
    weights: str = "rt_hdr_alb_nrm",
    runs: int = 5,
    warmup: int = 1,
    oidn: bool = False,
    threads: int | None = None,
    max_memory_mb: int | None = None,
) -> ReferenceBench:
    """Benchmark the reference backend; see the module docstring. ``denoiser``:
    `oidn_gpu.Denoiser` (lent by the command line: this layer does not import it)."""
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
    with denoiser(
        hdr=True,
        weights=builtin.weights_path(weights),
        backend=BACKEND,
        threads=threads,
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
        flt.set_image(
            getattr(pyoidn, f"OIDN_IMAGE_{name.upper()}"), image, pyoidn.OIDN_FORMAT_FLOAT3
        )
    flt.set_image(pyoidn.OIDN_IMAGE_OUTPUT, output, pyoidn.OIDN_FORMAT_FLOAT3)
    flt.set_bool("hdr", True)
    flt.set_int("quality", 5 if weights == "rt_hdr_alb_nrm" else 4)  # balanced / fast
    flt.commit()
    try:
        yield flt.execute
    finally:
        flt.release()
        device.release()


class ReferenceBenchmark:
    """The `Benchmark` of the reference backend: `run_reference_bench` and its table."""

    description = "Benchmark the NumPy reference backend on the CPU (wall clock, peak RSS)."
    default = False

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--size", default="1080p", help="720p, 1080p, 4k or WIDTHxHEIGHT")
        parser.add_argument(
            "--weights", default="rt_hdr_alb_nrm", help="built-in color+albedo+normal weights name"
        )
        parser.add_argument("--runs", type=int, default=5)
        parser.add_argument("--warmup", type=int, default=1)
        parser.add_argument("--oidn", action="store_true", help="also time Intel OIDN (pyoidn)")
        parser.add_argument(
            "--threads",
            type=int,
            default=None,
            help="reference backend threads (default: the usable cores, 1 to 8)",
        )
        parser.add_argument(
            "--max-memory-mb",
            type=int,
            default=None,
            metavar="MB",
            help="OIDN's maxMemoryMB for the denoise (the network alone then runs on one tile)",
        )
        parser.add_argument("--json", dest="json_path", default=None, help=JSON_HELP)

    def run(self, args: Any, tools: BenchTools) -> int:
        result = run_reference_bench(
            denoiser=tools.denoiser,
            size=args.size,
            weights=args.weights,
            runs=args.runs,
            warmup=args.warmup,
            oidn=args.oidn,
            threads=args.threads,
            max_memory_mb=args.max_memory_mb,
        )
        print(result.table())
        if args.json_path:
            write_bench_json(args.json_path, "reference", "denoise", asdict(result))
        return 0


BENCHMARK = ReferenceBenchmark()
