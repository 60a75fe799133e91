"""The cuda backend's registry entry: Triton (or cuDNN) kernels on NVIDIA GPUs through PyTorch.

Importing this module needs no torch: its options validate and its probe reports
a missing torch or GPU as the reason the backend is unavailable. ``backend="auto"``
tries it first, and picks it wherever torch sees a CUDA GPU; a torch device given
as ``device=`` asks for it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from oidn_gpu.backends.base import PRECISIONS as ALL_PRECISIONS
from oidn_gpu.backends.base import (
    Availability,
    BackendOptions,
    DenoiseImages,
    NetworkExecutor,
    Progress,
    TileLimits,
    TileRunner,
)
from oidn_gpu.backends.cuda import available
from oidn_gpu.backends.cuda.placement import cuda_device_for_gpu
from oidn_gpu.backends.host_runner import report_progress
from oidn_gpu.backends.plan import DenoisePlan
from oidn_gpu.errors import InvalidArgumentError

PRECISIONS = ("auto", "fp16", "bf16")
# "auto" computes with fp16 activations and weights (fp32 accumulation either way).
DEFAULT_PRECISION = "fp16"
ENGINES = ("auto", "triton", "cudnn")
# The kernels index activations with 32-bit integers; the widest activation any OIDN
# U-Net stores has 128 channels (112 padded), so a tile holds at most 2^24 - 1 pixels.
TILE_LIMITS = TileLimits(max_elements=2**31 - 1, stored_channels=128)


def _expected(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values[:-1]) + f" or '{values[-1]}'"


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

    precision: str = "auto"
    engine: str = "auto"
    device: Any = None

    option_help: ClassVar = MappingProxyType(
        {
            "precision": "cuda: auto (fp16) or bf16 activations, fp32 accumulation",
            "engine": "cuda: auto (Triton where it imports, else cuDNN), triton or cudnn",
        }
    )
    option_choices: ClassVar = MappingProxyType({"precision": PRECISIONS, "engine": ENGINES})

    def __post_init__(self) -> None:
        precision = self.precision
        if not isinstance(precision, str) or precision not in ALL_PRECISIONS:
            raise InvalidArgumentError(
                f"unknown precision {precision!r}; expected {_expected(ALL_PRECISIONS)}"
            )
        if precision not in PRECISIONS:
            raise InvalidArgumentError(
                f"the cuda backend computes in fp16 or bf16; got precision '{precision}'"
            )
        if not isinstance(self.engine, str) or self.engine not in ENGINES:
            raise InvalidArgumentError(
                f"unknown engine {self.engine!r}; expected {_expected(ENGINES)}"
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
        """The precision the executor computes in (``"auto"`` resolved)."""
        return DEFAULT_PRECISION if self.precision == "auto" else self.precision


class CudaTileRunner:
    """The cuda `TileRunner` (and `AutoexposureRunner`, `DeviceRunner`): a whole frame (all
    tiles) per call on `CudaDenoiser`, from NumPy arrays or from tensors on its device.

    A frame is one CUDA graph replay, so ``progress`` hears 1.0 when it is done (and
    0.0 from the filter before it); returning False then still leaves the caller's
    output untouched.
    """

    def __init__(self, denoiser: Any) -> None:
        self.denoiser = denoiser

    def run(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> np.ndarray:
        return self._denoise(images, plan, progress, autoexposure=False)

    def run_autoexposed(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> tuple[np.ndarray, float]:
        """`AutoexposureRunner.run_autoexposed`: OIDN's autoexposure of the colour computed
        on the GPU inside the frame's CUDA graph; the scale is read back after the frame."""
        result = self._denoise(images, plan, progress, autoexposure=True)
        return result, self.denoiser.input_scale()

    def _denoise(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None, *,
        autoexposure: bool, staged: bool = False,
    ) -> Any:  # fmt: skip
        """One frame: NumPy images through `CudaDenoiser.denoise`, or device tensors
        (``staged``) through `CudaDenoiser.denoise_staged`."""
        entry = self.denoiser.denoise_staged if staged else self.denoiser.denoise
        # The denoiser's buffers are updated in place every frame: never inference tensors,
        # also when the caller runs under torch.inference_mode.
        with self.denoiser._torch.inference_mode(False):
            result = entry(
                images.main,
                images.albedo,
                images.normal,
                mode=plan.mode,
                plan=plan.tiles,
                out_channels=images.out_channels,
                autoexposure=autoexposure,
            )
        report_progress(progress, 1.0)
        return result

    # -- device tensors (`DeviceRunner`) -----------------------------------------------

    @property
    def device(self) -> Any:
        return self.denoiser.device

    def run_device(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> Any:
        """`DeviceRunner.run_device`: the tensors staged into the denoiser's buffers
        (`CudaDenoiser.denoise_staged`), one graph replay, nothing read back."""
        return self._denoise(images, plan, progress, autoexposure=False, staged=True)

    def run_device_autoexposed(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> tuple[Any, Any]:
        """`DeviceRunner.run_device_autoexposed`: the scale stays on the GPU until read."""
        result = self._denoise(images, plan, progress, autoexposure=True, staged=True)
        return result, self.denoiser.last_input_scale()

    def close(self) -> None:
        self.denoiser.close()


class CudaBackend:
    """CUDA through PyTorch, with the fused device-side denoise pipeline as its runner."""

    name = "cuda"
    priority = 200
    description = "Triton (or cuDNN) kernels on NVIDIA GPUs through PyTorch"
    Options = CudaOptions
    tile_limits = TILE_LIMITS
    uses_gpu = True

    def probe(self) -> Availability:
        ok, detail = available()
        if ok:
            return Availability(True, f"{detail} kernels on a CUDA GPU", auto=True)
        # TRITON_INTERPRET=1 (executor.interpreting): the Triton kernels run on CPU tensors
        interpret = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
        if interpret and importlib.util.find_spec("torch") is not None:
            return Availability(True, f"{detail}; Triton's CPU interpreter (TRITON_INTERPRET=1)")
        return Availability(False, detail)

    def describe(self) -> tuple[str, ...]:
        try:
            # torch is this backend's optional dependency: imported only when asked for.
            import torch

            count = torch.cuda.device_count()
            return tuple(f"device cuda:{i} {torch.cuda.get_device_name(i)}" for i in range(count))
        except Exception as err:
            return (f"no CUDA device ({type(err).__name__}: {err})",)

    def create_executor(self, model: Any, options: CudaOptions) -> NetworkExecutor:
        # The engine imports torch (and Triton): only when asked for.
        from oidn_gpu.backends.cuda.executor import CudaExecutor
        from oidn_gpu.backends.cuda.torch_ops import torch

        with torch.inference_mode(False):  # its buffers are written in place (see the runner)
            return CudaExecutor(
                model,
                device=options.device,
                precision=options.compute_precision,
                engine=options.engine,
            )

    def create_runner(self, executor: NetworkExecutor) -> TileRunner:
        from oidn_gpu.backends.cuda.pipeline import CudaDenoiser
        from oidn_gpu.backends.cuda.torch_ops import torch

        with torch.inference_mode(False):
            return CudaTileRunner(CudaDenoiser(executor))  # type: ignore[arg-type]

    def place_on_gpu(self, options: CudaOptions, gpu_id: int) -> tuple[CudaOptions, str]:
        # CUDA numbers the GPUs that CUDA_VISIBLE_DEVICES lets this process see
        if options.device is not None:
            return options, ""
        device = cuda_device_for_gpu(gpu_id, os.environ)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
        where = f"{device}, CUDA_VISIBLE_DEVICES={visible}"
        return dataclasses.replace(options, device=device), where

    def temporal_passes(self, options: CudaOptions) -> Any:
        """The temporal mode's passes in torch on the options' device."""
        from oidn_gpu.backends.cuda.temporal import TorchTemporalPasses

        return TorchTemporalPasses(options.device)


BACKEND = CudaBackend()
