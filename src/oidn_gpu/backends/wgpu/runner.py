"""The GPU denoise pipeline: per tile an input pass, the network and an output pass, one queue.

After oidn-webgpu's ``recordDenoiseExecution``. For every tile of a
`image.tiling.TilePlan`, one command encoder records

1. the input pass (`kernels.io_passes.generate_input_pass`): the tile's image
   rectangle is read from float32 image buffers (any pixel/row stride, 1-3
   channels broadcast as OIDN does), scaled by the frame's ``input_scale``, sanitized,
   transfer-encoded (main image) or clamped (albedo, normal), and packed into
   the network input tensor at the tile's alignment offset; every other tensor
   element is an exact zero in network space, which is OIDN's bottom/right
   padding (semantics 4.7, 6.3) - nothing is clamped-to-edge into the padding;
2. the network (`WgpuExecutor.encode`) at the plan's tile size;
3. the output pass (`kernels.io_passes.generate_output_pass`): the kept
   rectangle's inverse transfer, clamps, 1-channel average, snorm and output
   scale, written into the output image; channels beyond ``out_channels``
   (alpha) are left untouched.

and is submitted at once; tiles follow each other on the one queue without host
synchronization. The scales are not part of a tile's params: each denoiser owns
one ``frame`` uniform (`kernels.spec.FRAME_PARAMS`: ``input_scale``, then
``output_scale``), written with ``queue.write_buffer`` before the tiles of a
frame whose scales differ from the previous frame's (a new buffer starts with the
first frame's values), and bound by every tile. Queue writes are ordered with
submits, so frames in flight keep their scale. A recorded program therefore has
one buffer a host rewrites per frame (autoexposure) before replaying.

With ``autoexposure=True`` (HDR without an ``input_scale``) the frame's scales
are computed on the GPU from the uploaded colour image before the first tile
(`kernels.autoexposure`: per-bin averages, then the log-average, written into
the frame buffer, which is a storage buffer too), with no host round trip; the
scale is read back with the output (`last_input_scale`).

`GpuDenoiser` is the wgpu backend's `backends.base.TileRunner`: `run` takes a
`backends.plan.DenoisePlan`. `GpuDenoiser.denoise` works on host arrays (upload,
all tiles, one readback);
`denoise_buffers` works on caller-owned GPU buffers and does not wait;
`denoise_interactive` keeps at most one tile in flight, reports each finished
rectangle, can be cancelled between tiles, and can size tiles to hit a target
time per tile (the next call uses the adapted size; any tiling gives the same
image, section 6.3).
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu.backends.base import DenoiseImages, Progress, image_as_hwc
from oidn_gpu.backends.gpu_device import STORAGE_USAGE, BufferUsage, DeferredRelease
from oidn_gpu.backends.plan import DenoiseOptions, DenoisePlan, plan_tiles
from oidn_gpu.backends.wgpu.executor import WgpuExecutor
from oidn_gpu.backends.wgpu.resources import BUFFER, ResourceTracker
from oidn_gpu.errors import CancelledError, InvalidArgumentError, InvalidOperationError
from oidn_gpu.image.host_copy import parallel_copyto
from oidn_gpu.kernels import autoexposure as gpu_autoexposure
from oidn_gpu.kernels import io_passes
from oidn_gpu.kernels.spec import FRAME_PARAMS, Kernel, Precision
from oidn_gpu.model import unet

TILE_ALIGNMENT = unet.DEFAULT_TILE_ALIGNMENT
MIN_INTERACTIVE_EDGE = 256  # px; below this the overlap dominates the work
MAX_INTERACTIVE_EDGE = 4096
DEFAULT_INTERACTIVE_EDGE = 512
# (buffers, plan) combinations whose per-tile bind groups a denoiser keeps.
TILE_SET_CACHE_SIZE = 4
F32_BYTES = 4
# The frame uniform (input and output scale), also written by the autoexposure kernel.
FRAME_USAGE = BufferUsage.UNIFORM | STORAGE_USAGE
SCALE_BYTES = 2 * F32_BYTES  # the frame's two scales, read back after the output
# How host images reach the GPU: "mapped" (persistent MAP_WRITE staging buffers filled by
# parallel copies, then copied on the GPU) or "queue" (``queue.write_buffer``, which
# allocates and fills a fresh staging buffer per call). Devices without upload buffers
# (a recording device) always use queue writes.
UPLOAD_MODES = ("mapped", "queue")
UPLOAD_VARIABLE = "OIDN_GPU_UPLOAD"

_ROLES = (io_passes.ImageRole.MAIN, io_passes.ImageRole.ALBEDO, io_passes.ImageRole.NORMAL)


def _queue_turn(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run a method holding its device's queue lock (see `GpuDevice.queue_lock`)."""

    @functools.wraps(method)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._device.queue_lock:
            return method(self, *args, **kwargs)

    return locked


