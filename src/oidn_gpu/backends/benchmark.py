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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from oidn_gpu.backends.base import REGISTRY, get_backend
from oidn_gpu.errors import InvalidArgumentError, one_of


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
