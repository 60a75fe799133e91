"""The wgpu backend's registry entry: WGSL compute shaders on Vulkan, Metal, D3D12, lavapipe.

Importing this module needs no wgpu: its options validate and its probe reports
a missing wgpu as the reason the backend is unavailable. ``backend="auto"``
picks it only when an adapter that is a real GPU exists (a CPU rasterizer such as
lavapipe is slower than NumPy; ask for ``backend="wgpu"`` to use it). On Linux the
probe first reads Vulkan's driver manifests and the GPU device nodes (`icd`): where
they rule a GPU out it answers without importing wgpu.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from oidn_gpu.backends.base import PRECISIONS as ALL_PRECISIONS
from oidn_gpu.backends.base import Availability, BackendOptions, NetworkExecutor, TileRunner
from oidn_gpu.backends.wgpu import icd
from oidn_gpu.errors import InvalidArgumentError, MissingDependencyError
from oidn_gpu.kernels.gemm import Accumulation, GemmOptions
from oidn_gpu.kernels.select import KernelKind

PRECISIONS = ("auto", "fp16", "fp32")
# The kernel= settings (KernelKind less the final RGB layer, which is chosen, never asked for).
KERNELS = tuple(k.value for k in KernelKind if k is not KernelKind.FINAL_RGB)
# How fp16 convolutions sum their products (`kernels.gemm.Accumulation`).
ACCUMULATIONS = tuple(a.value for a in Accumulation)
# Adapter features worth naming in `oidn-gpu info`.
REPORTED_FEATURES = ("shader-f16", "subgroup", "timestamp-query")


def _expected(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values[:-1]) + f" or '{values[-1]}'"


@dataclass(frozen=True)
class WgpuOptions(BackendOptions):
    """Options of the wgpu backend, validated on creation.

    Attributes:
        precision: ``"auto"`` (fp16 where the device has ``shader-f16``), ``"fp16"``
            or ``"fp32"``.
        kernel: the convolution kernel: ``"auto"`` or one of `KERNELS`.
        gemm: implicit-GEMM tuning (`kernels.gemm.GemmOptions`, or a mapping of its
            option names), None for the device's defaults.
        device: a ``wgpu.GPUDevice`` to run on; None opens one.
        conv_pool: fuse each pooled encoder conv with its 2x2 max pool (the default; the
            direct and implicit-GEMM kernels have the fused form). False runs conv and pool
            as two kernels, as oidn-web does, so that ``kernel="spatial"`` or
            ``"subgroup"`` also reaches the four pooled encoder convs. Same image.
        accumulation: how fp16 convolutions sum their products: ``"f32"`` (the most
            accurate), ``"f16-chains"`` or ``"f16-partials"`` (the fastest, farthest from
            OIDN's CPU output); None keeps ``gemm``'s (or the device's default).
    """

    precision: str = "auto"
    kernel: str = "auto"
    gemm: GemmOptions | None = None
    device: Any = None
    conv_pool: bool = True
    accumulation: str | None = None

    option_help: ClassVar = MappingProxyType(
        {
            "precision": "wgpu: auto (fp16 where the GPU has shader-f16), fp16 or fp32",
            "kernel": "wgpu convolution kernel: " + ", ".join(KERNELS),
            "gemm": "wgpu implicit-GEMM options as JSON, e.g. '{\"rows_per_thread\": 4}'",
            "accumulation": "wgpu fp16 sums: " + ", ".join(ACCUMULATIONS),
        }
    )
    option_choices: ClassVar = MappingProxyType(
        {"precision": PRECISIONS, "kernel": KERNELS, "accumulation": ACCUMULATIONS}
    )
    option_metavars: ClassVar = MappingProxyType({"gemm": "JSON"})

    def __post_init__(self) -> None:
        if not isinstance(self.precision, str) or self.precision not in ALL_PRECISIONS:
            raise InvalidArgumentError(
                f"unknown precision {self.precision!r}; expected {_expected(PRECISIONS)}"
            )
        if self.precision not in PRECISIONS:
            raise InvalidArgumentError(
                f"the wgpu backend computes in fp16 or fp32; got precision '{self.precision}'"
            )
        if not isinstance(self.kernel, str) or self.kernel not in KERNELS:
            raise InvalidArgumentError(
                f"unknown kernel {self.kernel!r}; expected one of "
                + ", ".join(repr(k) for k in KERNELS)
            )
        object.__setattr__(self, "gemm", gemm_options(self.gemm))
        if self.accumulation is not None and self.accumulation not in ACCUMULATIONS:
            raise InvalidArgumentError(
                f"unknown accumulation {self.accumulation!r}; expected {_expected(ACCUMULATIONS)}"
            )
        if not isinstance(self.conv_pool, bool):
            raise InvalidArgumentError(f"conv_pool must be True or False, got {self.conv_pool!r}")
        device = self.device
        if device is not None and not (
            hasattr(device, "create_compute_pipeline") and hasattr(device, "queue")
        ):
            raise InvalidArgumentError(
                f"device must be a wgpu.GPUDevice, got {type(device).__name__}"
            )

    @classmethod
    def selected_by(cls, options: Mapping[str, Any]) -> bool:
        # A device with backend="auto" asks for wgpu on it (backends before wgpu in the
        # auto order claim their own kinds of device first).
        return options.get("device") is not None

    @classmethod
    def parse_cli_option(cls, name: str, text: str) -> Any:
        """The value of ``--NAME TEXT`` (``--gemm`` takes a JSON object of GEMM options)."""
        if name != "gemm":
            return text
        try:
            options = json.loads(text)
        except json.JSONDecodeError as err:
            raise InvalidArgumentError(f"--gemm is not valid JSON ({err.msg}): {text!r}") from None
        if not isinstance(options, dict):
            raise InvalidArgumentError(f"--gemm must be a JSON object, got {text!r}")
        try:
            GemmOptions(**options)
        except TypeError as err:
            raise InvalidArgumentError(f"unknown GEMM option in {text!r}: {err}") from None
        return options


def gemm_options(gemm: Any) -> GemmOptions | None:
    """Normalize ``gemm=``: None, `GemmOptions`, or a mapping of its option names.

    Raises:
        InvalidArgumentError: another type, an unknown option name or a bad value.
    """
    if gemm is None or isinstance(gemm, GemmOptions):
        return gemm
    if not isinstance(gemm, Mapping):
        raise InvalidArgumentError(
            f"gemm must be a mapping of option names or GemmOptions, got {type(gemm).__name__}"
        )
    try:
        return GemmOptions(**gemm)
    except TypeError as err:
        raise InvalidArgumentError(f"invalid gemm options {dict(gemm)!r}: {err}") from None


class WgpuBackend:
    """WGSL kernels through wgpu, with the GPU denoise pipeline as its tile runner."""

    name = "wgpu"
    priority = 100
    description = "WGSL compute shaders through wgpu (Vulkan, Metal, D3D12)"
    Options = WgpuOptions

    def probe(self) -> Availability:
        # On Linux, Vulkan's driver manifests and the device nodes can rule a GPU out
        # without importing wgpu (which takes about a second): see `icd`.
        reason = icd.no_gpu_reason()
        if reason is not None and importlib.util.find_spec("wgpu") is not None:
            cpu = icd.cpu_drivers()
            if not cpu:
                return Availability(
                    False,
                    f"{reason}; no CPU Vulkan driver either (Mesa's lavapipe: "
                    "'apt-get install mesa-vulkan-drivers')",
                )
            return Availability(
                True, f"{reason}; 'auto' does not pick {' or '.join(cpu)}, backend='wgpu' does"
            )
        try:
            from oidn_gpu.backends.wgpu import device
        except MissingDependencyError as err:
            return Availability(False, str(err))
        if device.has_hardware_adapter():
            return Availability(True, "a GPU adapter", auto=True)
        if device.enumerate_adapters():
            return Availability(True, "software adapter only; 'auto' does not pick it")
        return Availability(False, "no WebGPU adapter found")

    def describe(self) -> tuple[str, ...]:
        try:
            from oidn_gpu.backends.wgpu import device

            adapters = device.enumerate_adapters()
        except Exception as err:
            return (f"enumerating adapters failed ({err})",)
        lines = []
        for adapter in adapters:
            info: dict[str, Any] = dict(getattr(adapter, "info", {}) or {})
            try:
                features = sorted(str(f) for f in adapter.features if f in REPORTED_FEATURES)
            except Exception:
                features = []
            kind = f"{info.get('backend_type') or '?'}, {info.get('adapter_type') or '?'}"
            extra = f" features: {', '.join(features)}" if features else ""
            lines.append(f"adapter {info.get('device') or '?'} ({kind}){extra}")
        return tuple(lines)

    def create_executor(self, model: Any, options: WgpuOptions) -> NetworkExecutor:
        from oidn_gpu.backends.wgpu.executor import WgpuExecutor

        return WgpuExecutor(
            model,
            precision=options.precision,
            kernel=options.kernel,
            gemm=options.gemm,
            device=options.device,
            conv_pool=options.conv_pool,
            accumulation=options.accumulation,
        )

    def create_runner(self, executor: NetworkExecutor) -> TileRunner:
        from oidn_gpu.backends.wgpu.pipeline import GpuDenoiser

        return GpuDenoiser(executor)  # type: ignore[arg-type]


BACKEND = WgpuBackend()
