"""The cuda backend's options (`CudaOptions`) and the bounds of its kernels' indexing
(`TILE_LIMITS`); validated on creation without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from oidn_gpu.backends.base import (
    BackendOptions,
    Precision,
    TileLimits,
    check_precision,
    precision_choices,
)
from oidn_gpu.errors import InvalidArgumentError, one_of

# What it computes in: fp16 or bf16 activations and weights, fp32 accumulation either way.
PRECISIONS = (Precision.FP16, Precision.BF16)
# What "auto" computes in.
DEFAULT_PRECISION = Precision.FP16
ENGINES = ("auto", "triton", "cudnn")
# The kernels index activations with 32-bit integers; the widest activation any OIDN
# U-Net stores has 128 channels (112 padded), so a tile holds at most 2^24 - 1 pixels.
TILE_LIMITS = TileLimits(max_elements=2**31 - 1, stored_channels=128)


def _is_torch_device(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "torch"


@dataclass(frozen=True)
class CudaOptions(BackendOptions):
    """Options of the cuda backend, validated on creation.

    Attributes:
        precision: ``"auto"`` or ``"fp16"`` (fp16 activations), or ``"bf16"``;
            accumulation is fp32 either way.
        engine: ``"auto"`` (Triton where it imports, else cuDNN through torch),
            ``"triton"`` or ``"cudnn"``.
        device: a ``torch.device``, a CUDA device index or name; None: the current one.
    """

    precision: Precision = Precision.AUTO
    engine: str = "auto"
    device: Any = None

    option_help: ClassVar = MappingProxyType(
        {
            "precision": "cuda: auto (fp16) or bf16 activations, fp32 accumulation",
            "engine": "cuda: auto (Triton where it imports, else cuDNN), triton or cudnn",
        }
    )
    option_choices: ClassVar = MappingProxyType(
        {"precision": precision_choices(PRECISIONS), "engine": ENGINES}
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "precision", check_precision(self.precision, "cuda", PRECISIONS))
        if not isinstance(self.engine, str) or self.engine not in ENGINES:
            raise InvalidArgumentError(
                f"unknown engine {self.engine!r}; expected {one_of(ENGINES)}"
            )
        device = self.device
        if device is not None and not (
            (isinstance(device, (int, str)) and not isinstance(device, bool))
            or _is_torch_device(device)
        ):
            raise InvalidArgumentError(
                f"device must be a torch.device, a CUDA device index or name, got "
                f"{type(device).__name__}"
            )

    @classmethod
    def selected_by(cls, options: Any) -> bool:
        return _is_torch_device(options.get("device"))

    @property
    def compute_precision(self) -> str:
        """The precision the executor computes in (``"auto"`` resolved): ``"fp16"`` or
        ``"bf16"``."""
        return (DEFAULT_PRECISION if self.precision is Precision.AUTO else self.precision).value
