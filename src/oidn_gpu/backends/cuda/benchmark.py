"""The cuda benchmark of ``oidn-gpu bench --backend cuda``: flags, run, ``--cold`` and ``--tune``.

`CudaBenchmark.run` runs `bench.run_bench` (CUDA events, medians) with the public-API rows
the command line lends (`BenchTools.api_rows`), `BenchTools.run_cold` (``--cold``: fresh
processes) or `bench.tune_tiles` (``--tune``). `bench` needs torch and is imported only
when run: this module imports neither, so ``--help`` works without them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from typing import Any

from oidn_gpu.backends.base import precision_choices
from oidn_gpu.backends.bench_result import parse_size
from oidn_gpu.backends.benchmark import BenchTools
from oidn_gpu.backends.cuda.backend import ENGINES, PRECISIONS
from oidn_gpu.errors import MissingDependencyError, OIDNGPUError
from oidn_gpu.files import write_bytes_atomic

EXIT_FAILURE = 1


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
        add("--precision", default="fp16", choices=precision_choices(PRECISIONS)[1:])
        add("--engine", default="auto", choices=ENGINES)
        add("--runs", type=int, default=100)
        add("--warmup", type=int, default=10)
        add("--host-runs", type=int, default=20)
        add("--no-end-to-end", action="store_true")
        add("--baseline", action="store_true", help="also run the plain cuDNN port and print both")
        add("--peak-tflops", type=float, default=None, help="tensor-core peak")
        add("--cold", action="store_true",
            help="time fresh processes with empty caches instead: start to first image, import "
            "torch, first and second denoise, a second size (beside Intel OIDN's when installed)")
        add("--cold-runs", type=int, default=3, help="fresh processes for --cold")
        add("--tune", action="store_true",
            help="time the tile candidates of every layer at --size on this GPU and keep the "
            "fastest in the tuning cache (OIDN_GPU_CUDA_TUNING names it; default "
            "~/.cache/oidn-gpu/cuda-tuning.json), which later processes read")
        add("--second-size", default="1000x750", help="--cold: the second size")
        add("--json", dest="json_path", default=None, help="write the result as JSON")

    def run(self, args: Any, tools: BenchTools) -> int:
        if args.cold:
            return _cold(args, tools)
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
                print(f"api        {value:.3f} ms median wall: {tools.api_row_names[row]}",
                      flush=True)  # fmt: skip
        return 0


def _cold(args: Any, tools: BenchTools) -> int:
    """``--cold``: `BenchTools.run_cold`."""
    try:
        result = tools.run_cold(
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


def _tune(args: Any) -> int:
    """``--tune``: `bench.tune_tiles`."""
    bench = _engine("tuning")
    path, choices = bench.tune_tiles(parse_size(args.size), args.weights, args.precision)
    for key, config in sorted(choices.items()):
        print(f"{key:<24} {config.describe()}")
    print(f"tuning cache: {path if path is not None else 'not written (OIDN_GPU_CUDA_TUNING=off)'}")
    return 0


BENCHMARK = CudaBenchmark()
