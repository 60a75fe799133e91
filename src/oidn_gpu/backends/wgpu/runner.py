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

import dataclasses
import functools
import itertools
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from oidn_gpu.backends.base import DenoiseImages, Progress
from oidn_gpu.backends.frame_runner import (
    FrameRequest,
    FrameRunner,
    HostFrame,
    host_frame,
    progress_after_tile,
    run_frame,
)
from oidn_gpu.backends.gpu_device import STORAGE_USAGE, BufferUsage, DeferredRelease
from oidn_gpu.backends.plan import DenoisePlan
from oidn_gpu.backends.wgpu import alpha_frame, interactive
from oidn_gpu.backends.wgpu.autoexposure import AutoexposurePass
from oidn_gpu.backends.wgpu.coverage import CoverageFit
from oidn_gpu.backends.wgpu.executor import WgpuExecutor
from oidn_gpu.backends.wgpu.frames import (
    F32_BYTES,
    ROLES,
    GpuImage,
    Passes,
    PendingFrame,
    TileRect,
    TileSet,
    frame_of_item,
)
from oidn_gpu.backends.wgpu.resources import BUFFER, ResourceTracker
from oidn_gpu.backends.wgpu.staging import StagingBuffers
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.host_copy import parallel_copyto
from oidn_gpu.kernels import io_passes
from oidn_gpu.kernels.spec import FRAME_PARAMS, Kernel, Precision

__all__ = ["GpuDenoiser", "GpuImage", "TileRect"]

# (buffers, plan) combinations whose per-tile bind groups a denoiser keeps.
TILE_SET_CACHE_SIZE = 4
# The frame uniform (input and output scale), also written by the autoexposure kernel.
FRAME_USAGE = BufferUsage.UNIFORM | STORAGE_USAGE
SCALE_BYTES = 2 * F32_BYTES  # the frame's two scales, read back after the output
_ROLE_OF = {role.value: role for role in ROLES}