@dataclass(frozen=True)
class GpuImage:
    """An image in a GPU buffer (STORAGE usage; COPY_SRC to read it back).

    Strides and offset are in elements of ``dtype`` (``"float32"``, or ``"float16"``
    for inputs: the input pass and autoexposure widen halves on the GPU; outputs are
    float32); defaults describe a dense ``[height, width, channels]`` image. Only the
    first ``channels`` (1..3) values of a pixel are read or written, so RGBA data with
    ``pixel_stride=4, channels=3`` keeps its alpha.
    """

    buffer: Any
    height: int
    width: int
    channels: int = 3
    pixel_stride: int | None = None
    row_stride: int | None = None
    offset: int = 0
    dtype: str = "float32"

    @property
    def element_bytes(self) -> int:
        return 2 if self.dtype == "float16" else F32_BYTES

    @property
    def pixel_stride_elems(self) -> int:
        return self.pixel_stride if self.pixel_stride is not None else self.channels

    @property
    def row_stride_elems(self) -> int:
        if self.row_stride is not None:
            return self.row_stride
        return self.width * self.pixel_stride_elems

    def check(self, what: str) -> None:
        if self.dtype not in ("float32", "float16"):
            raise InvalidArgumentError(
                f"{what} image has dtype {self.dtype!r}; expected 'float32' or 'float16'"
            )
        if not 1 <= self.channels <= 3:
            raise InvalidArgumentError(
                f"{what} image has {self.channels} channels; expected 1 to 3"
            )
        if self.pixel_stride_elems < self.channels:
            raise InvalidArgumentError(f"{what} image: pixel stride is smaller than pixel size")
        if self.row_stride_elems < self.width * self.pixel_stride_elems:
            raise InvalidArgumentError(
                f"{what} image: row stride is smaller than width * pixel stride"
            )
        last = (
            self.offset
            + (self.height - 1) * self.row_stride_elems
            + (self.width - 1) * self.pixel_stride_elems
            + self.channels
        )
        size = int(getattr(self.buffer, "size", 0))
        if last * self.element_bytes > size:
            raise InvalidArgumentError(
                f"{what} image needs {last * self.element_bytes} bytes but its buffer has {size}"
            )

    def params(self, prefix: str) -> dict[str, int]:
        return {
            f"{prefix}_offset": self.offset,
            f"{prefix}_pixel_stride": self.pixel_stride_elems,
            f"{prefix}_row_stride": self.row_stride_elems,
            f"{prefix}_channels": self.channels,
        }


@dataclass(frozen=True)
class TileRect:
    """A finished rectangle of the output image (interactive mode)."""

    index: int
    count: int
    y: int
    x: int
    height: int
    width: int
    elapsed_ms: float


