"""The frame loop of the GPU runners: host images in, tiles on the device, the image out.

`FrameRunner` is the skeleton the wgpu runner (`backends.wgpu.runner.GpuDenoiser`)
and the cuda runner (`backends.cuda.runner.CudaDenoiser`) share. A frame of host
images goes, in this order:

1. `host_frame`: the argument checks (``[H, W, C]`` views, one size, the main image
   first, 1..3 output channels, a writeable float16/float32 destination);
2. the backend's upload of the images and its device output image;
3. `FrameRunner._run_device`: the device frame of this configuration (images,
   output, mode, plan) from the frames' LRU (`lru.LruCache`), built on first use
   and reused after (cuda captures it as a CUDA graph on its second use), then
   launched: `run_frame` queues the per-frame passes before the network (the
   autoexposure), every tile's input pass, network and output pass, and reports
   progress after each tile (a False from ``progress`` cancels);
4. work a caller queues beside the network (``beside``: cuda computes an alpha channel
   there, on a side stream, into the output's 4th channel);
5. the backend's read back (queued; `FrameRunner._result` waits for it).

What a backend supplies are the abstract primitives of `FrameRunner` and the
two passes of `TilePasses`; nothing here knows wgpu or torch.

Where later work lands:

- Per-frame device passes (the temporal mode: reproject the previous output before
  the network, update the history after it) go into `run_frame`, beside the
  autoexposure before the first tile and after the last tile; the buffers they
  keep between frames belong to the backend's device frame, so the LRU and close
  release them with it.
- Fused network kernels (cuda) replace the network call inside a backend's
  `TilePasses.tile_pass`; the loop, uploads, frames and read back stay as they are.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar

import numpy as np

from oidn_gpu.backends.base import Progress, image_as_hwc
from oidn_gpu.backends.host_runner import report_progress
from oidn_gpu.backends.lru import LruCache
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError

ROLES = ("main", "albedo", "normal")  # the input images, in network channel order
HOST_DTYPES = (np.float16, np.float32)

ImageT = TypeVar("ImageT")
FrameT = TypeVar("FrameT")
PendingT = TypeVar("PendingT")
FrameT_contra = TypeVar("FrameT_contra", contravariant=True)
RunnerT = TypeVar("RunnerT", bound="FrameRunner[Any, Any, Any]")


@dataclass(frozen=True)
class HostFrame:
    """The checked host images of one frame.

    Attributes:
        arrays: ``[H, W, C]`` float16/float32 views (C 1..3; the main image's C is 4 with
            ``with_alpha``), the main image first.
        roles: the `ROLES` of the arrays (``"main"`` first).
        out_channels: channels of the result (1..3), the alpha's not counted.
        output: the caller's destination (``[H, W, >= channels of shape]``), or None.
        with_alpha: the main image's 4th channel is an alpha that the result carries too
            (after its ``out_channels``), computed by work queued beside the network.
    """

    arrays: tuple[np.ndarray, ...]
    roles: tuple[str, ...]
    out_channels: int
    output: np.ndarray | None = None
    with_alpha: bool = False

    @property
    def height(self) -> int:
        return int(self.arrays[0].shape[0])

    @property
    def width(self) -> int:
        return int(self.arrays[0].shape[1])

    @property
    def shape(self) -> tuple[int, int, int]:
        """The result's ``(H, W, C)``: ``out_channels``, and the alpha with ``with_alpha``."""
        return self.height, self.width, self.out_channels + int(self.with_alpha)

    @property
    def target(self) -> np.ndarray | None:
        """The channels of `output` the result is written into (None without one)."""
        return None if self.output is None else self.output[:, :, : self.shape[2]]


def host_frame(
    images: Sequence[Any],
    *,
    out_channels: int | None = None,
    output: Any = None,
    convert: bool = True,
    with_alpha: bool = False,
) -> HostFrame:
    """Check the host images of a frame: ``(main, albedo, normal)``, None where absent.

    Args:
        images: the main image, then the optional albedo and normal (``HxW`` or
            ``HxWxC``, C 1..3).
        out_channels: channels of the result (default: the main image's).
        output: an ``[H, W, C]`` float16/float32 array (C at least ``out_channels``,
            plus one with ``with_alpha``; the channels past them are left untouched) the
            result is written into.
        convert: read dtypes other than float16/float32 as float32 (else reject them).
        with_alpha: the main image is ``HxWx4``, a colour and its alpha (`HostFrame`).

    Raises:
        InvalidArgumentError: a missing main image, a bad shape, dtype or size, a bad
            ``out_channels`` or destination.
    """
    if len(images) > len(ROLES):
        raise InvalidArgumentError(
            f"{len(images)} images were given; expected main, albedo and normal at most"
        )
    given = [(role, image) for role, image in zip(ROLES, images, strict=False) if image is not None]
    if not given or given[0][0] != ROLES[0]:
        raise InvalidArgumentError("the main image is missing; it comes first, then albedo, normal")
    if with_alpha:
        main = given[0][1]
        if not isinstance(main, np.ndarray) or main.ndim != 3 or main.shape[2] != 4:
            raise InvalidArgumentError(
                f"main image has shape {np.shape(main)}; expected HxWx4 (a colour and its alpha)"
            )
        given[0] = ("main", main[:, :, :3])
    arrays = tuple(_as_hwc(image, role, convert) for role, image in given)
    if with_alpha:
        arrays = (main if main.dtype in HOST_DTYPES else main.astype(np.float32), *arrays[1:])
    height, width = arrays[0].shape[:2]
    for array in arrays[1:]:
        if array.shape[:2] != (height, width):
            raise InvalidArgumentError(
                f"image size {array.shape[0]}x{array.shape[1]} differs from the main "
                f"input's {height}x{width}"
            )
    channels = out_channels if out_channels is not None else min(3, int(arrays[0].shape[2]))
    check_out_channels(channels)
    if output is not None:
        check_destination(output, (height, width, channels + int(with_alpha)))
    return HostFrame(arrays, tuple(role for role, _ in given), channels, output, with_alpha)


