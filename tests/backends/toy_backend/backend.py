"""The toy backend: the reference executor on transposed images (see the package)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType, SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from oidn_gpu.backends.base import (
    Availability,
    BackendOptions,
    ExecutorBase,
    ExecutorInfo,
    ExecutorResources,
    NetworkExecutor,
    Precision,
    TileRunner,
    check_network_input,
    check_precision,
    precision_choices,
)
from oidn_gpu.backends.bench_result import parse_size
from oidn_gpu.backends.benchmark import BenchTools
from oidn_gpu.backends.host_runner import HostTileRunner
from oidn_gpu.backends.reference import ReferenceExecutor
from oidn_gpu.files import write_bytes_atomic
from oidn_gpu.model import weights as builtin

NAME = "toy"
PRECISIONS = (Precision.FP32,)
# How tests/backends/test_contract.py holds it (fields of its `Entry`): BLAS sums the
# transposed bands in another order, so tiles agree with the whole image within rounding.
CONTRACT_ENTRY = {"tiled_exact": False}


@dataclass(frozen=True)
class ToyOptions(BackendOptions):
    """Options of the toy backend.

    Attributes:
        precision: ``"auto"`` or ``"fp32"``.
    """

    precision: Precision = Precision.AUTO

    option_help: ClassVar = MappingProxyType({"precision": "toy: fp32 only"})
    option_choices: ClassVar = MappingProxyType({"precision": precision_choices(PRECISIONS)})

    def __post_init__(self) -> None:
        object.__setattr__(self, "precision", check_precision(self.precision, NAME, PRECISIONS))


def _transposed(model: Any) -> Any:
    """``model`` with every 3x3 kernel transposed (the same graph)."""
    convs = {
        name: SimpleNamespace(
            weight=np.ascontiguousarray(c.weight.transpose(0, 1, 3, 2)), bias=c.bias
        )
        for name, c in model.convs.items()
    }
    return SimpleNamespace(graph=model.graph, convs=convs)


class TransposedExecutor(ExecutorBase):
    """A `NetworkExecutor`: the reference executor on ``x`` transposed, transposed back."""

    def __init__(self, model: Any) -> None:
        self._inner = ReferenceExecutor(_transposed(model), threads=1)
        self._channels = int(model.graph.input_channels)

    def run(self, x: np.ndarray) -> np.ndarray:
        x = check_network_input(x, self._channels, 16)
        out = self._inner.run(np.ascontiguousarray(x.transpose(0, 2, 1)))
        return np.ascontiguousarray(out.transpose(0, 2, 1))

    def prewarm(self, shapes: Iterable[tuple[int, int]]) -> None:
        self._inner.prewarm([(w, h) for h, w in shapes])

    def info(self) -> ExecutorInfo:
        return dataclasses.replace(self._inner.info(), backend=NAME)

    def resources(self) -> ExecutorResources:
        held = self._inner.resources()
        return dataclasses.replace(held, shapes=tuple((w, h) for h, w in held.shapes))

    def close(self) -> None:
        self._inner.close()


class ToyBackend:
    """The toy backend's `Backend`: never picked by ``backend="auto"``."""

    name = NAME
    priority = -100
    description = "the reference executor on transposed images (tests only)"
    Options = ToyOptions
    precisions = PRECISIONS
    benchmark = "tests.backends.toy_backend.backend:BENCHMARK"
    uses_gpu = False

    def probe(self) -> Availability:
        return Availability(True, "NumPy on transposed images; backend='toy' picks it")

    def describe(self) -> tuple[str, ...]:
        return ("transposes every image",)

    def create_executor(self, model: Any, options: ToyOptions) -> NetworkExecutor:
        return TransposedExecutor(model)

    def create_runner(self, executor: NetworkExecutor) -> TileRunner:
        return HostTileRunner(executor)

    def place_on_gpu(self, options: ToyOptions, gpu_id: int) -> tuple[ToyOptions, str]:
        return options, ""  # it computes on the CPU


class ToyBenchmark:
    """Its `Benchmark`: wall-clock time of the network at one size."""

    description = "Time the toy backend's network."
    default = False

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--size", default="32x16", help="WIDTHxHEIGHT")
        parser.add_argument("--runs", type=int, default=1)
        parser.add_argument("--json", dest="json_path", default=None)

    def run(self, args: Any, tools: BenchTools) -> int:
        height, width = parse_size(args.size)
        model = builtin.load_builtin("rt_hdr_small")
        x = np.zeros(
            (model.input_channels, -(-height // 16) * 16, -(-width // 16) * 16), np.float32
        )
        times = []
        with TransposedExecutor(model) as executor:
            for _ in range(args.runs):
                start = time.perf_counter()
                executor.run(x)
                times.append((time.perf_counter() - start) * 1e3)
        print(f"toy network {width}x{height}: {min(times):.1f} ms best of {args.runs}")
        if args.json_path:
            write_bytes_atomic(args.json_path, json.dumps({"network_ms": times}).encode())
        return 0


BACKEND = ToyBackend()
BENCHMARK = ToyBenchmark()