class GpuDenoiser:
    """Runs whole denoises (input pass, network, output pass per tile) on one executor.

    Args:
        executor: the network executor; its device runs everything.
    """

    def __init__(self, executor: WgpuExecutor) -> None:
        self.executor = executor
        self._device = executor.device
        self._resources = ResourceTracker()
        # Buffers dropped while work recorded with them may still be in flight.
        self._pending: DeferredRelease[list[Any]] = DeferredRelease(
            self._device, self._release_buffers
        )
        self._staging: dict[tuple[str, int], Any] = {}
        self.upload_mode = _upload_mode()
        self._frame: Any = None  # the frame uniform (FRAME_PARAMS), made by the first frame
        # Kernels and pipelines per (roles, transfer, hdr, snorm), and per-tile uniforms and
        # bind groups per (buffers, plan): a repeated denoise only encodes and submits.
        self._passes: dict[tuple[Any, ...], _Passes] = {}
        self._tile_sets: OrderedDict[tuple[Any, ...], _TileSet] = OrderedDict()
        self._frame_data = b""  # its contents as last written by the host
        # Autoexposure kernels and their per-image bind groups (one image layout kept).
        self._ae_pipelines: dict[str, tuple[Kernel, Any, Kernel, Any]] = {}
        # (image, frame, dtype) -> (bins group, scale group, uniforms, bins buffer)
        self._ae_bindings: OrderedDict[tuple[Any, ...], tuple[Any, Any, list[Any], Any]] = (
            OrderedDict()
        )
        self.last_input_scale: float | None = None
        # Host-side times (ms) of the last `denoise`: "upload" (the images copied into
        # staging memory and their GPU copies submitted), "submit" (encoding and
        # submitting every pass), "wait" (until the GPU finished), "readback" (the copy of
        # the mapped result into the array), "remap" (requesting the upload buffers'
        # mapping for the next frame).
        self.last_host_ms: dict[str, float] = {}
        self._closed = False
        self.interactive_edge = DEFAULT_INTERACTIVE_EDGE

    # ------------------------------------------------------------------ kernels

    def _input_kernel(
        self,
        roles: tuple[io_passes.ImageRole, ...],
        mode: Any,
        dtypes: tuple[str, ...] | None = None,
    ) -> Kernel:
        channels = 3 * len(roles)
        if channels != self.executor.input_channels:
            raise InvalidArgumentError(
                f"the network takes {self.executor.input_channels} input channels but "
                f"{len(roles)} image(s) were given"
            )
        spec = io_passes.InputPassSpec(
            images=roles,
            precision=self.executor.precision,
            transfer=mode.transfer,
            hdr=bool(mode.hdr),
            snorm=bool(mode.snorm),
            dtypes=dtypes if dtypes is not None and "float16" in dtypes else None,
        )
        return io_passes.generate_input_pass(spec)

    def _output_kernel(self, mode: Any) -> Kernel:
        spec = io_passes.OutputPassSpec(
            transfer=mode.transfer,
            hdr=bool(mode.hdr),
            snorm=bool(mode.snorm),
            precision=Precision.FP32,
            channels=self.executor.output_channels,
        )
        return io_passes.generate_output_pass(spec)

    def _passes_for(
        self,
        roles: tuple[io_passes.ImageRole, ...],
        mode: Any,
        dtypes: tuple[str, ...] | None = None,
    ) -> _Passes:
        """The input and output pass kernels and pipelines of ``mode`` (generated once)."""
        key = (roles, mode.transfer, bool(mode.hdr), bool(mode.snorm), dtypes)
        passes = self._passes.get(key)
        if passes is None:
            cache = self.executor.pipeline_cache
            checks = self.executor.shader_checks
            input_kernel = self._input_kernel(roles, mode, dtypes)
            output_kernel = self._output_kernel(mode)
            passes = _Passes(
                input_kernel,
                output_kernel,
                cache.get(input_kernel, shader_checks=checks),
                cache.get(output_kernel, shader_checks=checks),
            )
            self._passes[key] = passes
        return passes

    def release_bindings(self) -> None:
        """Forget the cached per-tile bind groups (and free their uniforms once idle).

        `denoise_buffers` keeps the bind groups of its last few (buffers, plan)
        combinations so that repeated frames only encode and submit; call this before
        destroying a buffer that was passed to it.
        """
        while self._tile_sets:
            _, tile_set = self._tile_sets.popitem(last=False)
            self._retire(tile_set.uniforms)

    def prepare(self, mode: Any, roles: Sequence[io_passes.ImageRole] | None = None) -> None:
        """Compile the input and output passes of ``mode`` (and the network, and for HDR
        modes the float32 autoexposure) ahead of use."""
        roles = tuple(roles) if roles is not None else _ROLES[: self.executor.input_channels // 3]
        kernels = [self._input_kernel(roles, mode), self._output_kernel(mode)]
        self.executor.prepare()
        self.executor.pipeline_cache.prepare(kernels, shader_checks=self.executor.shader_checks)
        if mode.hdr:
            self._autoexposure_kernels("float32")

    # ------------------------------------------------------------------ entry points

    def run(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> np.ndarray:
        """`TileRunner.run`: `denoise` of host images over a `DenoisePlan`."""
        return self.denoise(
            images.main,
            images.albedo,
            images.normal,
            mode=plan.mode,
            plan=plan.tiles,
            out_channels=images.out_channels,
            progress=progress,
            output=images.output,
        )

    def run_autoexposed(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> tuple[np.ndarray, float]:
        """`AutoexposureRunner.run_autoexposed`: `denoise` with ``autoexposure=True``."""
        result = self.denoise(
            images.main,
            images.albedo,
            images.normal,
            mode=plan.mode,
            plan=plan.tiles,
            out_channels=images.out_channels,
            progress=progress,
            autoexposure=True,
            output=images.output,
        )
        assert self.last_input_scale is not None
        return result, self.last_input_scale

    def run_many(
        self, frames: Iterable[DenoiseImages], plan: DenoisePlan, *, autoexposure: bool = False
    ) -> Iterator[tuple[np.ndarray, float]]:
        """`SequenceRunner.run_many`: `denoise_many` of host images over a `DenoisePlan`
        (every frame with ``out_channels`` of the first)."""
        source = iter(frames)
        first = next(source, None)
        if first is None:
            return
        images = ((f.main, f.albedo, f.normal, f.output) for f in itertools.chain((first,), source))
        results = self.denoise_many(
            images,
            mode=plan.mode,
            plan=plan.tiles,
            out_channels=first.out_channels,
            autoexposure=autoexposure,
        )
        for result in results:
            assert self.last_input_scale is not None
            yield result, self.last_input_scale

    @_queue_turn
    def denoise(
        self,
        main: np.ndarray,
        albedo: np.ndarray | None = None,
        normal: np.ndarray | None = None,
        *,
        mode: Any,
        plan: Any,
        out_channels: int | None = None,
        progress: Callable[[float], Any] | None = None,
        autoexposure: bool = False,
        output: np.ndarray | None = None,
    ) -> np.ndarray:
        """Denoise host images; returns ``[H, W, out_channels]`` float32, or ``output``.

        Args:
            main: the main input (color, or the aux image filtered alone), ``HxW`` or
                ``HxWxC`` (C 1..3), float32 or float16; uploaded as it is (strided
                views too), the GPU converts.
            albedo, normal: auxiliary images given alongside color (network order).
            mode: an `image.process.Mode` (transfer, hdr, snorm, input_scale, output_scale).
            plan: an `image.tiling.TilePlan` for this image size.
            out_channels: channels of the result (default: the main image's).
            progress: called with the submitted fraction after each tile; returning
                False cancels (`CancelledError`) before any result is read back.
            autoexposure: compute OIDN's autoexposure scale of ``main`` on the GPU
                (``mode.input_scale`` is then ignored); `last_input_scale` holds it
                after the call.
            output: an ``[H, W, out_channels]`` float32 or float16 array (any strides) the
                result is copied into straight from the mapped readback memory (float16
                rounded as ``astype`` rounds) and returned; written only once the GPU
                finished, so a cancelled or failed call leaves it untouched. When the
                autoexposure scale is 0 and ``output`` overlaps ``main``, a new float32
                array is returned instead and ``output`` is left as it is (the input stays
                readable, e.g. to count its non-finite pixels).
        """
        self._check_open()
        frame = self._submit_frame(
            (main, albedo, normal, output), mode, plan, out_channels, progress, autoexposure,
            slot="",
        )  # fmt: skip
        return self._finish_frame(frame)

    def denoise_many(
        self,
        frames: Iterable[Sequence[np.ndarray | None]],
        *,
        mode: Any,
        plan: Any,
        out_channels: int | None = None,
        autoexposure: bool = False,
    ) -> Iterator[np.ndarray]:
        """Denoise a sequence of frames, yielding each result (as `denoise` returns it).

        Each item of ``frames`` is ``(main, albedo, normal)`` (None for absent images),
        all of ``plan``'s size, optionally followed by an ``output`` array (as in
        `denoise`). Frame ``i + 1`` is uploaded and submitted before frame
        ``i`` is read back, so its upload overlaps the GPU's work on frame ``i`` and the
        GPU works on it while frame ``i`` is copied out (two sets of buffers in turn).
        `last_input_scale` is the scale of the frame last yielded. The device's queue
        is taken per frame, not across the ``yield``.
        """
        pending: _PendingFrame | None = None
        for index, images in enumerate(frames):
            with self._device.queue_lock:
                self._check_open()
                submitted = self._submit_frame(
                    tuple(images), mode, plan, out_channels, None, autoexposure,
                    slot=f"/{index % 2}",
                )  # fmt: skip
            if pending is not None:
                yield self._finish_locked(pending)
            pending = submitted
        if pending is not None:
            yield self._finish_locked(pending)

    def _finish_locked(self, frame: _PendingFrame) -> np.ndarray:
        with self._device.queue_lock:
            return self._finish_frame(frame)

    def _submit_frame(
        self,
        images: tuple[np.ndarray | None, ...],
        mode: Any,
        plan: Any,
        out_channels: int | None,
        progress: Callable[[float], Any] | None,
        autoexposure: bool,
        *,
        slot: str,
    ) -> _PendingFrame:
        """Upload one frame into the buffers of ``slot``, submit its passes and the copy of
        its result (and scales) into a mapped readback buffer; does not wait."""
        if len(images) > 4:
            raise InvalidArgumentError(
                f"a frame has {len(images)} arrays; expected (main, albedo, normal[, output])"
            )
        padded = (*images, None, None, None)[:4]
        destination = padded[3]
        roles = tuple(r for r, a in zip(_ROLES, padded[:3], strict=True) if a is not None)
        arrays = [
            _as_hwc(a, r.value) for r, a in zip(_ROLES, padded[:3], strict=True) if a is not None
        ]
        if not arrays or roles[0] is not _ROLES[0]:
            raise InvalidArgumentError("the main image is missing")
        height, width = arrays[0].shape[:2]
        for arr in arrays:
            if arr.shape[:2] != (height, width):
                raise InvalidArgumentError("image size mismatch")
        channels = out_channels if out_channels is not None else arrays[0].shape[2]
        if destination is not None:
            _check_destination(destination, (height, width, channels))
        start = time.perf_counter()
        uploads: list[Any] = []
        gpu_images = [
            self._upload(f"input-{role.value}{slot}", arr, uploads)
            for arr, role in zip(arrays, roles, strict=True)
        ]
        uploaded = time.perf_counter()
        out_bytes = height * width * channels * F32_BYTES
        # The frame's scales are copied behind the pixels, so one readback brings both.
        output = GpuImage(
            self._staging_buffer(f"output{slot}", out_bytes + SCALE_BYTES), height, width, channels
        )
        self._run_tiles(
            gpu_images, roles, output, mode, plan, progress=progress, autoexposure=autoexposure
        )
        # A mapped readback buffer kept across frames: one copy from it into the result.
        readback = self._staging_buffer(
            f"readback{slot}", out_bytes + SCALE_BYTES, BufferUsage.MAP_READ | BufferUsage.COPY_DST
        )
        encoder = self._device.create_command_encoder("oidn/frame/readback")
        encoder.copy_buffer(self._frame, 0, output.buffer, out_bytes, SCALE_BYTES)
        encoder.copy_buffer(output.buffer, 0, readback, 0, out_bytes + SCALE_BYTES)
        self._device.submit([encoder.finish()])
        return _PendingFrame(
            readback,
            (height, width, channels),
            upload_ms=(uploaded - start) * 1e3,
            submit_ms=(time.perf_counter() - uploaded) * 1e3,
            destination=destination,
            main=arrays[0],
            uploads=tuple(uploads),
        )

    def _finish_frame(self, frame: _PendingFrame) -> np.ndarray:
        """Wait for a submitted frame and copy its result out of the mapped buffer (into
        the frame's destination array when it has one)."""
        height, width, channels = frame.shape
        pixels = height * width * channels
        start = time.perf_counter()
        results: list[np.ndarray] = []
        scales: list[float] = []

        def copy_out(mapped: np.ndarray) -> None:
            values = mapped.view(np.float32)
            scale = float(values[pixels])
            target = frame.destination
            if target is None or (scale == 0.0 and np.may_share_memory(target, frame.main)):
                target = np.empty((height, width, channels), np.float32)
            parallel_copyto(target, values[:pixels].reshape(height, width, channels))
            results.append(target)
            scales.append(scale)

        waited = self._device.read_mapped_with(
            frame.readback, pixels * F32_BYTES + F32_BYTES, copy_out
        )
        copied = time.perf_counter()
        # The GPU is done with this frame: request the mapping of its upload buffers for
        # the next frame now, so that it is ready without waiting then.
        for buffer in frame.uploads:
            self._device.map_for_write(buffer, wait=False)
        self.last_host_ms = {
            "upload": frame.upload_ms,
            "submit": frame.submit_ms,
            "wait": waited * 1e3,
            "readback": (copied - start - waited) * 1e3,
            "remap": (time.perf_counter() - copied) * 1e3,
        }
        self.last_input_scale = scales[0]
        return results[0]

    @_queue_turn
    def denoise_buffers(
        self,
        images: Sequence[GpuImage],
        output: GpuImage,
        *,
        mode: Any,
        plan: Any,
        progress: Callable[[float], Any] | None = None,
        autoexposure: bool = False,
    ) -> None:
        """Denoise GPU-resident images into ``output``; submits and returns without waiting.

        ``images`` are the main image then the auxiliary ones (albedo, normal) the
        network takes. With ``autoexposure`` the input scale is OIDN's autoexposure
        of the main image, computed on the GPU before the tiles (`frame_buffer`
        holds it afterwards). In-place use (``output.buffer`` is an input's buffer) is
        rejected for plans with several tiles, as later tiles would read pixels that
        earlier tiles already overwrote.
        """
        self._check_open()
        roles = _ROLES[: len(images)]
        for image, role in zip(images, roles, strict=False):
            image.check(role.value)
        output.check("output")
        if len(plan.tiles) > 1 and any(img.buffer is output.buffer for img in images):
            raise InvalidArgumentError(
                "in-place GPU denoising with several tiles needs a separate output buffer"
            )
        self._run_tiles(
            list(images), tuple(roles), output, mode, plan, progress=progress,
            autoexposure=autoexposure,
        )  # fmt: skip

    @_queue_turn
    def denoise_interactive(
        self,
        main: np.ndarray,
        albedo: np.ndarray | None = None,
        normal: np.ndarray | None = None,
        *,
        mode: Any,
        plan: Any = None,
        out_channels: int | None = None,
        on_tile: Callable[[TileRect, np.ndarray], Any] | None = None,
        cancel: Callable[[], bool] | None = None,
        target_tile_ms: float | None = None,
    ) -> np.ndarray:
        """Denoise with at most one tile in flight, reporting each finished rectangle.

        Args:
            plan: a `TilePlan`; None plans tiles of edge `interactive_edge`.
            on_tile: called after each tile with its `TileRect` and the output so far
                (``[H, W, C]``, rectangles not yet finished are zero); returning False
                cancels.
            cancel: polled between tiles; True cancels.
            target_tile_ms: adapt `interactive_edge` so a tile takes about this long
                (measured per tile, applied from the next call on).

        Raises:
            CancelledError: cancelled between tiles (the finished tiles stay reported).
        """
        self._check_open()
        arrays = [_as_hwc(a, "image") for a in (main, albedo, normal) if a is not None]
        roles = tuple(
            r for r, a in zip(_ROLES, (main, albedo, normal), strict=True) if a is not None
        )
        height, width = arrays[0].shape[:2]
        channels = out_channels if out_channels is not None else arrays[0].shape[2]
        if plan is None:
            plan = self._interactive_plan(height, width)
        gpu_images = [
            self._upload(f"input-{r.value}", a) for a, r in zip(arrays, roles, strict=True)
        ]
        out_bytes = height * width * channels * F32_BYTES
        output = GpuImage(self._staging_buffer("output", out_bytes), height, width, channels)
        result = np.zeros((height, width, channels), np.float32)
        times: list[float] = []
        count = len(plan.tiles)
        tile_set = self._tile_set(gpu_images, roles, output, mode, plan)
        # One tile in flight: submit, then wait for its rectangle.
        for index, tile in enumerate(plan.tiles):
            if cancel is not None and cancel():
                raise CancelledError("execution was cancelled")
            start = time.perf_counter()
            tile_set.submit(index)
            row_bytes = width * channels * F32_BYTES
            raw = self._device.read_buffer(  # waits: one tile in flight at most
                output.buffer, tile.out_y * row_bytes, tile.out_h * row_bytes
            )
            elapsed = (time.perf_counter() - start) * 1e3
            times.append(elapsed)
            rows = np.frombuffer(raw, np.float32).reshape(tile.out_h, width, channels)
            result[tile.out_y : tile.out_y + tile.out_h, tile.out_x : tile.out_x + tile.out_w] = (
                rows[:, tile.out_x : tile.out_x + tile.out_w]
            )
            rect = TileRect(index, count, tile.out_y, tile.out_x, tile.out_h, tile.out_w, elapsed)
            if on_tile is not None and on_tile(rect, result) is False:
                raise CancelledError("execution was cancelled by the tile callback")
        if target_tile_ms is not None and times:
            self._adapt_edge(plan, float(np.median(times)), target_tile_ms)
        return result

    # ------------------------------------------------------------------ lifetime

    def resources(self) -> tuple[int, int]:
        """(live buffers, bytes) owned by the pipeline (the executor's are separate)."""
        self._collect()
        snap = self._resources.snapshot(len(self._pending))
        return snap.count(BUFFER), snap.byte_size

    @_queue_turn
    def close(self) -> None:
        """Release the pipeline's buffers (not the executor); idempotent."""
        if self._closed:
            return
        self._closed = True
        self._pending.release_all()
        for buffer in self._staging.values():
            self._settled(buffer)
        self._staging.clear()
        self._tile_sets.clear()
        self._passes.clear()
        self._ae_pipelines.clear()
        self._ae_bindings.clear()
        self._frame = None
        self._resources.release_all()

    def __enter__(self) -> GpuDenoiser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidOperationError("the GPU denoiser is closed")
        self._collect()

    def _collect(self) -> None:
        self._pending.collect()

    def _release_buffers(self, buffers: list[Any]) -> None:
        for buffer in buffers:
            self._resources.release(buffer)

    def _staging_buffer(
        self, name: str, byte_size: int, usage: int = STORAGE_USAGE, *, upload: bool = False
    ) -> Any:
        """A reusable buffer per name, STORAGE unless ``usage`` says otherwise, or with
        ``upload`` a mapped upload buffer (replaced when the size changes)."""
        key = (name, byte_size)
        buffer = self._staging.get(key)
        if buffer is None:
            for old_key in [k for k in self._staging if k[0] == name]:
                self._retire([self._settled(self._staging.pop(old_key))])
            label = f"oidn/pipeline/{name}"
            made = (
                self._device.create_upload_buffer(label, byte_size)
                if upload
                else self._device.create_buffer(label, byte_size, usage)
            )
            buffer = self._resources.track(BUFFER, made)
            self._staging[key] = buffer
        return buffer

    def _settled(self, buffer: Any) -> Any:
        """``buffer`` with no mapping request in flight (one is completed first), so that
        destroying it leaves no request unanswered."""
        if getattr(buffer, "map_state", None) == "pending":
            self._device.map_for_write(buffer)
        return buffer

    def _upload(self, name: str, array: np.ndarray, uploads: list[Any] | None = None) -> GpuImage:
        """Upload a float16/float32 ``[H, W, C]`` image as it is: its bytes from the first
        pixel to the last, strides kept (an RGBA view's alpha travels along), no conversion.

        With mapped uploads the bytes are copied (by several threads for large images)
        into a persistent upload buffer and a GPU copy into the image buffer is submitted
        at once, so it runs while the next image is copied; the upload buffer is appended
        to ``uploads`` (to be mapped again once the frame is done)."""
        height, width, channels = array.shape
        span, pixel_stride, row_stride = _element_span(array)
        raw = memoryview(span).cast("B")
        size = max((len(raw) + 3) & ~3, 4)  # buffers and copies are whole 4-byte words
        buffer = self._staging_buffer(name, size)
        if self.upload_mode == "mapped" and hasattr(self._device, "create_upload_buffer"):
            staging = self._staging_buffer(f"{name}/upload", size, upload=True)
            source = np.frombuffer(raw, np.uint8)

            def fill(mapped: np.ndarray) -> None:
                parallel_copyto(mapped[: len(source)], source)
                mapped[len(source) :] = 0

            self._device.write_mapped_with(staging, size, fill)
            encoder = self._device.create_command_encoder(f"oidn/pipeline/{name}/upload")
            encoder.copy_buffer(staging, 0, buffer, 0, size)
            self._device.submit([encoder.finish()])
            if uploads is not None:
                uploads.append(staging)
        else:
            aligned = len(raw) - len(raw) % 4  # queue writes are whole 4-byte words
            if aligned:
                self._device.write_buffer(buffer, 0, raw[:aligned])
            if aligned < len(raw):
                self._device.write_buffer(buffer, aligned, bytes(raw[aligned:]).ljust(4, b"\0"))
        return GpuImage(
            buffer,
            height,
            width,
            channels,
            pixel_stride=pixel_stride,
            row_stride=row_stride,
            dtype=str(array.dtype),
        )

    @property
    def frame_buffer(self) -> Any:
        """The frame uniform every tile binds (None before the first denoise)."""
        return self._frame

    def _frame_for(self, mode: Any) -> Any:
        """The frame uniform holding ``mode``'s scales, written if they changed."""
        data = FRAME_PARAMS.pack(input_scale=mode.input_scale, output_scale=mode.output_scale)
        if self._frame is None:
            self._frame = self._resources.track(
                BUFFER,
                self._device.create_buffer_with_data("oidn/pipeline/frame", data, FRAME_USAGE),
            )
        elif data != self._frame_data:
            self._device.write_buffer(self._frame, 0, data)
        self._frame_data = data
        return self._frame

    def _retire(self, buffers: list[Any]) -> None:
        if buffers:
            self._pending.retire(buffers)

    def _autoexposure_kernels(self, dtype: str) -> tuple[Kernel, Any, Kernel, Any]:
        """The bins and scale kernels for a colour image of ``dtype``, compiled once."""
        entry = self._ae_pipelines.get(dtype)
        if entry is None:
            cache = self.executor.pipeline_cache
            bins = gpu_autoexposure.generate_bins(gpu_autoexposure.AutoexposureSpec(dtype))
            scale = gpu_autoexposure.generate_scale()
            entry = (bins, cache.get(bins), scale, cache.get(scale))
            self._ae_pipelines[dtype] = entry
        return entry

    def _encode_autoexposure(
        self, encoder: Any, color: GpuImage, frame: Any, dtype: str = "float32"
    ) -> None:
        """Encode the autoexposure of ``color`` into ``frame`` (before the first tile's passes)."""
        bins_kernel, bins_pipeline, scale_kernel, scale_pipeline = self._autoexposure_kernels(dtype)
        bins_h, bins_w = gpu_autoexposure.bin_grid(color.height, color.width)
        key = (color, id(frame), dtype)
        cached = self._ae_bindings.get(key)
        if cached is None:
            bins = self._staging_buffer("autoexposure-bins", bins_h * bins_w * F32_BYTES)
            # Bind groups of another bin count hold the bins buffer just replaced.
            for old in [k for k, v in self._ae_bindings.items() if v[3] is not bins]:
                self._retire(self._ae_bindings.pop(old)[2])
            bins_params = bins_kernel.pack_params(
                **color.params("color"),
                height=color.height,
                width=color.width,
                bins_h=bins_h,
                bins_w=bins_w,
            )
            scale_params = scale_kernel.pack_params(bins_h=bins_h, bins_w=bins_w)
            uniforms = [
                self._resources.track(
                    BUFFER,
                    self._device.create_buffer_with_data(
                        f"oidn/autoexposure/{name}/params", data, BufferUsage.UNIFORM
                    ),
                )
                for name, data in (("bins", bins_params), ("scale", scale_params))
            ]
            bins_group = self._device.create_bind_group(
                "oidn/autoexposure/bins", bins_pipeline, [color.buffer, bins, uniforms[0]]
            )
            scale_group = self._device.create_bind_group(
                "oidn/autoexposure/scale", scale_pipeline, [bins, frame, uniforms[1]]
            )
            cached = self._ae_bindings[key] = (bins_group, scale_group, uniforms, bins)
            while len(self._ae_bindings) > TILE_SET_CACHE_SIZE:
                self._retire(self._ae_bindings.popitem(last=False)[1][2])
        else:
            self._ae_bindings.move_to_end(key)
        encoder.dispatch(
            bins_pipeline,
            cached[0],
            bins_kernel.grid(0, bins_h, bins_w),
            label="oidn/autoexposure/bins",
        )
        encoder.dispatch(
            scale_pipeline, cached[1], scale_kernel.grid(0, 1, 1), label="oidn/autoexposure/scale"
        )
        self._frame_data = b""  # the GPU wrote the scales: the next fixed scale rewrites them

    def _run_tiles(
        self,
        images: list[GpuImage],
        roles: tuple[io_passes.ImageRole, ...],
        output: GpuImage,
        mode: Any,
        plan: Any,
        *,
        progress: Callable[[float], Any] | None,
        autoexposure: bool = False,
    ) -> None:
        count = len(plan.tiles)
        tile_set = self._tile_set(images, roles, output, mode, plan)
        color = images[0]

        def encode_autoexposure(encoder: Any) -> None:
            self._encode_autoexposure(encoder, color, tile_set.frame, color.dtype)

        for index in range(count):
            tile_set.submit(index, encode_autoexposure if autoexposure and index == 0 else None)
            if progress is not None and progress((index + 1) / count) is False:
                raise CancelledError("execution was cancelled by the progress callback")

    def _tile_set(
        self,
        images: list[GpuImage],
        roles: tuple[io_passes.ImageRole, ...],
        output: GpuImage,
        mode: Any,
        plan: Any,
    ) -> _TileSet:
        """The bind groups of every tile for these buffers and plan, built once and reused."""
        passes = self._passes_for(roles, mode, tuple(img.dtype for img in images))
        frame = self._frame_for(mode)
        tile_h, tile_w = int(plan.tile_h), int(plan.tile_w)
        network_input = self.executor.packed_input_buffer(tile_h, tile_w)
        network_output = self.executor.output_buffer(tile_h, tile_w)
        key = (
            tuple(images),
            output,
            plan,
            passes.input_kernel.key,
            passes.output_kernel.key,
            id(network_input),
            id(network_output),
            id(frame),
        )
        tile_set = self._tile_sets.get(key)
        if tile_set is None:
            tile_set = _TileSet(
                self, images, output, passes, frame, plan, network_input, network_output
            )
            self._tile_sets[key] = tile_set
            while len(self._tile_sets) > TILE_SET_CACHE_SIZE:
                _, old = self._tile_sets.popitem(last=False)
                self._retire(old.uniforms)
        else:
            self._tile_sets.move_to_end(key)
        return tile_set

    def _interactive_plan(self, height: int, width: int) -> Any:
        options = DenoiseOptions(tile_size=self.interactive_edge)
        return plan_tiles(self.executor.model, height, width, options)

    def _adapt_edge(self, plan: Any, measured_ms: float, target_ms: float) -> None:
        if measured_ms <= 0 or target_ms <= 0:
            return
        edge = max(plan.tile_h, plan.tile_w) * math.sqrt(target_ms / measured_ms)
        edge = min(max(edge, MIN_INTERACTIVE_EDGE), MAX_INTERACTIVE_EDGE)
        # int(): on NumPy 1.x, round() of a NumPy float (plan sizes may be NumPy ints) is a float
        units = int(round(edge / TILE_ALIGNMENT))  # noqa: RUF046 - see above
        self.interactive_edge = units * TILE_ALIGNMENT


@dataclass(frozen=True)
class _PendingFrame:
    """A submitted host-array frame: its readback buffer, result shape and host times."""

    readback: Any
    shape: tuple[int, int, int]
    upload_ms: float
    submit_ms: float
    destination: np.ndarray | None = None  # the caller's output array
    main: np.ndarray | None = None
    uploads: tuple[Any, ...] = ()  # upload buffers to map again once the frame is done


@dataclass(frozen=True)
class _Passes:
    """The input and output pass kernels of one mode, with their compiled pipelines."""

    input_kernel: Kernel
    output_kernel: Kernel
    input_pipeline: Any
    output_pipeline: Any


class _TileSet:
    """Per-tile params uniforms and bind groups of one (buffers, plan, mode); submits tiles."""

    def __init__(
        self,
        denoiser: GpuDenoiser,
        images: list[GpuImage],
        output: GpuImage,
        passes: _Passes,
        frame: Any,
        plan: Any,
        network_input: Any,
        network_output: Any,
    ) -> None:
        self.device = denoiser._device
        self.executor = denoiser.executor
        self.passes = passes
        self.plan = plan
        self.tile_h, self.tile_w = int(plan.tile_h), int(plan.tile_w)
        self.frame = frame
        # Strong references: the cache key holds these objects, so their ids stay unique.
        self.images = images
        self.output = output
        self.uniforms: list[Any] = []
        self.groups: list[tuple[Any, Any]] = []
        image_params: dict[str, int] = {}
        for image, role in zip(images, _ROLES, strict=False):
            image_params.update(image.params(role.value))
        for index, tile in enumerate(plan.tiles):
            in_params = passes.input_kernel.pack_params(
                tensor_height=self.tile_h,
                tensor_width=self.tile_w,
                dst_y=tile.buf_y,
                dst_x=tile.buf_x,
                src_y=tile.in_y,
                src_x=tile.in_x,
                copy_height=tile.in_h,
                copy_width=tile.in_w,
                **image_params,
            )
            out_params = passes.output_kernel.pack_params(
                tensor_width=self.tile_w,
                src_y=tile.src_y,
                src_x=tile.src_x,
                dst_y=tile.out_y,
                dst_x=tile.out_x,
                height=tile.out_h,
                width=tile.out_w,
                out_offset=output.offset,
                out_pixel_stride=output.pixel_stride_elems,
                out_row_stride=output.row_stride_elems,
                out_channels=output.channels,
            )
            label = f"oidn/tile/{index}"
            in_uniform = self._uniform(denoiser, f"{label}/input/params", in_params)
            out_uniform = self._uniform(denoiser, f"{label}/output/params", out_params)
            in_group = self.device.create_bind_group(
                f"{label}/input",
                passes.input_pipeline,
                [*(img.buffer for img in images), network_input, in_uniform, frame],
            )
            out_group = self.device.create_bind_group(
                f"{label}/output",
                passes.output_pipeline,
                [network_output, output.buffer, out_uniform, frame],
            )
            self.groups.append((in_group, out_group))

    def _uniform(self, denoiser: GpuDenoiser, label: str, data: bytes) -> Any:
        buffer = denoiser._resources.track(
            BUFFER, self.device.create_buffer_with_data(label, data, BufferUsage.UNIFORM)
        )
        self.uniforms.append(buffer)
        return buffer

    def submit(self, index: int, prelude: Callable[[Any], None] | None = None) -> None:
        """Encode and submit tile ``index``: ``prelude(encoder)`` (the frame's autoexposure),
        input pass, network, output pass."""
        tile = self.plan.tiles[index]
        in_group, out_group = self.groups[index]
        passes = self.passes
        label = f"oidn/tile/{index}"
        encoder = self.device.create_command_encoder(label)
        if prelude is not None:
            prelude(encoder)
        encoder.dispatch(
            passes.input_pipeline,
            in_group,
            passes.input_kernel.grid(0, self.tile_h, self.tile_w),
            label=f"{label}/input",
        )
        self.executor.encode(encoder, self.tile_h, self.tile_w)
        encoder.dispatch(
            passes.output_pipeline,
            out_group,
            passes.output_kernel.grid(0, tile.out_h, tile.out_w),
            label=f"{label}/output",
        )
        self.device.submit([encoder.finish()])


def _upload_mode() -> str:
    mode = os.environ.get(UPLOAD_VARIABLE, UPLOAD_MODES[0])
    if mode not in UPLOAD_MODES:
        raise InvalidArgumentError(
            f"{UPLOAD_VARIABLE}={mode!r} is not an upload mode; expected one of "
            f"{', '.join(UPLOAD_MODES)}"
        )
    return mode


def _check_destination(output: Any, shape: tuple[int, int, int]) -> None:
    """``output`` can take a result of ``shape``: a writeable float16/float32 NumPy array."""
    if not isinstance(output, np.ndarray) or output.dtype not in (np.float16, np.float32):
        raise InvalidArgumentError(
            "output must be a float32 or float16 NumPy array, got "
            f"{getattr(output, 'dtype', type(output).__name__)}"
        )
    if output.shape != shape:
        raise InvalidArgumentError(f"output has shape {output.shape}; expected {shape}")
    if not output.flags.writeable:
        raise InvalidArgumentError("output array is read-only; pass a writeable array")


def _as_hwc(image: np.ndarray, name: str) -> np.ndarray:
    """``image`` as ``[H, W, C]``: float16 and float32 as they are, other dtypes as float32."""
    arr = image_as_hwc(image, name)
    if arr.dtype not in (np.float16, np.float32):
        arr = arr.astype(np.float32)
    return arr


def _element_span(array: np.ndarray) -> tuple[np.ndarray, int, int]:
    """``(flat elements from the first pixel to the last, pixel stride, row stride)``.

    A view with positive strides and adjacent channels (a crop, an RGBA array's RGB)
    is read in place; any other layout is copied to a dense array first.
    """
    height, width, channels = array.shape
    item = array.itemsize
    row_bytes, pixel_bytes, channel_bytes = array.strides
    in_place = (
        channel_bytes == item or channels == 1
    ) and all(s > 0 and s % item == 0 for s in (row_bytes, pixel_bytes))  # fmt: skip
    if not in_place or height * width == 0:
        array = np.ascontiguousarray(array)
        row_bytes, pixel_bytes = array.strides[:2]
    pixel_stride, row_stride = pixel_bytes // item, row_bytes // item
    count = (height - 1) * row_stride + (width - 1) * pixel_stride + channels
    span = np.lib.stride_tricks.as_strided(array, shape=(count,), strides=(item,), writeable=False)
    return span, pixel_stride, row_stride
