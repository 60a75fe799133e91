"""The host tile loop: a `TileRunner` for any `NetworkExecutor` that takes NumPy arrays.

Input processing (`image.process.build_input`) runs on the host for the whole
image; every tile of the plan is copied into a zeroed tile buffer at its
alignment offset (OIDN's zero padding), run through the executor, and its kept
rectangle is stitched into the network output; output processing
(`image.process.finish_output`) runs last. A backend without device-side
input/output passes gets this runner from `Backend.create_runner`.
"""

from __future__ import annotations

import numpy as np

from oidn_gpu.backends.base import DenoiseImages, NetworkExecutor, Progress
from oidn_gpu.backends.plan import DenoisePlan
from oidn_gpu.errors import CancelledError
from oidn_gpu.image import process


def report_progress(progress: Progress | None, fraction: float) -> None:
    """Call ``progress``; raise `CancelledError` when it returns False."""
    if progress is not None and progress(fraction) is False:
        raise CancelledError("execution was cancelled by the progress callback")


class HostTileRunner:
    """Runs a `DenoisePlan` tile by tile on ``executor`` with host-side processing.

    Args:
        executor: the network executor (not owned: `close` leaves it open).
    """

    def __init__(self, executor: NetworkExecutor) -> None:
        self.executor = executor

    def run(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> np.ndarray:
        """The denoised ``[H, W, out_channels]`` float32 image; see `TileRunner.run`."""
        mode = plan.mode
        tiles = plan.tiles
        x = process.build_input(images.main, images.albedo, images.normal, mode)
        height, width = x.shape[1:]
        y = np.empty((3, height, width), np.float32)
        total = len(tiles.tiles)
        buffer = np.zeros((x.shape[0], tiles.tile_h, tiles.tile_w), np.float32)
        for done, tile in enumerate(tiles.tiles, start=1):
            buffer.fill(0.0)
            buffer[:, tile.buf_y : tile.buf_y + tile.in_h, tile.buf_x : tile.buf_x + tile.in_w] = x[
                :, tile.in_y : tile.in_y + tile.in_h, tile.in_x : tile.in_x + tile.in_w
            ]
            result = self.executor.run(buffer)
            y[:, tile.out_y : tile.out_y + tile.out_h, tile.out_x : tile.out_x + tile.out_w] = (
                result[
                    :, tile.src_y : tile.src_y + tile.out_h, tile.src_x : tile.src_x + tile.out_w
                ]
            )
            report_progress(progress, done / total)
        return process.finish_output(y, mode, images.out_channels)

    def close(self) -> None:
        """Nothing to release: the tile buffers live only during `run`."""
