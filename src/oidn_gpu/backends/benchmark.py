"""A backend's benchmark: what ``oidn-gpu bench --backend NAME`` runs.

A backend with a benchmark names it in `Backend.benchmark` (``"module:attribute"`` of a
`Benchmark`, imported only when asked for, from a module that imports without wgpu or
torch: the benchmark imports its engine when it runs, so ``--help`` needs neither). The
command line (`oidn_gpu.cli.bench`) makes the parser, lets the benchmark add its flags
(`Benchmark.add_arguments`) and runs it with the `BenchTools` it lends: the public API
(`oidn_gpu.Denoiser`) and front-end timings, which this layer does not import.
"""

from __future__ import annotations

import importlib
import logging
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from oidn_gpu.backends.base import REGISTRY, get_backend
from oidn_gpu.backends.bench_result import parse_size, write_bench_json
from oidn_gpu.errors import InvalidArgumentError, OIDNGPUError, one_of

_LOG = logging.getLogger("oidn_gpu.bench")

EXIT_FAILURE = 1  # what ``--cold`` returns when a fresh process fails


@dataclass(frozen=True)
class BenchTools:
    """What the front end lends a benchmark (the backend layer cannot import it).

    Attributes:
        denoiser: `oidn_gpu.Denoiser`, to time the public path.
        api_rows: `oidn_gpu.cli.bench_api.api_rows`: `Denoiser.denoise` on a device's
            tensors and NumPy arrays, medians per row; ``api_row_names`` says what each
            row measures.
        run_cold: `oidn_gpu.cli.bench_cold.run_cold`: fresh processes with empty caches.
        run_cold_sequences: `oidn_gpu.cli.bench_sequence.run_cold_sequences`: fresh
            processes that denoise N frames one after another.
    """

    denoiser: Callable[..., Any]
    api_rows: Callable[..., dict[str, float]]
    api_row_names: Mapping[str, str]
    run_cold: Callable[..., Any]
    run_cold_sequences: Callable[..., Any] | None = None


class Benchmark(Protocol):
    """A backend's benchmark (see the module docstring).

    Attributes:
        description: one line for ``--help``.
        default: ``oidn-gpu bench`` without ``--backend`` runs it (one backend says so).
    """

    description: str
    default: bool

    def add_arguments(self, parser: Any) -> None:
        """Declare its flags on ``parser`` (an ``argparse.ArgumentParser``)."""
        ...

    def run(self, args: Any, tools: BenchTools) -> int:
        """Run with the parsed flags, print the result, return the exit code.

        Raises:
            OIDNGPUError: bad flags (`InvalidArgumentError`), a missing dependency, a failure.
        """
        ...


def benchmark_names() -> tuple[str, ...]:
    """The registered backends that have a benchmark, in registry order."""
    return tuple(name for name in REGISTRY if getattr(get_backend(name), "benchmark", None))


def load_benchmark(name: str) -> Benchmark:
    """The `Benchmark` of backend ``name``.

    Raises:
        InvalidArgumentError: ``name`` is not a backend, or one without a benchmark.
    """
    names = benchmark_names()
    if name not in names:
        reason = "it has no benchmark" if name in REGISTRY else "not a backend"
        raise InvalidArgumentError(
            f"unknown bench backend '{name}' ({reason}); expected {one_of(names)}"
        )
    module, _, attribute = get_backend(name).benchmark.partition(":")
    return getattr(importlib.import_module(module), attribute)


def default_benchmark() -> str:
    """The backend ``oidn-gpu bench`` measures when none is named: the one whose benchmark
    says `Benchmark.default`, else the first with a benchmark."""
    names = benchmark_names()
    for name in names:
        if load_benchmark(name).default:
            return name
    return names[0]


def add_cold_arguments(parser: Any, frames: str = "0") -> None:
    """The flags of ``--cold`` (`run_cold_start`), for a benchmark that offers it;
    ``frames``: the default of ``--cold-frames``."""
    add = parser.add_argument
    add(
        "--cold",
        action="store_true",
        help="time fresh processes with empty caches instead: start to first image, first "
        "and second denoise, a second size (beside Intel OIDN's when installed)",
    )
    add("--cold-runs", type=int, default=3, help="fresh processes for --cold")
    add("--second-size", default="1000x750", help="--cold: the second size")
    add(
        "--cold-frames",
        default=frames,
        metavar="N,N",
        help="--cold: also denoise this many frames in a row in fresh processes (each "
        f"frame's time and engine), beside Intel OIDN's; 0: none (default {frames})",
    )


def run_cold_start(backend: str, args: Any, tools: BenchTools, **script: Any) -> int:
    """``--cold``: `BenchTools.run_cold` of ``backend`` at ``--size`` then ``--second-size``
    (``--cold-runs`` fresh processes), then `BenchTools.run_cold_sequences` of
    ``--cold-frames``; their tables printed (and ``--json`` written:
    ``{"cold": ..., "sequences": ...}``);
    ``script``: how the fresh processes start (``import_torch``, ``oidn_device``)."""
    try:
        result = tools.run_cold(
            backend,
            parse_size(args.size),
            parse_size(args.second_size),
            runs=args.cold_runs,
            **script,
            progress=lambda text: _LOG.info("%s", text),
        )
    except (OIDNGPUError, RuntimeError, subprocess.TimeoutExpired) as err:
        _LOG.error("%s", err)
        return EXIT_FAILURE
    document = {"cold": result.to_dict()}
    print(result.table(), flush=True)
    counts = frame_counts(args.cold_frames)
    if counts and tools.run_cold_sequences is not None:
        try:
            sequences = tools.run_cold_sequences(
                backend,
                parse_size(args.size),
                counts,
                runs=max(1, args.cold_runs // 3),
                progress=lambda text: _LOG.info("%s", text),
            )
        except (OIDNGPUError, RuntimeError, subprocess.TimeoutExpired) as err:
            _LOG.error("%s", err)
            return EXIT_FAILURE
        document["sequences"] = sequences.to_dict()
        print(sequences.table(), flush=True)
    if getattr(args, "json_path", None):
        write_bench_json(args.json_path, backend, "cold", document)
    return 0


def frame_counts(text: str) -> tuple[int, ...]:
    """``--cold-frames``: ``"100,400"`` -> (100, 400); ``"0"`` -> ()."""
    try:
        counts = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        counts = (-1,)
    if any(c < 0 for c in counts):
        raise InvalidArgumentError(f"--cold-frames must be counts like 100,400, got {text!r}")
    return tuple(c for c in counts if c > 0)