def _queue_turn(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run a method holding its device's queue lock (see `GpuDevice.queue_lock`)."""

    @functools.wraps(method)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._device.queue_lock:
            return method(self, *args, **kwargs)

    return locked


class GpuDenoiser(FrameRunner[GpuImage, TileSet, PendingFrame]):
    """Runs whole denoises (input pass, network, output pass per tile) on one executor.

    The frame order, the LRU of per-configuration `TileSet`s, progress and cancel
    are `FrameRunner`'s; this class supplies the wgpu primitives.

    Args:
        executor: the network executor; its device runs everything.
    """

    closed_message = "the GPU denoiser is closed"

    def __init__(self, executor: WgpuExecutor) -> None:
        super().__init__(TILE_SET_CACHE_SIZE)
        self.executor = executor
        self._device = executor.device
        self._resources = ResourceTracker()
        # Buffers dropped while work recorded with them may still be in flight.
        self._pending: DeferredRelease[list[Any]] = DeferredRelease(
            self._device, self._release_buffers
        )
        self._staging = StagingBuffers(self._device, self._resources, self._retire)
        self._frame: Any = None  # the frame uniform (FRAME_PARAMS), made by the first frame
        # Kernels and pipelines per (roles, transfer, hdr, snorm); with the frames' per-tile
        # uniforms and bind groups per (buffers, plan), a repeated denoise only encodes and
        # submits.
        self._passes: dict[tuple[Any, ...], Passes] = {}
        self._frame_data = b""  # its contents as last written by the host
        self._autoexposure = AutoexposurePass(
            self._device, executor, self._resources, self._staging, self._retire
        )
        self._coverage = CoverageFit(self._device, executor, self._staging)
        self._prelude: Callable[[Any], None] | None = None  # encoded before the next tile
        self._uploads: list[Any] = []  # upload buffers of the frame being submitted
        self.last_input_scale: float | None = None
        # Host-side times (ms) of the last `denoise`: "upload" (the images copied into
        # staging memory and their GPU copies submitted), "submit" (encoding and
        # submitting every pass), "wait" (until the GPU finished), "readback" (the copy of
        # the mapped result into the array), "remap" (requesting the upload buffers'
        # mapping for the next frame).
        self.last_host_ms: dict[str, float] = {}
        self.interactive_edge = interactive.DEFAULT_INTERACTIVE_EDGE

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
        autoexposure: bool = False,
    ) -> Passes:
        """The input and output pass kernels and pipelines of ``mode`` (generated once).

        Unless the executor compiles on first use, a new mode's kernels (and with
        ``autoexposure`` those of the main image's dtype) are handed to the compile
        threads together, to compile beside each other and the network's kernels.
        """
        key = (roles, mode.transfer, bool(mode.hdr), bool(mode.snorm), dtypes)
        passes = self._passes.get(key)
        if passes is None:
            cache = self.executor.pipeline_cache
            checks = self.executor.shader_checks
            input_kernel = self._input_kernel(roles, mode, dtypes)
            output_kernel = self._output_kernel(mode)
            if self.executor.compiles_ahead:
                cache.prepare([input_kernel, output_kernel], shader_checks=checks, wait=False)
                if autoexposure:
                    self._autoexposure.compile_ahead(dtypes[0] if dtypes else "float32")
            passes = Passes(
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
        for tile_set in self._frames.clear():
            self._retire(tile_set.uniforms)

    def prepare(self, mode: Any, roles: Sequence[io_passes.ImageRole] | None = None) -> None:
        """Compile the input and output passes of ``mode`` (and the network, and for HDR
        modes the float32 autoexposure) ahead of use, all at once (not the executor's
        input-pack and output-unpack kernels, which no denoise runs)."""
        roles = tuple(roles) if roles is not None else ROLES[: self.executor.input_channels // 3]
        kernels = [
            *self.executor.kernels,
            self._input_kernel(roles, mode),
            self._output_kernel(mode),
        ]
        if mode.hdr:
            self._autoexposure.compile_ahead("float32")
        self.executor.pipeline_cache.prepare(kernels, shader_checks=self.executor.shader_checks)
        if mode.hdr:
            self._autoexposure.kernels("float32")

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
        host = host_frame((main, albedo, normal), out_channels=out_channels, output=output)
        pending = self._submit_host(host, mode, plan, autoexposure=autoexposure, progress=progress)
        return self._result(pending)

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
        pending: PendingFrame | None = None
        for index, images in enumerate(frames):
            with self._device.queue_lock:
                self._check_open()
                submitted = self._submit_host(
                    frame_of_item(tuple(images), out_channels),
                    mode,
                    plan,
                    autoexposure=autoexposure,
                    progress=None,
                    slot=f"/{index % 2}",
                )
            if pending is not None:
                yield self._finish_locked(pending)
            pending = submitted
        if pending is not None:
            yield self._finish_locked(pending)

    @_queue_turn
    def run_with_alpha(
        self,
        images: DenoiseImages,
        plan: DenoisePlan,
        alpha: Callable[[Any, Any], Any],
        progress: Progress | None = None,
        *,
        autoexposure: bool = False,
    ) -> tuple[np.ndarray, float]:
        """`AlphaRunner.run_with_alpha`: one upload of the RGBA image, the alpha's work
        queued after the colour's network, its result clipped into the fourth channel,
        one read back (`alpha_frame.run_with_alpha`)."""
        self._check_open()
        return alpha_frame.run_with_alpha(self, images, plan, alpha, progress, autoexposure)

    def on_device(self, options: Any) -> Any:
        """`BufferAlphaRunner.on_device`: ``options`` with this runner's device."""
        return dataclasses.replace(options, device=self._device.device)

    def fit_alpha(self, plane: GpuImage, albedo: GpuImage | None) -> GpuImage:
        """`BufferAlphaRunner.fit_alpha`: the clipped fit (`CoverageFit.fit_images`), or
        the alpha clipped into a plane of its own without an albedo; queued."""
        if albedo is not None:
            return self._coverage.fit_images(plane, albedo, clip=True)
        clipped = self.plane("alpha-clipped", plane.height, plane.width)
        self._coverage.clip(plane, clipped)
        return clipped

    def plane(self, name: str, height: int, width: int) -> GpuImage:
        """`BufferAlphaRunner.plane`: a dense float32 ``H x W x 1`` image of the buffer
        ``name`` (kept between calls of one size)."""
        return GpuImage(
            self._staging.get(name, max(height * width, 1) * F32_BYTES), height, width, 1
        )

    def clip_into(self, source: GpuImage, destination: GpuImage) -> None:
        """Queue the plane ``source`` clipped to 0..1 into the plane ``destination``."""
        self._coverage.clip(source, destination)

    @_queue_turn
    def fit_coverage_host(self, alpha: np.ndarray, guide: np.ndarray) -> np.ndarray:
        """`HostCoverageRunner.fit_coverage_host`: `CoverageFit.fit_coverage` on this device."""
        self._check_open()
        return self._coverage.fit_coverage(alpha, guide)

    def _finish_locked(self, frame: PendingFrame) -> np.ndarray:
        with self._device.queue_lock:
            return self._result(frame)

    # ------------------------------------------------------------------ FrameRunner primitives

    def _upload_frame(self, frame: HostFrame, slot: str) -> list[GpuImage]:
        self._uploads = []
        images = [
            self._staging.upload(f"input-{role}{slot}", array, self._uploads)
            for array, role in zip(frame.arrays, frame.roles, strict=True)
        ]
        if frame.with_alpha:  # the network reads the colour; the alpha stays in its pixels
            images[0] = dataclasses.replace(images[0], channels=images[0].channels - 1)
        return images

    def _output_image(self, frame: HostFrame, slot: str) -> GpuImage:
        height, width, channels = frame.shape
        out_bytes = height * width * channels * F32_BYTES
        # The frame's scales are copied behind the pixels, so one readback brings both.
        buffer = self._staging.get(f"output{slot}", out_bytes + SCALE_BYTES)
        # with an alpha, the colour's channels of pixels that hold the alpha after them
        return GpuImage(buffer, height, width, frame.out_channels, pixel_stride=channels)

    def _read_back(
        self, frame: HostFrame, output: GpuImage, slot: str, upload_ms: float, submit_ms: float
    ) -> PendingFrame:
        """Submit the copy of the result (and scales) into a mapped readback buffer kept
        across frames: one copy from it into the result."""
        out_bytes = output.height * output.width * output.pixel_stride_elems * F32_BYTES
        readback = self._staging.get(
            f"readback{slot}", out_bytes + SCALE_BYTES, BufferUsage.MAP_READ | BufferUsage.COPY_DST
        )
        encoder = self._device.create_command_encoder("oidn/frame/readback")
        encoder.copy_buffer(self._frame, 0, output.buffer, out_bytes, SCALE_BYTES)
        encoder.copy_buffer(output.buffer, 0, readback, 0, out_bytes + SCALE_BYTES)
        self._device.submit([encoder.finish()])
        uploads, self._uploads = tuple(self._uploads), []
        return PendingFrame(readback, frame, upload_ms, submit_ms, uploads)

    def _result(self, pending: PendingFrame) -> np.ndarray:
        """Wait for a submitted frame and copy its result out of the mapped buffer (into
        the frame's destination array when it has one)."""
        host = pending.host
        height, width, channels = host.shape
        pixels = height * width * channels
        start = time.perf_counter()
        results: list[np.ndarray] = []
        scales: list[float] = []

        def copy_out(mapped: np.ndarray) -> None:
            values = mapped.view(np.float32)
            scale = float(values[pixels])
            target, result = host.target, host.output
            if target is None or (scale == 0.0 and np.may_share_memory(target, host.arrays[0])):
                target = result = np.empty((height, width, channels), np.float32)
            parallel_copyto(target, values[:pixels].reshape(height, width, channels))
            results.append(result)
            scales.append(scale)

        waited = self._device.read_mapped_with(
            pending.readback, pixels * F32_BYTES + F32_BYTES, copy_out
        )
        copied = time.perf_counter()
        # The GPU is done with this frame: request the mapping of its upload buffers for
        # the next frame now, so that it is ready without waiting then.
        for buffer in pending.uploads:
            self._device.map_for_write(buffer, wait=False)
        self.last_host_ms = {
            "upload": pending.upload_ms,
            "submit": pending.submit_ms,
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
        roles = tuple(role.value for role in ROLES[: len(images)])
        for image, role in zip(images, roles, strict=False):
            image.check(role)
        output.check("output")
        if len(plan.tiles) > 1 and any(img.buffer is output.buffer for img in images):
            raise InvalidArgumentError(
                "in-place GPU denoising with several tiles needs a separate output buffer"
            )
        request = FrameRequest(
            tuple(images), roles, output, output.channels, mode, plan, autoexposure
        )
        self._run_device(request, progress)

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
        """Denoise with at most one tile in flight, reporting each finished rectangle
        (`interactive.denoise_interactive`).

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
        host = host_frame((main, albedo, normal), out_channels=out_channels)
        return interactive.denoise_interactive(
            self, host, mode, plan, on_tile=on_tile, cancel=cancel, target_tile_ms=target_tile_ms
        )

    # ------------------------------------------------------------------ lifetime

    def resources(self) -> tuple[int, int]:
        """(live buffers, bytes) owned by the pipeline (the executor's are separate)."""
        self._collect()
        snap = self._resources.snapshot(len(self._pending))
        return snap.count(BUFFER), snap.byte_size

    @_queue_turn
    def close(self) -> None:
        """Release the pipeline's buffers (not the executor); idempotent."""
        super().close()

    def _drain(self) -> None:
        self._pending.release_all()

    def _release(self) -> None:
        self._staging.close()
        self._passes.clear()
        self._autoexposure.clear()
        self._coverage.clear()
        self._frame = None
        self._resources.release_all()

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        super()._check_open()
        self._collect()

    def _collect(self) -> None:
        self._pending.collect()

    def _release_buffers(self, buffers: list[Any]) -> None:
        for buffer in buffers:
            self._resources.release(buffer)

    @property
    def upload_mode(self) -> str:
        """How host images reach the GPU (`staging.UPLOAD_MODES`; from `UPLOAD_VARIABLE`)."""
        return self._staging.mode

    @upload_mode.setter
    def upload_mode(self, mode: str) -> None:
        self._staging.mode = mode

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

    def _frame_entry(
        self, request: FrameRequest[GpuImage]
    ) -> tuple[Hashable, Callable[[], TileSet]]:
        """The key and builder of the bind groups of every tile for these buffers and plan
        (the frame uniform holds the mode's scales, rewritten only when they changed)."""
        images, output, mode, plan = request.images, request.output, request.mode, request.plan
        assert output is not None  # the caller's or the host frame's buffer
        image_roles = tuple(_ROLE_OF[role] for role in request.roles)
        dtypes = tuple(img.dtype for img in images)
        passes = self._passes_for(image_roles, mode, dtypes, request.autoexposure)
        frame = self._frame_for(mode)
        tile_h, tile_w = int(plan.tile_h), int(plan.tile_w)
        network_input = self.executor.packed_input_buffer(tile_h, tile_w)
        network_output = self.executor.output_buffer(tile_h, tile_w)
        key = (
            images,
            output,
            plan,
            passes.input_kernel.key,
            passes.output_kernel.key,
            id(network_input),
            id(network_output),
            id(frame),
        )

        def build() -> TileSet:
            return TileSet(
                self, list(images), output, passes, frame, plan, network_input, network_output
            )

        return key, build

    def _release_frame(self, frame: TileSet) -> None:
        self._retire(frame.uniforms)

    def _launch(self, frame: TileSet, autoexposure: bool, progress: Progress | None) -> None:
        count = len(frame.plan.tiles)
        run_frame(
            self, frame, count, autoexposure=autoexposure, after_tile=progress_after_tile(progress)
        )

    def autoexposure_pass(self, frame: TileSet) -> None:
        """`TilePasses.autoexposure_pass`: encoded into the first tile's submission."""
        color = frame.images[0]

        def encode(encoder: Any) -> None:
            self._autoexposure.encode(encoder, color, frame.frame, color.dtype)
            self._frame_data = b""  # the GPU wrote the scales: the next fixed one rewrites them

        self._prelude = encode

    def tile_pass(self, frame: TileSet, index: int) -> None:
        """`TilePasses.tile_pass`: one submission (after the frame's prelude, if any)."""
        prelude, self._prelude = self._prelude, None
        frame.submit(index, prelude)
