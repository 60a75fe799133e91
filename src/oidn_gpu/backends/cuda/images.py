"""The cuda runner's images: device image descriptions, the staged sources, host copies.

`DeviceImage` describes a ``[H, W, C]`` torch tensor on the device (channels read
or written, pixel and row strides in elements): what the input pass, the
autoexposure and the network's output pass index. `describe` checks a caller's
tensor and describes it; `staged_source` checks a tensor `CudaDenoiser.denoise_staged`
copies from. `DeviceScalar` is a scale left on the device until read.
`host_copy` copies between pinned torch buffers and NumPy arrays on torch's threads.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu.backends.cuda import torch_ops
from oidn_gpu.errors import InvalidArgumentError, channels_first_hint


@dataclass(frozen=True)
class DeviceImage:
    """A device image: tensor, ``(H, W)``, channels read or written, strides in elements."""

    tensor: Any
    height: int
    width: int
    channels: int
    pixel_stride: int
    row_stride: int
    offset: int

    def key(self) -> tuple[Any, ...]:
        return (
            self.tensor.data_ptr(),
            self.tensor.dtype,
            self.height,
            self.width,
            self.channels,
            self.pixel_stride,
            self.row_stride,
            self.offset,
        )


def describe(tensor: Any, name: str, *, max_channels: int = 3) -> DeviceImage:
    """Describe a ``[H, W]`` or ``[H, W, C]`` device tensor (C 1..4; a 4th is alpha, untouched)."""
    torch = torch_ops.torch
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgumentError(f"{name} is a {type(tensor).__name__}; expected a torch tensor")
    if tensor.dtype not in (torch.float32, torch.float16):
        raise InvalidArgumentError(
            f"{name} image has dtype {tensor.dtype}; expected torch.float32 or torch.float16"
        )
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(2)
    if tensor.dim() != 3 or not 1 <= tensor.shape[2] <= 4:
        raise InvalidArgumentError(
            f"{name} image has shape {tuple(tensor.shape)}; expected HxW or HxWxC with C 1..4"
            + channels_first_hint(tuple(tensor.shape))
        )
    if tensor.shape[2] > 1 and tensor.stride(2) != 1:
        raise InvalidArgumentError(f"{name} image: channels must be contiguous (stride 1)")
    height, width, channels = (int(v) for v in tensor.shape)
    if height < 1 or width < 1:
        raise InvalidArgumentError(f"{name} image size {height}x{width} is empty")
    return DeviceImage(
        tensor,
        height,
        width,
        min(channels, max_channels),
        int(tensor.stride(1)),
        int(tensor.stride(0)),
        0,
    )


class DeviceScalar:
    """A float32 scalar on the device, read (waiting for the work queued before it on
    ``stream``) only when ``float()`` asks."""

    def __init__(self, tensor: Any, stream: Any) -> None:
        self._tensor = tensor
        self._event = None
        if stream is not None:
            self._event = torch_ops.torch.cuda.Event()
            self._event.record(stream)

    def __float__(self) -> float:
        if self._event is not None:
            self._event.synchronize()
        return float(self._tensor.item())


def staged_source(tensor: Any, name: str, device: Any) -> Any:
    """A tensor `CudaDenoiser.denoise_staged` copies from, as ``[H, W, C]`` (C 1..3)."""
    torch = torch_ops.torch
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgumentError(f"{name} is a {type(tensor).__name__}; expected a torch tensor")
    if tensor.device != device:
        raise InvalidArgumentError(
            f"{name} image is on {tensor.device}; the denoiser runs on {device}"
        )
    if tensor.dtype not in (torch.float16, torch.float32, torch.float64, torch.bfloat16):
        raise InvalidArgumentError(
            f"{name} image has dtype {tensor.dtype}; expected a torch float16, float32, "
            "float64 or bfloat16 tensor"
        )
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(2)
    if tensor.dim() != 3 or not 1 <= tensor.shape[2] <= 3 or min(tensor.shape[:2]) < 1:
        raise InvalidArgumentError(
            f"{name} image has shape {tuple(tensor.shape)}; expected HxW or HxWxC with C 1..3"
        )
    return tensor


def host_copy(dst: Any, src: Any) -> None:
    """``dst[...] = src`` between a torch CPU tensor and a NumPy array (either way round)
    on torch's CPU threads; views torch cannot wrap (negative strides) are copied by NumPy."""
    torch = torch_ops.torch
    array = src if isinstance(src, np.ndarray) else dst
    if min(array.strides, default=0) < 0:
        out = dst if isinstance(dst, np.ndarray) else dst.numpy()
        np.copyto(out, src if isinstance(src, np.ndarray) else src.numpy())
        return
    if array is dst:
        torch.from_numpy(dst).copy_(src)
        return
    with warnings.catch_warnings():
        # a read-only source is only read: torch's warning about writes does not apply
        warnings.filterwarnings("ignore", "The given NumPy array is not writable")
        wrapped = torch.from_numpy(src)
    dst.copy_(wrapped)


def hwc_view(image: DeviceImage) -> Any:
    """The ``[H, W, C]`` view of a described device image (the cuDNN path)."""
    return image.tensor[:, :, : image.channels]
