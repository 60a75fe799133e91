"""The wgpu backend's options (`WgpuOptions`): what it computes in, its kernels, its
GEMM tuning; validated on creation without wgpu.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from oidn_gpu.backends.base import (
    BackendOptions,
    Precision,
    check_precision,
    precision_choices,
)
from oidn_gpu.backends.wgpu import kernel_choice
from oidn_gpu.errors import InvalidArgumentError, one_of
from oidn_gpu.kernels.gemm import Accumulation, GemmOptions

# What it computes in (``precision="auto"``: fp16 where the device has shader-f16).
PRECISIONS = (Precision.FP16, Precision.FP32)
# The kernel= settings (the final RGB layer's kernel is chosen, never asked for).
KERNELS = kernel_choice.kernel_names()
# How fp16 convolutions sum their products (`kernels.gemm.Accumulation`).
ACCUMULATIONS = tuple(a.value for a in Accumulation)


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
        accumulation: how every fp16 convolution sums its products: ``"f32"`` (the most
            accurate), ``"f16-chains"``, ``"f16-chains16"``, ``"f16-lanes"``,
            ``"f16-pairs"`` or ``"f16-partials"`` (the fastest, farthest from OIDN's CPU
            output); None keeps ``gemm``'s (or the device's default).
    """

    precision: Precision = Precision.AUTO
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
        {
            "precision": precision_choices(PRECISIONS),
            "kernel": KERNELS,
            "accumulation": ACCUMULATIONS,
        }
    )
    option_metavars: ClassVar = MappingProxyType({"gemm": "JSON"})

    def __post_init__(self) -> None:
        object.__setattr__(self, "precision", check_precision(self.precision, "wgpu", PRECISIONS))
        kernel_choice.validate_kernel(self.kernel)
        object.__setattr__(self, "gemm", kernel_choice.validate_gemm(self.gemm))
        if self.accumulation is not None and self.accumulation not in ACCUMULATIONS:
            raise InvalidArgumentError(
                f"unknown accumulation {self.accumulation!r}; expected {one_of(ACCUMULATIONS)}"
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
