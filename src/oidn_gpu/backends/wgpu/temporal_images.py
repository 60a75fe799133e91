"""A frame's images as `WgpuTemporalSession` checks and uploads them."""

from __future__ import annotations

from typing import Any

import numpy as np

from oidn_gpu.backends.base import TemporalFrame
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.checks import validate_images


def signature(frame: TemporalFrame, images: Any) -> tuple[Any, ...]:
    """What a frame continuing the history shares with the previous one."""
    return (
        images.height,
        images.width,
        *(a is not None for a in (frame.albedo, frame.normal, frame.depth)),
    )


def network_images(frame: TemporalFrame) -> Any:
    """The facade's validated images of the frame (what the network takes: its weights,
    mode and plan), checked for one size."""
    for name in ("motion", "depth"):
        image = getattr(frame, name)
        if image is not None and np.shape(image)[:2] != np.shape(frame.color)[:2]:
            raise InvalidArgumentError(
                f"the {name} image is {np.shape(image)[1]}x{np.shape(image)[0]}; expected the "
                f"color's size {np.shape(frame.color)[1]}x{np.shape(frame.color)[0]}"
            )
    return validate_images(
        *(
            None if a is None else dense(n, a)
            for n, a in (("color", frame.color), ("albedo", frame.albedo), ("normal", frame.normal))
        )
    )


def dense(name: str, array: np.ndarray) -> np.ndarray:
    """``array`` as the session uploads it: C-contiguous float32 ``[H, W, C]`` (C 3 for
    the images, 2 for motion, 1 for depth)."""
    arr = np.asarray(array, np.float32)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    want = {"motion": 2, "depth": 1}.get(name, 3)
    if arr.ndim != 3 or arr.shape[2] not in (1, want):
        raise InvalidArgumentError(
            f"the {name} image has shape {np.shape(array)}; expected HxWx{want}"
        )
    if arr.shape[2] != want:
        arr = np.broadcast_to(arr, (*arr.shape[:2], want))
    return np.ascontiguousarray(arr)


def keep_min(pixels: int, cut_threshold: float) -> int:
    """The least count of pixels with history for which a frame is no camera cut: the
    host test ``1 - count / pixels > cut_threshold`` (float64) holds exactly below it."""

    def cut(count: int) -> bool:
        return 1.0 - count / float(pixels) > cut_threshold

    count = min(max(int((1.0 - cut_threshold) * pixels) - 2, 0), pixels)
    while count > 0 and not cut(count - 1):
        count -= 1
    while count < pixels and cut(count):
        count += 1
    return count
