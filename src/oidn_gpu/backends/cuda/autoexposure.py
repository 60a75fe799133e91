"""OIDN's autoexposure on the device: the scale of a colour image into a device scalar.

On the Triton engine two launches: `io_kernels.autoexposure_bins_kernel` (a program
per bin of at most 16 x 16 pixels, the bin's average luminance of the sanitized colour),
then `io_kernels.autoexposure_scale_kernel` (one program: ``key / 2^mean(log2)`` over
the bins). On cuDNN, torch reductions (float64 sums). The scale never leaves the device.
"""

from __future__ import annotations

import math
from typing import Any

from oidn_gpu.backends.cuda import torch_ops
from oidn_gpu.backends.cuda.images import DeviceImage, hwc_view
from oidn_gpu.backends.cuda.triton_loader import launchers
from oidn_gpu.image import autoexposure as ae

# Launch shapes timed on an NVIDIA H200 (docs/benchmarks.md: both
# launches in a CUDA graph, per replay): one warp per 16 x 16 bin and 4096 lanes in 16
# warps for the log-average took 12.95 -> 11.00 us at 1280x720, 23.2 -> 19.0 us at
# 1920x1080 and 84.9 -> 66.3 us at 3840x2160 against 4 warps and 1024 lanes in 4 warps,
# with the same scale bits on each of those images.
BINS_WARPS = 1  # warps per bin program
SCALE_BLOCK = 4096  # lanes of the log-average (each adds every 4096th bin)
SCALE_WARPS = 16


def autoexposure(color: DeviceImage, scale_out: Any, engine: str) -> None:
    """Write OIDN's autoexposure scale of ``color`` into the device scalar ``scale_out``."""
    if engine != "triton":
        _torch_autoexposure(color, scale_out)
        return
    torch, tk = torch_ops.torch, launchers("io")
    nb_h = math.ceil(color.height / ae.MAX_BIN_SIZE)
    nb_w = math.ceil(color.width / ae.MAX_BIN_SIZE)
    bins = torch.empty(nb_h * nb_w, dtype=torch.float32, device=scale_out.device)
    tk.autoexposure_bins_kernel[(nb_h, nb_w)](
        color.tensor,
        color.offset,
        color.pixel_stride,
        color.row_stride,
        color.channels,
        color.height,
        color.width,
        nb_h,
        nb_w,
        bins,
        MAX_BIN=ae.MAX_BIN_SIZE,
        num_warps=BINS_WARPS,
    )
    tk.autoexposure_scale_kernel[(1,)](
        bins,
        nb_h * nb_w,
        scale_out,
        KEY=float(ae.KEY),
        EPS=float(ae.EPS),
        BLOCK=SCALE_BLOCK,
        num_warps=SCALE_WARPS,
    )


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
