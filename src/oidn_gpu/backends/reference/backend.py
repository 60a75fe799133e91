"""The reference backend's registry entry: NumPy fp32 on the CPU, always available."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from oidn_gpu.backends.base import (
    PRECISIONS as ALL_PRECISIONS,
)
from oidn_gpu.backends.base import (
    Availability,
    BackendOptions,
    NetworkExecutor,
    TileRunner,
)
from oidn_gpu.backends.host_runner import HostTileRunner
from oidn_gpu.backends.reference.executor import ReferenceExecutor
from oidn_gpu.errors import InvalidArgumentError

PRECISIONS = ("auto", "fp32")


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

    precision: str = "auto"
    threads: int | None = None

    option_help: ClassVar = MappingProxyType(
        {
            "precision": "reference: fp32 only",
            "threads": "reference: CPU threads (OIDN's numThreads; default the usable "
            "cores, 1 to 8; the image is the same for any count)",
        }
    )
    option_choices: ClassVar = MappingProxyType({"precision": PRECISIONS})
    option_metavars: ClassVar = MappingProxyType({"threads": "N"})

    def __post_init__(self) -> None:
        if not isinstance(self.precision, str) or self.precision not in ALL_PRECISIONS:
            raise InvalidArgumentError(
                f"unknown precision {self.precision!r}; expected "
                + ", ".join(f"'{p}'" for p in ALL_PRECISIONS[:-1])
                + f" or '{ALL_PRECISIONS[-1]}'"
            )
        if self.precision not in PRECISIONS:
            raise InvalidArgumentError(
                f"the reference backend computes in fp32 only; got precision '{self.precision}'"
            )
        threads = self.threads
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
        ):
            raise InvalidArgumentError(f"threads must be an int >= 1 or None, got {threads!r}")

    @classmethod
    def parse_cli_option(cls, name: str, text: str) -> Any:
        """The value of ``--NAME TEXT`` (``--threads`` takes a positive integer)."""
        if name != "threads":
            return text
        try:
            threads = int(text)
        except ValueError:
            threads = 0
        if threads < 1:
            raise InvalidArgumentError(f"--threads must be an integer >= 1, got {text!r}")
        return threads


class ReferenceBackend:
    """NumPy fp32 (im2col + BLAS) with the host tile runner."""

    name = "reference"
    priority = 0
    description = "NumPy fp32 on the CPU (the golden model)"
    Options = ReferenceOptions
    uses_gpu = False

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
