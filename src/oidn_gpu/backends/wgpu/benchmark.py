"""The wgpu benchmark of ``oidn-gpu bench`` (its default): flags, run, and the public-path timing.

`WgpuBenchmark.run` runs `bench.run_bench` (GPU timestamps, per-layer times, end to end),
imported only then: this module needs no wgpu, so ``--help`` works without it.
`time_denoiser` times `Denoiser.denoise` (lent by the command line) for its ``facade_*``
numbers.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.backends.base import precision_choices
from oidn_gpu.backends.bench_result import parse_size
from oidn_gpu.backends.benchmark import BenchTools
from oidn_gpu.backends.wgpu.backend import KERNELS, WgpuBackend
from oidn_gpu.errors import InvalidArgumentError, MissingDependencyError, OIDNGPUError
from oidn_gpu.files import write_bytes_atomic
from oidn_gpu.model import weights as builtin


def time_denoiser(
    denoiser: Any, executor: Any, model: Any, weights: str | Path, arrays: list[np.ndarray],
    runs: int, warmup: int,
) -> dict[str, Any]:  # fmt: skip
    """Time ``denoiser`` (`oidn_gpu.Denoiser`) on host arrays on the wgpu executor's device
    (its compiled pipelines are reused): the ``facade_*`` timings of `bench.run_bench`."""
    path = Path(weights)
    if not (path.suffix == ".tza" or path.exists()):
        path = builtin.weights_path(str(weights))
    hdr = "ldr" not in str(getattr(model, "name", "") or "").lower()
    info = executor.info()
    facade = denoiser(
        hdr=hdr,
        weights=path,
        backend=WgpuBackend.name,
        precision=info.precision,
        device=executor.device.handle,
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


class WgpuBenchmark:
    """The `Benchmark` of the wgpu backend (what ``oidn-gpu bench`` runs by default)."""

    description = "Benchmark the wgpu executor (the default backend of bench)."
    default = True

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--size", default="1080p", help="720p, 1080p, 4k or WIDTHxHEIGHT")
        parser.add_argument(
            "--weights", default="rt_hdr_alb_nrm", help="a .tza path or built-in name"
        )
        parser.add_argument(
            "--precision", default="auto", choices=precision_choices(WgpuBackend.precisions)
        )
        parser.add_argument("--kernel", default="auto", help=", ".join(KERNELS))
        parser.add_argument(
            "--gemm", default=None, help="GEMM options as JSON, e.g. '{\"rows_per_thread\": 4}'"
        )
        parser.add_argument("--runs", type=int, default=20)
        parser.add_argument("--warmup", type=int, default=3)
        parser.add_argument("--top", type=int, default=8)
        parser.add_argument(
            "--json", dest="json_path", default=None, help="write the result as JSON"
        )
        parser.add_argument(
            "--no-end-to-end", dest="end_to_end", action="store_false",
            help="time the network only (skip the GpuDenoiser end-to-end runs)",
        )  # fmt: skip
        parser.add_argument(
            "--host-dtype", default="float32", choices=("float32", "float16"),
            help="dtype of the host images of the end-to-end runs",
        )  # fmt: skip
        parser.add_argument(
            "--no-denoiser", dest="facade", action="store_false",
            help="skip timing Denoiser.denoise on the host images",
        )  # fmt: skip

    def run(self, args: Any, tools: BenchTools) -> int:
        try:
            # The benchmark engine needs wgpu: imported only when asked for.
            from oidn_gpu.backends.wgpu import bench
        except ImportError as err:
            raise MissingDependencyError(
                "the wgpu benchmark needs the wgpu backend: pip install 'oidn-gpu[wgpu]' "
                f"({err})"
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
            facade=functools.partial(time_denoiser, tools.denoiser) if args.facade else None,
        )
        print(result.table())
        if args.json_path:
            write_bytes_atomic(args.json_path, (result.to_json() + "\n").encode("utf-8"))
        return 0


BENCHMARK = WgpuBenchmark()
