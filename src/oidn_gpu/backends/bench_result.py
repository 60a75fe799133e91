"""Benchmark results shared by the wgpu and CUDA benches: fields, JSON, median and p95.

`BenchResult` holds the fields both benches report (names as in their JSON
output); each backend's bench extends it with its own fields and its ``table()``.
`parse_size` reads the image size every benchmark takes. Neither wgpu nor torch is
imported here.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.files import write_bytes_atomic

# (height, width) of the named sizes the benchmarks take.
SIZES = {"720p": (720, 1280), "1080p": (1080, 1920), "4k": (2160, 3840)}


def parse_size(size: str | tuple[int, int]) -> tuple[int, int]:
    """``"720p"``, ``"1080p"``, ``"4k"``, ``"WxH"`` or ``(height, width)`` -> ``(height, width)``.

    Raises:
        InvalidArgumentError: an unknown name, a malformed or non-positive size.
    """
    if isinstance(size, tuple):
        height, width = size
    else:
        text = str(size).strip().lower()
        if text in SIZES:
            return SIZES[text]
        parts = text.split("x")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise InvalidArgumentError(
                f"unknown size {size!r}; expected '720p', '1080p', '4k' or WIDTHxHEIGHT"
            )
        width, height = int(parts[0]), int(parts[1])
    if height < 1 or width < 1:
        raise InvalidArgumentError(f"size {width}x{height} must be positive")
    return int(height), int(width)


def check_size(size: tuple[int, int]) -> tuple[int, int]:
    """``size`` as given: ``(height, width)``, two positive ints.

    Raises:
        InvalidArgumentError: anything else.
    """
    if (
        not isinstance(size, tuple)
        or len(size) != 2
        or not all(isinstance(v, int) and v >= 1 for v in size)
    ):
        raise InvalidArgumentError(f"size {size!r} must be (height, width), two positive ints")
    return size


@dataclass(frozen=True)
class LayerStat:
    name: str
    kernel: str
    median_ms: float
    share: float  # fraction of the GPU total (the summed layer medians)
    gflops_per_s: float


@dataclass(frozen=True)
class BenchResult:
    """Benchmark numbers of one configuration."""

    device: str
    backend_type: str
    weights: str
    precision: str
    kernel: str
    height: int
    width: int
    network_height: int
    network_width: int
    runs: int
    warmup: int
    wall_ms: tuple[float, ...]
    gpu_ms: tuple[float, ...]
    wall_median_ms: float
    wall_p95_ms: float
    gpu_median_ms: float | None
    gpu_p95_ms: float | None
    gflop: float
    gflops_per_s: float
    top_layers: tuple[LayerStat, ...] = field(default=())
    compile_s: float = 0.0
    # GPU time of the whole network (one submission or one CUDA graph), per timed run
    network_gpu_ms: tuple[float, ...] = field(default=())
    network_gpu_median_ms: float | None = None
    network_gpu_p95_ms: float | None = None
    # end to end (the backend's denoiser); empty / None when not measured
    end_to_end: bool = False
    e2e_tiles: int = 0
    e2e_gpu_ms: tuple[float, ...] = field(default=())
    e2e_gpu_median_ms: float | None = None
    e2e_gpu_p95_ms: float | None = None
    e2e_wall_ms: tuple[float, ...] = field(default=())
    e2e_wall_median_ms: float | None = None
    e2e_wall_p95_ms: float | None = None
    host_wall_ms: tuple[float, ...] = field(default=())
    host_wall_median_ms: float | None = None
    host_wall_p95_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` (NumPy's linear interpolation)."""
    return float(np.percentile(np.asarray(values, np.float64), q))


def e2e_summaries(e2e: dict[str, Any]) -> dict[str, Any]:
    """The end-to-end fields of `BenchResult` from the timed runs in ``e2e``.

    ``e2e`` holds ``tiles`` and the lists ``e2e_gpu``, ``e2e_wall`` and
    ``host_wall`` (ms per run); empty when the end to end was not measured.
    """
    if not e2e:
        return {}
    out: dict[str, Any] = {"end_to_end": True, "e2e_tiles": e2e["tiles"]}
    for key in ("e2e_gpu", "e2e_wall", "host_wall"):
        values = e2e[key]
        out[f"{key}_ms"] = tuple(values)
        out[f"{key}_median_ms"] = statistics.median(values) if values else None
        out[f"{key}_p95_ms"] = percentile(values, 95) if values else None
    return out


# The JSON document every ``oidn-gpu bench ... --json PATH`` writes (docs/json.md): the
# result's fields at the top level beside the schema, its version and the backend; a list
# of rows (one per size) under ``rows``.
BENCH_SCHEMA = "oidn-gpu.bench"
BENCH_SCHEMA_VERSION = 1
JSON_HELP = "write the result as JSON to PATH (docs/json.md); - prints it on stdout"


def bench_document(backend: str, kind: str, result: dict[str, Any] | list[Any]) -> dict[str, Any]:
    """A benchmark's result as the ``oidn-gpu.bench`` JSON document.

    Args:
        backend: the benchmarked backend's name.
        kind: what was timed: ``"denoise"`` (a network and end-to-end run), ``"sizes"``
            (rows per size), ``"cold"`` (fresh processes), ``"configurations"`` (one
            result per configuration name).
        result: the result's fields, or its rows.
    """
    head = {"schema": BENCH_SCHEMA, "schema_version": BENCH_SCHEMA_VERSION}
    head.update(backend=backend, kind=kind)
    return {**head, "rows": result} if isinstance(result, list) else {**head, **result}


def write_bench_json(
    path: str, backend: str, kind: str, result: dict[str, Any] | list[Any]
) -> None:
    """Write `bench_document` to ``path`` atomically."""

    text = json.dumps(bench_document(backend, kind, result), indent=2) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))
