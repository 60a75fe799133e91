"""Interactive denoising on the wgpu runner: one tile in flight, each rectangle reported.

`denoise_interactive` is `GpuDenoiser.denoise_interactive`'s work: the frame's images are
uploaded once, then each tile is submitted and its rows read back before the next one is
submitted, so a viewer can show the image as it is finished and cancel between tiles.
Tiles are `interactive_edge` pixels a side unless a plan is given; with a target time per
tile the edge is adapted from the tiles' median time (from the next call on). Any tiling
gives the same image (semantics section 6.3).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from oidn_gpu.backends.frame_runner import FrameRequest, HostFrame
from oidn_gpu.backends.plan import DenoiseOptions, plan_tiles
from oidn_gpu.backends.wgpu.frames import F32_BYTES, GpuImage, TileRect
from oidn_gpu.errors import CancelledError
from oidn_gpu.model import unet

TILE_ALIGNMENT = unet.DEFAULT_TILE_ALIGNMENT
MIN_INTERACTIVE_EDGE = 256  # px; below this the overlap dominates the work
MAX_INTERACTIVE_EDGE = 4096
DEFAULT_INTERACTIVE_EDGE = 512


def denoise_interactive(
    runner: Any,
    host: HostFrame,
    mode: Any,
    plan: Any,
    *,
    on_tile: Callable[[TileRect, np.ndarray], Any] | None,
    cancel: Callable[[], bool] | None,
    target_tile_ms: float | None,
) -> np.ndarray:
    """The checked ``host`` frame denoised on ``runner`` (a `GpuDenoiser`, its queue held)
    one tile at a time (see `GpuDenoiser.denoise_interactive`); ``plan`` None plans tiles
    of the runner's ``interactive_edge``."""
    height, width, channels = host.shape
    if plan is None:
        options = DenoiseOptions(tile_size=runner.interactive_edge)
        plan = plan_tiles(runner.executor.model, height, width, options)
    staging = runner._staging  # the runner's named buffers
    gpu_images = [
        staging.upload(f"input-{role}", array)
        for array, role in zip(host.arrays, host.roles, strict=True)
    ]
    out_bytes = height * width * channels * F32_BYTES
    output = GpuImage(staging.get("output", out_bytes), height, width, channels)
    result = np.zeros((height, width, channels), np.float32)
    times: list[float] = []
    count = len(plan.tiles)
    tile_set = runner._device_frame(
        FrameRequest(tuple(gpu_images), host.roles, output, channels, mode, plan)
    )
    row_bytes = width * channels * F32_BYTES
    # One tile in flight: submit, then wait for its rectangle.
    for index, tile in enumerate(plan.tiles):
        if cancel is not None and cancel():
            raise CancelledError("execution was cancelled")
        start = time.perf_counter()
        tile_set.submit(index)
        raw = runner._device.read_buffer(  # waits: one tile in flight at most
            output.buffer, tile.out_y * row_bytes, tile.out_h * row_bytes
        )
        elapsed = (time.perf_counter() - start) * 1e3
        times.append(elapsed)
        rows = np.frombuffer(raw, np.float32).reshape(tile.out_h, width, channels)
        result[tile.out_y : tile.out_y + tile.out_h, tile.out_x : tile.out_x + tile.out_w] = rows[
            :, tile.out_x : tile.out_x + tile.out_w
        ]
        rect = TileRect(index, count, tile.out_y, tile.out_x, tile.out_h, tile.out_w, elapsed)
        if on_tile is not None and on_tile(rect, result) is False:
            raise CancelledError("execution was cancelled by the tile callback")
    if target_tile_ms is not None and times:
        edge = adapted_edge(plan, float(np.median(times)), target_tile_ms)
        if edge is not None:
            runner.interactive_edge = edge
    return result


def adapted_edge(plan: Any, measured_ms: float, target_ms: float) -> int | None:
    """The tile edge that would take about ``target_ms`` where ``plan``'s tiles took
    ``measured_ms`` (tile work grows with the area), within the interactive bounds and a
    multiple of the tile alignment; None without a usable measurement."""
    if measured_ms <= 0 or target_ms <= 0:
        return None
    edge = max(plan.tile_h, plan.tile_w) * math.sqrt(target_ms / measured_ms)
    edge = min(max(edge, MIN_INTERACTIVE_EDGE), MAX_INTERACTIVE_EDGE)
    # int(): on NumPy 1.x, round() of a NumPy float (plan sizes may be NumPy ints) is a float
    units = int(round(edge / TILE_ALIGNMENT))  # noqa: RUF046 - see above
    return units * TILE_ALIGNMENT