def check_out_channels(channels: int) -> None:
    """``channels`` is a result's channel count: 1, 2 or 3."""
    if (
        isinstance(channels, bool)
        or not isinstance(channels, (int, np.integer))
        or not (1 <= channels <= 3)
    ):
        raise InvalidArgumentError(f"out_channels is {channels}; expected 1, 2 or 3")


def check_destination(output: Any, shape: tuple[int, int, int]) -> None:
    """``output`` can take a result of ``shape``: a writeable float16/float32 NumPy array
    of that height and width with at least its channels."""
    if not isinstance(output, np.ndarray) or output.dtype not in HOST_DTYPES:
        raise InvalidArgumentError(
            "output must be a float32 or float16 NumPy array, got "
            f"{getattr(output, 'dtype', type(output).__name__)}"
        )
    height, width, channels = shape
    if output.ndim != 3 or output.shape[:2] != (height, width) or output.shape[2] < channels:
        raise InvalidArgumentError(
            f"output has shape {output.shape}; expected {shape} (more channels are left as "
            "they are)"
        )
    if not output.flags.writeable:
        raise InvalidArgumentError("output array is read-only; pass a writeable array")


def _as_hwc(image: Any, name: str, convert: bool) -> np.ndarray:
    arr = image_as_hwc(image, name)
    if arr.dtype in HOST_DTYPES:
        return arr
    if not convert:
        raise InvalidArgumentError(
            f"{name} image has dtype {arr.dtype}; expected float16 or float32"
        )
    return arr.astype(np.float32)


class FrameRequest(NamedTuple, Generic[ImageT]):
    """One frame asked of a device: its device images, output and how to denoise them
    (a named tuple: one is made per frame, and a tuple is the cheapest to make).

    Attributes:
        images: the device images, the main image first.
        roles: their `ROLES`.
        output: the device image the result is written into; None: the frame's own.
        out_channels: channels of the result (1..3).
        mode: the `image.process.Mode` (transfer, hdr, snorm, scales).
        plan: the `image.tiling.TilePlan` of the image size.
        autoexposure: compute the input scale on the device (``mode.input_scale`` unused).
    """

    images: tuple[ImageT, ...]
    roles: tuple[str, ...]
    output: ImageT | None
    out_channels: int
    mode: Any
    plan: Any
    autoexposure: bool = False


class TilePasses(Protocol[FrameT_contra]):
    """The device passes of one frame, queued by `run_frame` (nothing waits for them)."""

    def autoexposure_pass(self, frame: FrameT_contra) -> None:
        """Queue OIDN's autoexposure of the frame's main image into its input scale."""
        ...

    def tile_pass(self, frame: FrameT_contra, index: int) -> None:
        """Queue tile ``index``: its input pass, the network and its output pass."""
        ...


AfterTile = Callable[[int, int], None]


def run_frame(
    passes: TilePasses[FrameT],
    frame: FrameT,
    tile_count: int,
    *,
    autoexposure: bool,
    after_tile: AfterTile | None = None,
) -> None:
    """Queue one frame: per-frame passes before the network, then every tile.

    Args:
        passes: the backend's passes.
        frame: the backend's device frame (what its passes bind).
        tile_count: tiles of the frame's plan.
        autoexposure: queue the autoexposure before the first tile.
        after_tile: called with ``(tiles queued, tile_count)`` after each tile (progress,
            cancel, a background compile's stop); it may raise to stop the frame.
    """
    # Per-frame passes before the network: the autoexposure, and the temporal mode's
    # reprojection of the previous output (see the module docstring).
    if autoexposure:
        passes.autoexposure_pass(frame)
    for index in range(tile_count):
        passes.tile_pass(frame, index)
        if after_tile is not None:
            after_tile(index + 1, tile_count)
    # Per-frame passes after the network (the temporal mode's history update) go here.


def progress_after_tile(progress: Progress | None) -> AfterTile | None:
    """An ``after_tile`` reporting the queued fraction to ``progress``; its False cancels
    (`CancelledError`)."""
    if progress is None:
        return None

    def report(done: int, count: int) -> None:
        report_progress(progress, done / count)

    return report


