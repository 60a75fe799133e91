"""OIDN's autoexposure on the device: the scale of a colour image into a device scalar.

On the Triton engine one launch of `triton_kernels.autoexposure_kernel`: a program
per bin of at most 16 x 16 pixels, the last to finish (an int32 counter, kept at 0
between launches) computes ``key / 2^mean(log2)`` over the bins. ``steps=2`` is the
same as two launches (`autoexposure_bins_kernel`, `autoexposure_scale_kernel`),
the same sums in the same order. On cuDNN, torch reductions (float64 sums).
The scale never leaves the device.
"""

from __future__ import annotations

import math
from typing import Any

from oidn_gpu.backends.cuda import torch_ops
from oidn_gpu.backends.cuda.executor import kernels
from oidn_gpu.backends.cuda.images import DeviceImage, hwc_view
from oidn_gpu.image import autoexposure as ae

SCALE_BLOCK = 1024  # lanes of the log-average (each adds every 1024th bin)


def new_counter(device: Any) -> Any:
    """The int32 counter the one-launch kernel needs (0; it leaves it at 0)."""
    torch = torch_ops.torch
    return torch.zeros(1, dtype=torch.int32, device=device)


def autoexposure(color: DeviceImage, scale_out: Any, engine: str, *, counter: Any = None,
                 steps: int = 1) -> None:  # fmt: skip
    """Write OIDN's autoexposure scale of ``color`` into the device scalar ``scale_out``.

    Args:
        counter: `new_counter`'s tensor, used by no other work in flight (a frame's
            own); default a new one.
        steps: 1 (one launch) or 2 (bins, then the scale).
    """
    if engine != "triton":
        _torch_autoexposure(color, scale_out)
        return
    torch, tk, device = torch_ops.torch, kernels(), scale_out.device
    nb_h = math.ceil(color.height / ae.MAX_BIN_SIZE)
    nb_w = math.ceil(color.width / ae.MAX_BIN_SIZE)
    bins = torch.empty(nb_h * nb_w, dtype=torch.float32, device=device)
    image = (color.tensor, color.offset, color.pixel_stride, color.row_stride, color.channels,
             color.height, color.width, nb_h, nb_w)  # fmt: skip
    constants = {"KEY": float(ae.KEY), "EPS": float(ae.EPS), "BLOCK": SCALE_BLOCK}
    if steps == 1:
        counter = new_counter(device) if counter is None else counter
        tk.autoexposure_kernel[(nb_h, nb_w)](*image, bins, counter, scale_out,
                                             MAX_BIN=ae.MAX_BIN_SIZE, **constants)  # fmt: skip
        return
    tk.autoexposure_bins_kernel[(nb_h, nb_w)](*image, bins, MAX_BIN=ae.MAX_BIN_SIZE)
    tk.autoexposure_scale_kernel[(1,)](bins, nb_h * nb_w, scale_out, **constants)


def _torch_autoexposure(color: DeviceImage, scale_out: Any) -> None:
    torch = torch_ops.torch
    bins = torch_ops.autoexposure_bins(hwc_view(color))
    valid = bins > float(ae.EPS)
    logs = torch.log2(torch.where(valid, bins, torch.ones_like(bins)))
    total = torch.where(valid, logs, torch.zeros_like(logs)).double().sum()
    count = valid.sum()
    mean = total / count.clamp(min=1).double()
    scale = torch.where(count > 0, float(ae.KEY) / torch.exp2(mean), torch.ones_like(mean))
    scale_out.copy_(scale.float().reshape(1))
