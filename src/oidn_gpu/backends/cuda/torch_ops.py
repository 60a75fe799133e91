"""The torch (cuDNN) path of the CUDA backend: used where Triton is missing, and as the baseline.

Same semantics as the Triton kernels, written as plain torch operations:

- `TorchNetwork`: the fused graph run with ``torch.nn.functional`` (``conv2d``
  on channels-last tensors, so cuDNN picks its NHWC kernels on a GPU), ReLU,
  ``max_pool2d``, nearest ``interpolate`` and ``cat``; activations stored as fp16/bf16
  on a GPU, fp32 on the CPU (CPU half convolutions are slow or missing). On a GPU each
  convolution runs on float32 copies of its fp16/bf16 input and weights (`FP32_SUMS`):
  cuDNN's TF32 tensor-core kernels multiply those exactly (both formats fit TF32's
  10-bit mantissa) and sum in fp32, and the bias is added in fp32 before the one
  rounding to fp16 that the Triton kernels make too.
- `input_pass`, `output_pass`, `autoexposure_bins`: OIDN's input processing,
  output processing and autoexposure bin averages as torch element-wise ops
  (formulas of `image.process`, `image.transfer`, `image.autoexposure`).

Everything here is capturable in a CUDA graph (no host synchronization).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu.backends.cuda.layout import ConvLaunch
from oidn_gpu.errors import MissingDependencyError
from oidn_gpu.graph.reference import ConvParams
from oidn_gpu.image import transfer as tf
from oidn_gpu.image.transfer import Transfer

try:
    import torch
    import torch.nn.functional as F  # noqa: N812 - torch's own alias
except ImportError as exc:
    raise MissingDependencyError(
        "the cuda backend needs PyTorch: pip install 'oidn-gpu[cuda]'"
    ) from exc

FLT_MAX = float(np.finfo(np.float32).max)
# Convolutions on float32 copies (see the module docstring). cuDNN's own fp16
# convolutions round their output before the bias and choose algorithms whose sums
# lose more: on the shared scenes at full size (H200, 2026-12-01) that path's output
# was 2.7-3.9e-3 from Intel OIDN CPU, the Triton kernels' 0.95-2.2e-3.
FP32_SUMS = True
MAX_BIN_SIZE = 16  # OIDN core/autoexposure.h maxBinSize


class TorchNetwork:
    """The fused graph as torch operations on ``[1, C, H, W]`` channels-last tensors."""

    def __init__(
        self,
        launches: tuple[ConvLaunch, ...],
        convs: Mapping[str, ConvParams],
        graph_input: str,
        device: Any,
        dtype: Any,
    ) -> None:
        self.launches = launches
        self.graph_input = graph_input
        self.dtype = dtype if device.type == "cuda" else torch.float32
        # the dtype the convolutions compute in (float32 on the CPU either way)
        self.compute = torch.float32 if FP32_SUMS else self.dtype
        self.weights: dict[str, tuple[Any, Any]] = {}
        for launch in launches:
            params = convs[launch.name]
            weight = torch.as_tensor(np.asarray(params.weight, np.float32), device=device)
            bias = torch.as_tensor(np.asarray(params.bias, np.float32), device=device)
            # the weights rounded to the storage dtype, as the Triton kernels use them
            weight = weight.to(self.dtype).to(self.compute)
            weight = weight.contiguous(memory_format=torch.channels_last)
            self.weights[launch.name] = (weight, bias.to(self.compute))

    def forward(self, x: Any) -> Any:
        """``x [1, C_in, H, W]`` -> raw network output ``[1, 3, H, W]`` float32."""
        values = {self.graph_input: x.to(self.dtype).contiguous(memory_format=torch.channels_last)}
        out = None
        for launch in self.launches:
            parts = []
            for source in launch.sources:
                value = values[source.value]
                if source.upsample:
                    value = F.interpolate(value, scale_factor=2.0, mode="nearest")
                parts.append(value)
            inp = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
            weight, bias = self.weights[launch.name]
            out = F.conv2d(inp.to(self.compute), weight, bias, padding=1)
            if launch.relu:
                out = F.relu(out)
            if launch.pool:
                out = F.max_pool2d(out, 2, 2)
            values[launch.value] = out.to(self.dtype)  # the one rounding per layer
        assert out is not None
        return out.float()


def forward_transfer(transfer: Transfer, v: Any) -> Any:
    """`image.transfer.forward` in torch (float32)."""
    if transfer is Transfer.PU:
        linear = v * float(tf.PU_A)
        power = float(tf.PU_B) * torch.pow(v, float(tf.PU_C)) + float(tf.PU_D)
        logarithmic = float(tf.PU_E) * torch.log(v + float(tf.PU_F)) + float(tf.PU_G)
        out = torch.where(
            v <= float(tf.PU_Y0), linear, torch.where(v <= float(tf.PU_Y1), power, logarithmic)
        )
        return out * float(tf.PU_NORM_SCALE)
    if transfer is Transfer.SRGB:
        curve = float(tf.SRGB_B) * torch.pow(v, float(tf.SRGB_EXPONENT)) - float(tf.SRGB_C)
        return torch.where(v <= float(tf.SRGB_Y0), v * float(tf.SRGB_A), curve)
    if transfer is Transfer.LOG:
        return torch.log(v + 1.0) * float(tf.LOG_NORM_SCALE)
    return v


def inverse_transfer(transfer: Transfer, x: Any) -> Any:
    """`image.transfer.inverse` in torch (float32)."""
    if transfer is Transfer.PU:
        x = x * float(tf.PU_RCP_NORM_SCALE)
        linear = x / float(tf.PU_A)
        power = torch.pow((x - float(tf.PU_D)) / float(tf.PU_B), float(tf.PU_INV_C))
        logarithmic = torch.exp((x - float(tf.PU_G)) / float(tf.PU_E)) - float(tf.PU_F)
        return torch.where(
            x <= float(tf.PU_X0), linear, torch.where(x <= float(tf.PU_X1), power, logarithmic)
        )
    if transfer is Transfer.SRGB:
        curve = torch.pow((x + float(tf.SRGB_C)) / float(tf.SRGB_B), float(tf.SRGB_INV_EXPONENT))
        return torch.where(x <= float(tf.SRGB_X0), x / float(tf.SRGB_A), curve)
    if transfer is Transfer.LOG:
        return torch.exp(x * float(tf.LOG_RCP_NORM_SCALE)) - 1.0
    return x


def rgb(image: Any) -> Any:
    """``[H, W, C]`` (C 1..3) -> ``[H, W, 3]`` float32, broadcast as OIDN does."""
    channels = image.shape[2]
    image = image.float()
    if channels == 1:
        return image.expand(-1, -1, 3)
    if channels == 2:
        return torch.cat([image, image[:, :, 1:2]], dim=2)
    return image[:, :, :3]


def input_pass(images: list[Any], scale: Any, mode: Any, tile: Any, out: Any) -> None:
    """Fill ``out [H_t, W_t, C]`` (the padded NHWC tile input) from ``images`` ``[H, W, C]``.

    ``tile`` gives the read rectangle (``in_*``) and its place (``buf_*``);
    ``scale`` is the device scalar input scale.
    """
    out.zero_()
    rows = slice(tile.in_y, tile.in_y + tile.in_h)
    cols = slice(tile.in_x, tile.in_x + tile.in_w)
    dst = out[tile.buf_y : tile.buf_y + tile.in_h, tile.buf_x : tile.buf_x + tile.in_w]
    v = rgb(images[0][rows, cols]) * scale
    v = torch.nan_to_num(v, nan=0.0, posinf=FLT_MAX, neginf=-FLT_MAX)
    lo, hi = mode.input_range
    v = v.clamp(lo, hi)
    if mode.snorm:
        v = v * 0.5 + 0.5
    dst[..., 0:3] = forward_transfer(mode.transfer, v).to(out.dtype)
    if len(images) > 1:
        a = torch.nan_to_num(rgb(images[1][rows, cols]), nan=0.0).clamp(0.0, 1.0)
        dst[..., 3:6] = a.to(out.dtype)
    if len(images) > 2:
        n = torch.nan_to_num(rgb(images[2][rows, cols]), nan=0.0).clamp(-1.0, 1.0) * 0.5 + 0.5
        dst[..., 6:9] = n.to(out.dtype)


def output_pass(net: Any, scale: Any, mode: Any, tile: Any, image: Any, channels: int) -> None:
    """Write the kept rectangle of the raw network output ``net [H_t, W_t, 3]`` into ``image``."""
    v = net[tile.src_y : tile.src_y + tile.out_h, tile.src_x : tile.src_x + tile.out_w].float()
    v = torch.nan_to_num(v, nan=0.0, posinf=FLT_MAX).clamp(0.0, FLT_MAX)
    v = inverse_transfer(mode.transfer, v)
    if channels == 1:
        v = ((v[..., 0:1] + v[..., 1:2]) + v[..., 2:3]) * float(np.float32(1.0 / 3.0))
    if mode.snorm:
        v = torch.clamp(v * 2.0 - 1.0, min=-1.0)
    if not mode.hdr:
        v = torch.clamp(v, max=1.0)
    out_scale = torch.where(scale == 0, torch.zeros_like(scale), 1.0 / scale)
    v = v * out_scale
    rows = slice(tile.out_y, tile.out_y + tile.out_h)
    cols = slice(tile.out_x, tile.out_x + tile.out_w)
    image[rows, cols, :channels] = v[..., :channels]


@dataclass(frozen=True)
class _Rect:
    """A kept rectangle in the shape of `image.tiling.Tile`'s output fields."""

    src_y: int
    src_x: int
    out_h: int
    out_w: int
    out_y: int
    out_x: int


