"""The reference backend's registry entry: NumPy fp32 on the CPU, always available."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from oidn_gpu.backends.base import (
    Availability,
    BackendOptions,
    NetworkExecutor,
    Precision,
    TileRunner,
    check_precision,
    parse_threads_option,
    precision_choices,
)
from oidn_gpu.backends.host_runner import HostTileRunner
from oidn_gpu.backends.reference.executor import ReferenceExecutor, check_threads

# What it computes in (``precision="auto"`` is fp32 too).
PRECISIONS = (Precision.FP32,)


@dataclass(frozen=True)
class ReferenceOptions(BackendOptions):
    """Options of the reference backend.

    Attributes:
        precision: ``"auto"`` or ``"fp32"`` (it computes in fp32 only).
        threads: CPU threads that run the network's bands, like OIDN's CPU device option
            ``numThreads``; None: the usable cores, 1 to 8 (`default_threads`), capped
            by ``OPENBLAS_NUM_THREADS`` or an enclosing ``threadpoolctl`` limit. The
            denoised image is the same for every thread count.
    """

    precision: Precision = Precision.AUTO
    threads: int | None = None

    option_help: ClassVar = MappingProxyType(
        {
            "precision": "reference: fp32 only",
            "threads": "reference: CPU threads (OIDN's numThreads; default the usable "
            "cores, 1 to 8; the image is the same for any count)",
        }
    )
    option_choices: ClassVar = MappingProxyType({"precision": precision_choices(PRECISIONS)})
    option_metavars: ClassVar = MappingProxyType({"threads": "N"})

    def __post_init__(self) -> None:
        precision = check_precision(self.precision, "reference", PRECISIONS)
        object.__setattr__(self, "precision", precision)
        check_threads(self.threads)

    @classmethod
    def parse_cli_option(cls, name: str, text: str) -> Any:
        """The value of ``--NAME TEXT`` (``--threads`` takes a positive integer)."""
        return parse_threads_option(name, text)


class ReferenceBackend:
    """NumPy fp32 (im2col + BLAS) with the host tile runner."""

    name = "reference"
    priority = 0
    description = "NumPy fp32 on the CPU (the golden model)"
    Options = ReferenceOptions
    uses_gpu = False
    precisions = PRECISIONS
    benchmark = "oidn_gpu.backends.reference.bench:BENCHMARK"

    def probe(self) -> Availability:
        return Availability(True, f"NumPy {np.__version__}, always available", auto=True)

    def describe(self) -> tuple[str, ...]:
        return (f"CPU: {platform.processor() or platform.machine()}",)

    def create_executor(self, model: Any, options: ReferenceOptions) -> NetworkExecutor:
        return ReferenceExecutor(model, threads=options.threads)

    def create_runner(self, executor: NetworkExecutor) -> TileRunner:
        return HostTileRunner(executor)

    def place_on_gpu(self, options: ReferenceOptions, gpu_id: int) -> tuple[ReferenceOptions, str]:
        return options, ""  # it computes on the CPU


BACKEND = ReferenceBackend()
