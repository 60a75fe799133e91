"""``oidn-gpu bench [--backend NAME] ...``: the named backend's benchmark.

Every backend with a benchmark declares it (`Backend.benchmark`, a
`backends.benchmark.Benchmark`): its flags and its run. This module picks the
backend (``--backend``; without it, the benchmark that says it is the default: the
wgpu backend's), makes the parser from the benchmark's flags and runs it with the
public API it lends (`BenchTools`: `Denoiser`, `bench_api.api_rows` and
`bench_cold.run_cold`, which the backend layer does not import). The benchmarks:
`backends.wgpu.backend.WgpuBenchmark` (GPU timestamps, per-layer times, end to end),
`backends.reference.bench` (NumPy on the CPU, beside Intel OIDN with ``--oidn``) and
`backends.cuda.backend.CudaBenchmark` (CUDA events, ``--cold``, ``--tune``).

``--json PATH`` writes the ``oidn-gpu.bench`` document (docs/json.md); ``--json -``
prints it on stdout alone (the tables then go to stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from oidn_gpu.backends.base import AUTO
from oidn_gpu.backends.benchmark import (
    BenchTools,
    benchmark_names,
    default_benchmark,
    load_benchmark,
)
from oidn_gpu.cli import bench_alpha, bench_api, bench_cold, bench_sequence, bench_temporal
from oidn_gpu.cli.json_output import STDOUT
from oidn_gpu.errors import InvalidArgumentError, OIDNGPUError
from oidn_gpu.filter import Denoiser

_LOG = logging.getLogger("oidn_gpu.cli")
EXIT_USAGE = 2
EXIT_FAILURE = 1


def tools() -> BenchTools:
    """What the command line lends every benchmark: the public API and its timings."""
    return BenchTools(
        denoiser=Denoiser,
        api_rows=bench_api.api_rows,
        api_row_names=bench_api.ROWS,
        run_cold=bench_cold.run_cold,
        run_cold_sequences=bench_sequence.run_cold_sequences,
    )


def _split_backend(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """``(the --backend value or None, the other arguments)``."""
    rest = list(argv)
    for index, arg in enumerate(rest):
        if arg == "--backend" and index + 1 < len(rest):
            return rest[index + 1], rest[:index] + rest[index + 2 :]
        if arg.startswith("--backend="):
            return arg.split("=", 1)[1], rest[:index] + rest[index + 1 :]
    return None, rest


def parser_for(name: str, benchmark: Any, *, named: bool = True) -> argparse.ArgumentParser:
    """The parser of backend ``name``'s benchmark (``named``: ``--backend`` was given)."""
    others = [f"'oidn-gpu bench --backend {n} --help'" for n in benchmark_names() if n != name]
    parser = argparse.ArgumentParser(
        prog=f"oidn-gpu bench --backend {name}" if named else f"oidn-gpu bench [--backend {name}]",
        description=benchmark.description,
        epilog=f"Other backends have their own flags: {', '.join(others)}." if others else None,
    )
    benchmark.add_arguments(parser)
    return parser


def _run_to_stdout(benchmark: Any, args: argparse.Namespace) -> int:
    """``--json -``: the JSON document alone on stdout, the tables on stderr."""
    with tempfile.TemporaryDirectory(prefix="oidn-gpu-bench-") as folder:
        args.json_path = str(Path(folder) / "bench.json")
        with contextlib.redirect_stdout(sys.stderr):
            code = int(benchmark.run(args, tools()) or 0)
        path = Path(args.json_path)
        if path.is_file():
            sys.stdout.write(path.read_text("utf-8"))
            sys.stdout.flush()
    return code


def main(argv: Sequence[str]) -> int:
    """``oidn-gpu bench [--backend NAME] ...``: the named backend's benchmark (default: the
    one `default_benchmark` names); with ``--temporal SEQUENCE ...`` temporal mode's
    quality report (`bench_temporal`); with ``--alpha denoise`` a frame with its alpha
    denoised against its RGB denoise (`bench_alpha`)."""
    if any(arg == "--temporal" or arg.startswith("--temporal=") for arg in argv):
        try:
            return bench_temporal.main(argv)
        except (OIDNGPUError, OSError) as err:  # bad sequences and options are usage errors
            _LOG.error("%s", err)
            return (
                EXIT_USAGE if isinstance(err, (InvalidArgumentError, OSError)) else (EXIT_FAILURE)
            )
    if any(arg == "--alpha" or arg.startswith("--alpha=") for arg in argv):
        try:
            return bench_alpha.main(argv)
        except OIDNGPUError as err:
            _LOG.error("%s", err)
            return EXIT_USAGE if isinstance(err, InvalidArgumentError) else EXIT_FAILURE
    name, rest = _split_backend(argv)
    named = name is not None and name != AUTO
    try:
        name = name if named else default_benchmark()
        benchmark = load_benchmark(name)
    except InvalidArgumentError as err:
        _LOG.error("%s", err)
        return EXIT_USAGE
    args = parser_for(name, benchmark, named=named).parse_args(rest)
    try:
        if getattr(args, "json_path", None) == STDOUT:
            return _run_to_stdout(benchmark, args)
        return int(benchmark.run(args, tools()) or 0)
    except OIDNGPUError as err:
        _LOG.error("%s", err)
        return EXIT_USAGE if isinstance(err, InvalidArgumentError) else EXIT_FAILURE