def write_target(net: Any, target: Any) -> None:
    """Write the raw network output ``net [H, W, 3]`` into an `executor.FinalTarget`: its
    kept rectangle, raw or through the output pass (the offset is 0 by construction)."""
    keep = _Rect(
        target.keep_y, target.keep_x, target.keep_h, target.keep_w, target.dst_y, target.dst_x
    )
    image = target.image if target.image.dim() == 3 else target.image.unsqueeze(2)
    if target.mode is None:
        v = net[keep.src_y : keep.src_y + keep.out_h, keep.src_x : keep.src_x + keep.out_w]
        image[
            keep.out_y : keep.out_y + keep.out_h,
            keep.out_x : keep.out_x + keep.out_w,
            : target.channels,
        ] = v[..., : target.channels]
    else:
        output_pass(net, target.scale, target.mode, keep, image, target.channels)


def autoexposure_bins(color: Any) -> Any:
    """Average luminance per OIDN autoexposure bin of ``color [H, W, C]``, ``[nbH * nbW]``.

    Each bin's pixels are gathered into a ``[nbH, MAX_BIN_SIZE, nbW, MAX_BIN_SIZE]`` grid
    (bins of fewer rows or columns padded with zeros) and summed by one reduction: on a GPU
    its order is fixed, so the scale, and the image, are the same on every run (an
    ``index_add_`` adds with atomics, in the order the threads happen to run)."""
    height, width = color.shape[:2]
    nb_h, nb_w = math.ceil(height / MAX_BIN_SIZE), math.ceil(width / MAX_BIN_SIZE)
    v = torch.nan_to_num(rgb(color), nan=0.0, posinf=FLT_MAX).clamp(0.0, FLT_MAX)
    lum = 0.212671 * v[..., 0] + 0.715160 * v[..., 1] + 0.072169 * v[..., 2]
    device = color.device
    step = torch.arange(MAX_BIN_SIZE, device=device)
    rows, row_ok = _bin_members(height, nb_h, step)  # [nbH, MAX_BIN_SIZE] each
    cols, col_ok = _bin_members(width, nb_w, step)
    grid = lum[rows.reshape(-1)][:, cols.reshape(-1)]
    grid = grid.reshape(nb_h, MAX_BIN_SIZE, nb_w, MAX_BIN_SIZE)
    inside = row_ok[:, :, None, None] & col_ok[None, None, :, :]
    sums = torch.where(inside, grid, torch.zeros_like(grid)).sum(dim=(1, 3))
    counts = row_ok.sum(dim=1)[:, None] * col_ok.sum(dim=1)[None, :]
    return (sums / counts.float()).reshape(-1)


def _bin_members(size: int, bins: int, step: Any) -> tuple[Any, Any]:
    """The pixel index of each bin's ``k``-th row (or column), clamped into the image, and
    whether it belongs to the bin (bin ``b`` holds ``[b * size // bins, (b + 1) * size //
    bins)``, at most ``len(step)`` pixels)."""
    bounds = (torch.arange(bins + 1, device=step.device) * size) // bins
    members = bounds[:-1, None] + step[None, :]
    return members.clamp(max=size - 1), members < bounds[1:, None]
