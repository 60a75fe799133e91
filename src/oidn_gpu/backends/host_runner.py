"""The host tile loop: a `TileRunner` for any `NetworkExecutor` that takes NumPy arrays.

Everything runs tile by tile, so a denoise holds no whole-image buffer besides the
caller's images and the result: each tile's read rectangle of the images goes through
input processing (`image.process.build_input`) straight into a zeroed tile buffer at its
alignment offset (OIDN's zero padding), the executor runs it, and its kept rectangle
goes through output processing (`image.process.finish_output`) straight into the
result. Both passes work pixel by pixel, so the image is the one a whole-image pass
gives, bit for bit, and `max_memory_mb` (which sizes the tiles) bounds the whole
denoise. A backend without device-side input/output passes gets this runner from
`Backend.create_runner`.
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
        """The denoised ``[H, W, out_channels]`` image; see `TileRunner.run`.

        Tiles are written into ``images.output`` when it is a scratch array
        (`DenoiseImages.output_is_scratch`) that shares no memory with an input (later
        tiles still read the input around their edges); else into a new float32 array,
        which is returned, so a cancelled run leaves the caller's output untouched.
        """
        mode = plan.mode
        tiles = plan.tiles
        process.check_input_sizes(images.main, images.albedo, images.normal)
        inputs = [a for a in (images.main, images.albedo, images.normal) if a is not None]
        output = images.output if images.output_is_scratch else None
        if output is None or any(np.may_share_memory(output, a) for a in inputs):
            output = np.empty((tiles.height, tiles.width, images.out_channels), np.float32)
        buffer = np.zeros((3 * len(inputs), tiles.tile_h, tiles.tile_w), np.float32)
        total = len(tiles.tiles)
        for done, tile in enumerate(tiles.tiles, start=1):
            rows = slice(tile.in_y, tile.in_y + tile.in_h)
            columns = slice(tile.in_x, tile.in_x + tile.in_w)
            albedo, normal = (
                None if a is None else a[rows, columns] for a in (images.albedo, images.normal)
            )
            buffer.fill(0.0)
            placed = buffer[:, tile.buf_y : tile.buf_y + tile.in_h, tile.buf_x :][:, :, : tile.in_w]
            process.build_input(images.main[rows, columns], albedo, normal, mode, out=placed)
            result = self.executor.run(buffer)
            kept = result[
                :, tile.src_y : tile.src_y + tile.out_h, tile.src_x : tile.src_x + tile.out_w
            ]
            rows = slice(tile.out_y, tile.out_y + tile.out_h)
            columns = slice(tile.out_x, tile.out_x + tile.out_w)
            # the output's channels past the result's (an alpha) are left untouched
            output[rows, columns, : images.out_channels] = process.finish_output(
                kept, mode, images.out_channels
            )
            report_progress(progress, done / total)
        return output

    def close(self) -> None:
        """Nothing to release: the tile buffer lives only during `run`."""
