"""The input pass of a tile as one Triton launch (`io_kernels.input_pass_kernel`):
the tile's rectangle of the images, any strides, 1-3 channels broadcast as OIDN does,
scaled, sanitized and transfer-encoded (main) or clamped (albedo, normal) into the padded
NHWC network input."""

from __future__ import annotations

from typing import Any

from oidn_gpu.backends.cuda.executor import transfer_id
from oidn_gpu.backends.cuda.images import DeviceImage
from oidn_gpu.backends.cuda.triton_loader import launchers

INPUT_BLOCK = 128  # pixels per program of the input pass


def input_pass(
    images: list[DeviceImage],
    tile: Any,
    mode: Any,
    scale: Any,
    out: Any,
    *,
    block: int = INPUT_BLOCK,
    join: bool = True,
) -> None:
    """Enqueue the Triton input pass of ``tile`` (its read rectangle of ``images`` at
    ``(tile.buf_y, tile.buf_x)``) into the NHWC network input ``out`` ``[H, W, C]``;
    ``join`` False sets the channels one select at a time (the same bits, slower)."""
    main = images[0]
    alb = images[1] if len(images) > 1 else main
    nrm = images[2] if len(images) > 2 else main
    height, width, channels = (int(v) for v in out.shape)
    launchers("io").input_pass_kernel[(-(-height * width // block),)](
        main.tensor,
        main.offset,
        main.pixel_stride,
        main.row_stride,
        main.channels,
        alb.tensor,
        alb.offset,
        alb.pixel_stride,
        alb.row_stride,
        alb.channels,
        nrm.tensor,
        nrm.offset,
        nrm.pixel_stride,
        nrm.row_stride,
        nrm.channels,
        scale,
        out,
        height,
        width,
        channels,
        tile.in_y,
        tile.in_x,
        tile.in_h,
        tile.in_w,
        tile.buf_y,
        tile.buf_x,
        IMAGES=len(images),
        TRANSFER=transfer_id(mode.transfer),
        HDR=bool(mode.hdr),
        SNORM=bool(mode.snorm),
        BLOCK=block,
        CHANNELS=channels,
        JOIN=join,
    )
