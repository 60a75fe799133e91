"""The facade's images: OIDN's checks of inputs and outputs, and the result stored back.

`validate_images` checks one call's color, albedo and normal as OIDN does (its
error messages), splitting the color's alpha off; `check_output` checks a given
output array; `make_runner_images` is what a `TileRunner` takes, with
`output_destination` the array it may write the result into; `store_result`
writes the result (and alpha) into the caller's array or a new one. The rest
serves `Denoiser.denoise_many`'s stream of frames.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from oidn_gpu.backends.base import DenoiseImages
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.image.checks import Images
from oidn_gpu.image.result_pool import ResultPool

Progress = Callable[[float], Any]


def check_output(output: Any, images: Images) -> np.ndarray | None:
    if output is None:
        return None
    if not isinstance(output, np.ndarray) or output.dtype not in (np.float32, np.float16):
        raise InvalidOperationError(
            "unsupported output image format: expected a float32 or float16 numpy array, "
            f"got {getattr(output, 'dtype', type(output).__name__)}"
        )
    check_output_shape(tuple(output.shape), images)
    if not output.flags.writeable:
        raise InvalidArgumentError("output array is read-only; pass a writeable array")
    return output


def check_output_shape(shape: tuple[int, ...], images: Images) -> None:
    """The output's size and channel count must be the main input's."""
    if len(shape) not in (2, 3):
        raise InvalidOperationError(f"unsupported output image format: shape {shape}")
    shape = shape if len(shape) == 3 else (*shape, 1)
    if shape[:2] != (images.height, images.width):
        raise InvalidOperationError(
            f"image size mismatch: output is {shape[1]}x{shape[0]}, "
            f"input is {images.width}x{images.height}"
        )
    if shape[2] != images.main_channels:
        raise InvalidOperationError(
            f"input/output image channel count mismatch: input has {images.main_channels}, "
            f"output has {shape[2]}"
        )


def make_runner_images(
    images: Images,
    out_channels: int,
    destination: np.ndarray | None = None,
    *,
    scratch: bool = True,
) -> DenoiseImages:
    """The images a `TileRunner` takes: the main one, and aux images given with color."""
    named = (("color", images.color), ("albedo", images.albedo), ("normal", images.normal))
    main_name, main = next((n, a) for n, a in named if a is not None)
    with_color = images.color is not None
    return DenoiseImages(
        main=main,
        albedo=images.albedo if with_color else None,
        normal=images.normal if with_color else None,
        out_channels=out_channels,
        output=destination,
        output_is_scratch=destination is not None and scratch,
        main_name=main_name,
    )


def output_destination(
    images: Images, out: np.ndarray | None, pool: ResultPool | None = None
) -> np.ndarray | None:
    """Where a runner may write the result itself (`DenoiseImages.output`): the output
    array (``HxWxC``), else for float16 inputs a new float16 array, so the result is
    converted while it is copied out; for a color with alpha and no output array an array
    of ``pool`` with room for the alpha (the runner writes the color channels, `store_result`
    the alpha), None without a pool (the alpha is appended afterwards); None for float32
    inputs without an output array (the runner makes the result: the cuda backend's come
    from a pool of pinned arrays, `backends.cuda.host_results`)."""
    shape = (images.height, images.width, images.main_channels)
    if images.alpha is not None:
        return pool.take(shape, images.dtype) if out is None and pool is not None else None
    if out is None:
        if images.dtype == np.float32:
            return None
        return np.empty(shape, images.dtype)
    return out if out.ndim == 3 else out[:, :, None]


class Peekable:
    """An iterator whose next item can be looked at without taking it."""

    def __init__(self, iterator: Iterator[Any]) -> None:
        self._iterator = iterator
        self._head: Any = None
        self._has_head = False

    def peek(self) -> Any:
        """The next item, or None at the end."""
        if not self._has_head:
            self._head = next(self._iterator, None)
            self._has_head = True
        return self._head

    def next(self) -> Any:
        item = self.peek()
        self._has_head = False
        return item


_END = object()


def locked(iterator: Iterator[Any], lock: Any) -> Iterator[Any]:
    """Yield the items of ``iterator``, each computed holding ``lock`` (not across a yield)."""
    while True:
        with lock:
            item = next(iterator, _END)
        if item is _END:
            return
        yield item


def frame_images(frame: Any) -> tuple[Any, Any, Any]:
    """``(color, albedo, normal)`` of one `Denoiser.denoise_many` item."""
    if isinstance(frame, Mapping):
        unknown = set(frame) - {"color", "albedo", "normal"}
        if unknown:
            raise InvalidArgumentError(
                f"unknown image name(s) {sorted(unknown)} in a frame; expected 'color', "
                "'albedo' and 'normal'"
            )
        return frame.get("color"), frame.get("albedo"), frame.get("normal")
    if isinstance(frame, tuple):
        if not 1 <= len(frame) <= 3:
            raise InvalidArgumentError(
                f"a frame tuple has {len(frame)} images; expected (color, albedo, normal)"
            )
        padded = (*frame, None, None)[:3]
        return padded[0], padded[1], padded[2]
    return frame, None, None


def scaled_progress(progress: Progress | None, start: float, span: float) -> Progress | None:
    if progress is None:
        return None
    return lambda fraction: progress(start + span * fraction)


def store_result(
    result: np.ndarray,
    images: Images,
    out: np.ndarray | None,
    destination: np.ndarray | None = None,
) -> np.ndarray:
    """Write the result (plus alpha) into ``out`` or a new array of the input's dtype;
    a result the runner already wrote into ``destination`` (see `output_destination`) is final."""
    if destination is not None and result is destination:
        if images.alpha is not None and out is None:  # the runner wrote the color channels
            result[:, :, -1] = images.alpha
        return out if out is not None else result
    if images.alpha is not None:
        result = np.concatenate([result, images.alpha[:, :, None].astype(np.float32)], axis=2)
    if out is None:
        return result.astype(images.dtype, copy=False)
    target = out if out.ndim == 3 else out[:, :, None]
    target[...] = result.astype(out.dtype, copy=False)
    return out
