"""The tile the wgpu benchmark times its network on: the whole (aligned) image where the
device can bind its activations, else the largest square tile that it can, as
``oidn-gpu denoise --tile-size`` tiles a frame."""

from __future__ import annotations

from typing import Any

from oidn_gpu.errors import InvalidArgumentError, OutOfMemoryError


def network_tile(
    executor: Any, height: int, width: int, tile_size: int | None, alignment: int
) -> tuple[int, int, int | None]:
    """``(tile height, tile width, tile edge or None)`` of an aligned ``height x width``
    network input, its shape plan created on ``executor`` (`WgpuExecutor.prewarm`).

    ``tile_size``: the caller's tile edge (``--tile-size``), rounded up to ``alignment``.
    None: the whole image (edge None) where its largest activation buffer fits the
    device's storage-binding limit, else the edge shrunk by a quarter at a time until it
    fits (the edge is returned: the end-to-end runs tile with it).

    Raises:
        InvalidArgumentError: ``tile_size`` is not positive.
        OutOfMemoryError: no tile of at least ``2 * alignment`` px fits, or the
            caller's ``tile_size`` does not.
    """
    if tile_size is not None:
        if tile_size < 1:
            raise InvalidArgumentError(f"tile size {tile_size} px; expected a positive edge")
        edge = -(-tile_size // alignment) * alignment
        executor.prewarm([(min(edge, height), min(edge, width))])
        return min(edge, height), min(edge, width), edge
    edge = max(height, width)
    while True:
        try:
            executor.prewarm([(min(edge, height), min(edge, width))])
        except OutOfMemoryError:
            smaller = edge * 3 // 4 // alignment * alignment
            if smaller < 2 * alignment:
                raise
            edge = smaller
            continue
        whole = edge >= max(height, width)
        return min(edge, height), min(edge, width), None if whole else edge
