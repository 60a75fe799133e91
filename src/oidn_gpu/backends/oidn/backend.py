"""The oidn backend's registry entry: Intel OIDN 2.5.1's own devices through ``pyoidn``.

Importing this module needs no pyoidn: its options validate without it, and its probe
reports a missing pyoidn as the reason the backend is unavailable. Where ``auto`` ranks it
depends on the device OIDN finds (`RANKS`, measured; docs/benchmarks.md): above the
wgpu backend on a GPU of OIDN's (below the cuda backend, which is faster on NVIDIA),
above the reference backend on a machine where OIDN sees only the CPU.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from oidn_gpu.backends.base import (
    Availability,
    BackendOptions,
    NetworkExecutor,
    TileRunner,
    parse_threads_option,
)
from oidn_gpu.backends.oidn import capi, devices
from oidn_gpu.backends.oidn.executor import OidnExecutor
from oidn_gpu.backends.oidn.runner import OidnRunner, OidnTensorRunner
from oidn_gpu.errors import InvalidArgumentError, OIDNGPUError

# Where backend="auto" ranks it (`Availability.rank`; the cuda backend has 200, wgpu 100,
# the reference 0), by the device OIDN would open, with the evidence.
GPU_RANK = 150
CPU_RANK = 50
RANKS = {
    "cuda": "Intel OIDN's CUDA device: 3.4x faster than the wgpu backend on an H200 and 2x "
    "slower than the cuda backend there (docs/benchmarks.md), so it ranks between them",
    "hip": "Intel OIDN's HIP device: not measured; ranked above the wgpu backend as OIDN's "
    "CUDA device is on NVIDIA (3.4x faster there, docs/benchmarks.md)",
    "sycl": "Intel OIDN's SYCL device: not measured; ranked above the wgpu backend as OIDN's "
    "CUDA device is on NVIDIA (3.4x faster there, docs/benchmarks.md)",
    "metal": "Intel OIDN's Metal device: not measured; ranked above the wgpu backend as "
    "OIDN's CUDA device is on NVIDIA (3.4x faster there, docs/benchmarks.md)",
    "cpu": "Intel OIDN's CPU device: 2.6x faster than the reference backend at "
    "512x512 on a 2-core CPU (docs/benchmarks.md); below wgpu, which runs only on a real GPU",
}
# The environment variable that lists the GPUs Ray gave a worker, per GPU API.
VISIBLE_DEVICES = {"cuda": "CUDA_VISIBLE_DEVICES", "hip": "HIP_VISIBLE_DEVICES"}


def _check_threads(threads: Any) -> None:
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise InvalidArgumentError(
            f"threads must be a positive integer (OIDN's numThreads), got {threads!r}"
        )


@dataclass(frozen=True)
class OidnOptions(BackendOptions):
    """Options of the oidn backend.

    Attributes:
        device: which of Intel OIDN's devices: None or ``"auto"`` (OIDN's default, a GPU
            it supports before the CPU), ``"cpu"``, ``"cuda"``, ``"hip"``, ``"sycl"``,
            ``"cuda:N"``, ``"hip:N"``, or a torch CUDA device (`devices.parse_device`).
        threads: the CPU device's ``numThreads`` (None: OIDN's default, every core).
    """

    device: Any = None
    threads: int | None = None

    option_help: ClassVar = MappingProxyType(
        {
            "device": "oidn: Intel OIDN's device: auto, cpu, cuda, hip, sycl, cuda:N or hip:N",
            "threads": "oidn: threads of Intel OIDN's CPU device (its numThreads; default "
            "every core)",
        }
    )
    option_metavars: ClassVar = MappingProxyType({"device": "DEVICE", "threads": "N"})

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", devices.parse_device(self.device))
        _check_threads(self.threads)
        kind = devices.device_kind(self.device)
        if self.threads is not None and kind in devices.GPU_KINDS:
            raise InvalidArgumentError(
                f"threads={self.threads} sets Intel OIDN's CPU device; device='{self.device}' "
                "does not take it"
            )

    @classmethod
    def selected_by(cls, options: Any) -> bool:
        return devices.is_device_name(options.get("device"))

    @classmethod
    def parse_cli_option(cls, name: str, text: str) -> Any:
        """The value of ``--NAME TEXT`` (``--threads`` takes a positive integer)."""
        return parse_threads_option(name, text)


class OidnBackend:
    """Intel OIDN's devices, the whole filter in one OIDN call (`runner.OidnRunner`)."""

    name = "oidn"
    priority = GPU_RANK  # the highest rank its probe gives
    description = "Intel OIDN 2.5.1's own CPU, CUDA, HIP and SYCL devices (pyoidn)"
    Options = OidnOptions
    precisions = ()  # OIDN has no precision parameter (section 7 of its semantics)
    uses_gpu = True  # on a farm with GPUs, its workers take OIDN's GPU devices
    benchmark = "oidn_gpu.backends.oidn.bench:BENCHMARK"

    def probe(self) -> Availability:
        try:
            found = devices.physical_devices()
        except OIDNGPUError as err:
            return Availability(False, str(err))
        if not found:
            return Availability(False, "Intel OIDN finds no device it supports here")
        best = found[0]  # OIDN lists the fastest first
        oidn = capi.library()
        note = f"Intel OIDN 2.5.1 (pyoidn {oidn.version}): {best.kind} device ({best.name})"
        rank = GPU_RANK if best.kind in devices.GPU_KINDS else CPU_RANK
        return Availability(True, note, auto=True, rank=rank, ranking=RANKS[best.kind])

    def describe(self) -> tuple[str, ...]:
        try:
            return tuple(f"device {d.index}: {d.kind} {d.name}" for d in devices.physical_devices())
        except Exception as err:
            return (f"no Intel OIDN ({type(err).__name__}: {err})",)

    def create_executor(self, model: Any, options: OidnOptions) -> NetworkExecutor:
        return OidnExecutor(model, options.device, options.threads)

    def create_runner(self, executor: NetworkExecutor) -> TileRunner:
        device = executor.device  # type: ignore[attr-defined]
        return OidnTensorRunner(executor) if device.kind == "cuda" else OidnRunner(executor)

    def place_on_gpu(self, options: OidnOptions, gpu_id: int) -> tuple[OidnOptions, str]:
        """OIDN's device of GPU ``gpu_id`` (Ray's numbering) where OIDN's default device is
        a CUDA or HIP GPU; options that name a device, and CPU machines, stay as they are."""
        if options.device is not None:
            return options, ""
        try:
            kind = devices.physical_devices()[0].kind
        except (OIDNGPUError, IndexError):
            return options, ""
        variable = VISIBLE_DEVICES.get(kind)
        if variable is None:
            return options, ""
        visible = [v.strip() for v in os.environ.get(variable, "").split(",") if v.strip()]
        index = visible.index(str(gpu_id)) if str(gpu_id) in visible else gpu_id
        device = f"{kind}:{index}"
        where = f"Intel OIDN {device}, {variable}={os.environ.get(variable, 'unset')}"
        return dataclasses.replace(options, device=device), where


BACKEND = OidnBackend()
