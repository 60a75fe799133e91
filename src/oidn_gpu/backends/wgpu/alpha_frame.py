"""A colour and its alpha denoised as one frame on the wgpu runner (`GpuDenoiser.run_with_alpha`).

The ``H x W x 4`` image is uploaded as it is, once: the colour's input pass reads its
first three channels, and its fourth is the alpha plane the alpha's work reads
(`GpuImage`'s pixel stride and offset). After the colour's tiles the runner queues,
on the same queue, ``alpha(plane, albedo)``: the alpha's fit and network
(`filter_alpha.alpha_on_device`: `GpuDenoiser.fit_alpha`, then the alpha denoiser's
runner, made on this device, into a plane of its own), and then that plane clipped to
0..1 into the result's fourth channel. The result (colour and alpha) and the frame's
scales come back in one read back, as an RGB frame's do: nothing else crosses to the
host.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from oidn_gpu.backends.frame_runner import host_frame
from oidn_gpu.backends.runners import DenoiseImages, Progress
from oidn_gpu.backends.wgpu.frames import GpuImage


def run_with_alpha(
    runner: Any,
    images: DenoiseImages,
    plan: Any,
    alpha: Callable[[Any, Any], Any],
    progress: Progress | None,
    autoexposure: bool,
) -> tuple[np.ndarray, float]:
    """``(denoised H x W x 4 image, input scale)`` of ``images`` (``main`` the colour
    with its alpha) on ``runner`` (a `GpuDenoiser`, its queue held); ``alpha(plane,
    albedo)`` queues the alpha's work on `GpuImage` planes and returns its result plane
    (see `AlphaRunner.run_with_alpha`)."""
    main = images.main
    if main.dtype != np.float32:  # the alpha's kernels read float32 planes
        main = main.astype(np.float32)
    host = host_frame(
        (main, images.albedo, images.normal),
        out_channels=images.out_channels,
        output=images.output,
        with_alpha=True,
    )

    def beside(uploaded: list[GpuImage], output: GpuImage) -> None:
        colour = uploaded[0]
        plane = dataclasses.replace(colour, channels=1, offset=colour.offset + colour.channels)
        albedo = uploaded[host.roles.index("albedo")] if "albedo" in host.roles else None
        denoised = alpha(plane, albedo)
        into = dataclasses.replace(output, channels=1, offset=output.offset + output.channels)
        runner.clip_into(denoised, into)

    pending = runner._submit_host(
        host, plan.mode, plan.tiles, autoexposure=autoexposure, progress=progress, beside=beside
    )
    result = runner._result(pending)
    scale = runner.last_input_scale if autoexposure else plan.mode.input_scale
    return result, scale