class FrameRunner(ABC, Generic[ImageT, FrameT, PendingT]):
    """The skeleton of a GPU runner: open state, the frames' LRU, the host frame order.

    Args:
        frame_cache_size: how many per-configuration device frames to keep.
    """

    closed_message: ClassVar[str] = "the denoiser is closed"

    def __init__(self, frame_cache_size: int) -> None:
        self._closed = False
        self._frames: LruCache[Hashable, FrameT] = LruCache(frame_cache_size, self._release_frame)

    # ------------------------------------------------------------------ the primitives

    @abstractmethod
    def _upload_frame(self, frame: HostFrame, slot: str) -> list[ImageT]:
        """Queue the upload of the frame's images into the device images of ``slot``."""

    @abstractmethod
    def _output_image(self, frame: HostFrame, slot: str) -> ImageT:
        """The device image of ``slot`` the frame's result is written into."""

    @abstractmethod
    def _frame_entry(self, request: FrameRequest[ImageT]) -> tuple[Hashable, Callable[[], FrameT]]:
        """``(key, build)`` of the device frame of this configuration; also sets the
        frame's fixed input scale on the device (unless ``request.autoexposure``)."""

    def _reuse_frame(self, frame: FrameT) -> None:
        """A cached frame is used again (before `_launch`)."""

    def _release_frame(self, frame: FrameT) -> None:
        """The LRU evicted ``frame`` (release what it holds once the device is done)."""

    @abstractmethod
    def _launch(self, frame: FrameT, autoexposure: bool, progress: Progress | None) -> None:
        """Queue the frame on the device (`run_frame`, or a replay of it)."""

    @abstractmethod
    def _read_back(
        self, frame: HostFrame, output: ImageT, slot: str, upload_ms: float, submit_ms: float
    ) -> PendingT:
        """Queue the copy of the result to the host (``upload_ms``, ``submit_ms``: the host
        times of the upload and of queueing the frame)."""

    @abstractmethod
    def _result(self, pending: PendingT) -> np.ndarray:
        """Wait for a read back and return the result (the destination, when given)."""

    def _mark(self) -> Any:
        """A mark of the work queued so far, for `_queue_beside` (taken before the
        frame's network is queued)."""
        return None

    def _queue_beside(self, work: Callable[[], None], mark: Any) -> None:
        """Queue ``work`` beside the frame's network: from ``mark`` on, before the read
        back (this form: after the network)."""
        work()

    # ------------------------------------------------------------------ the frame order

    def _submit_host(
        self,
        frame: HostFrame,
        mode: Any,
        plan: Any,
        *,
        autoexposure: bool,
        progress: Progress | None,
        slot: str = "",
        beside: Callable[[list[ImageT], ImageT], None] | None = None,
    ) -> PendingT:
        """Upload, run and read back one host frame (`_result` waits for it).

        ``beside(images, output)`` queues work on the device images (by `HostFrame.roles`)
        and output beside the frame's network, before the read back (`_queue_beside`):
        with `HostFrame.with_alpha` it writes the output's alpha channel.
        """
        start = time.perf_counter()
        images = self._upload_frame(frame, slot)
        uploaded = time.perf_counter()
        output = self._output_image(frame, slot)
        request = FrameRequest(
            tuple(images), frame.roles, output, frame.out_channels, mode, plan, autoexposure
        )
        mark = self._mark() if beside is not None else None
        self._run_device(request, progress)
        if beside is not None:
            self._queue_beside(lambda: beside(images, output), mark)
        submitted = time.perf_counter()
        upload_ms, submit_ms = (uploaded - start) * 1e3, (submitted - uploaded) * 1e3
        return self._read_back(frame, output, slot, upload_ms, submit_ms)

    def _run_device(self, request: FrameRequest[ImageT], progress: Progress | None) -> FrameT:
        """Queue one frame on device images: its cached device frame, launched."""
        frame = self._device_frame(request)
        self._launch(frame, request.autoexposure, progress)
        return frame

    def _device_frame(self, request: FrameRequest[ImageT]) -> FrameT:
        """The device frame of this configuration: cached, or built (evicting the least
        recently used one first)."""
        key, build = self._frame_entry(request)
        frame = self._frames.get(key)
        if frame is None:
            self._frames.make_room()
            frame = build()
            self._frames.put(key, frame)
        else:
            self._reuse_frame(frame)
        return frame

    # ------------------------------------------------------------------ lifetime

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidOperationError(self.closed_message)

    def close(self) -> None:
        """Release what the runner owns (not the executor); idempotent: the work in flight
        is drained first (`_drain`), then the frames are dropped, then the rest
        (`_release`)."""
        if self._closed:
            return
        self._closed = True
        self._drain()
        self._frames.clear()
        self._release()

    def _drain(self) -> None:
        """Stop or wait for the work in flight before `close` drops the frames."""

    def _release(self) -> None:
        """Release the runner's own buffers at `close` (after the frames)."""

    def __enter__(self: RunnerT) -> RunnerT:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
