"""`WgpuTemporalSession`: the temporal mode of one animation on the wgpu denoiser's device,
its history kept there (the wgpu backend's `backends.base.TemporalSession`).

A frame runs on the device and the runner (`runner.GpuDenoiser`) of the denoiser's engine
for its images (the denoiser's frame path, a `backends.temporal_seam.FrameSource`, picks
the weights and plans the network, as for a denoise), holding the device's queue lock:

1. the motion and the images the tap tests use (depth, else albedo and normal) are
   uploaded (mapped upload buffers, as the runner uploads host images), then packed
   (`kernels.temporal.generate_pack`) and the gather half of the reprojection of the
   stored history submitted, so that it runs while the other images are uploaded;
2. one submission: the signal and the whole guide packed (as
   `oidn_gpu.temporal.passes.pack_signal` and ``pack_guide`` pack them), the
   accumulation half of the reprojection (which also counts the pixels that kept their
   history and marks the others), its light-change test in place and the input history
   dropped near disocclusions (the kernels of `temporal.WgpuTemporalPasses`, in the
   session's forms), and ``generate_restart``, which writes the
   reprojection of no history over it on a restart or a camera cut: the cut test is
   decided on the device, with no host round trip;
3. the network on the accumulated color, albedo and normal read straight from the
   reprojection buffer (`runner.GpuDenoiser.denoise_buffers`: the runner's input pass,
   tiles and autoexposure, the same arithmetic as a denoise of host arrays);
4. one submission: pass 2 on the network's output buffer, which also writes the next
   history state, then one copy of the output, the count and the input scale into a
   mapped readback buffer, the only thing read back.

`prefetch` stages a later frame while this one runs (`temporal_prefetch.Prefetcher`;
`TemporalDenoiser.denoise_many` calls it with the next frame): a worker thread copies its
images into the other of two sets of upload buffers, their GPU copies into the input
buffers are queued behind this frame's work, and so is the staged frame's whole GPU
work, steps 1 to 4 ("run ahead": its history is the state this frame writes, into the
other buffer of each pair, and its readback the second readback buffer), before this
frame is read back: the GPU does not wait for the host between frames. The staged
frame's own call then only reads it back, when it continues the history with the same
parameters (no restart, the same images and size); otherwise that frame runs again. Every
wgpu call stays on the thread that holds the device's queue lock.

The kernels, the uploads, the encoding of steps 1, 2 and 4, the readback and the GPU
timestamps are the session's base's (`temporal_encoding.TemporalEncoding`); the session
holds the frame's course, running ahead, its buffers and their lifetime.

The history (state and guide) lives in two pairs of buffers used in turn. Every frame size
is served: a frame larger than one tile is tiled by the runner as a denoise of host
arrays is. ``WgpuBackend.temporal_session`` gives None (the passes on host arrays serve
the denoiser) for the RTLightmap filter and for ``prefilter="accurate"``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from oidn_gpu.backends.base import FrameSource, NetworkFrame, TemporalFrame, TemporalResult
from oidn_gpu.backends.gpu_device import (
    STORAGE_USAGE,
    BufferUsage,
    DeferredRelease,
    PassTimestamps,
)
from oidn_gpu.backends.wgpu import temporal_images as ti
from oidn_gpu.backends.wgpu.frames import F32_BYTES, GpuImage
from oidn_gpu.backends.wgpu.resources import BUFFER, ResourceTracker
from oidn_gpu.backends.wgpu.staging import StagingBuffers
from oidn_gpu.backends.wgpu.temporal_encoding import PHASES, TAIL_BYTES, TemporalEncoding
from oidn_gpu.backends.wgpu.temporal_prefetch import Prefetcher
from oidn_gpu.errors import InvalidOperationError, OIDNGPUError
from oidn_gpu.image import process
from oidn_gpu.kernels import temporal as kt
from oidn_gpu.temporal import passes as tp


class WgpuTemporalSession(TemporalEncoding):
    """The temporal mode of one animation with its history on the denoiser's wgpu device.

    Args:
        frames: the frame path of the wgpu `oidn_gpu.Denoiser` that denoises each
            accumulated frame (``Denoiser.frames``).

    Attributes:
        profile: time each frame's phases with GPU timestamps (where the device has
            ``timestamp-query``) into `last_gpu_ms`; this waits for the GPU once more.
        last_gpu_ms: GPU milliseconds per phase of the last profiled frame (`PHASES`).
        profile_kernels: with `profile`, also time each of the session's kernels (each in a
            compute pass of its own) into `last_kernel_ms`.
        last_kernel_ms: GPU milliseconds per kernel of the last frame so profiled:
            ``"pack-guide"`` and ``"gather"`` (step 1), ``"pack"``, ``"accumulate"``,
            ``"changes"``, ``"near_rows"``, ``"near"``, ``"restart"`` (step 2),
            ``"stabilize"`` (step 4), those that ran.
        last_host_ms: host milliseconds of the last frame: ``"upload"`` (the images copied
            into upload buffers, and the passes before the network queued), ``"submit"``
            (the network and pass 2 queued), ``"wait"`` (until the GPU finished) and
            ``"readback"`` (the output copied out).
        prefetched: how many frames found their images staged by `prefetch`.
        ran_ahead: how many frames found their work submitted ahead (while the previous
            frame ran).
        last_ahead_s: seconds of the last `frame` call spent on the next frame's work
            (submitted ahead), for a run's per-frame times: that frame's, not this one's.
    """

    name = "wgpu-device"

    def __init__(self, frames: FrameSource) -> None:
        self.frames = frames
        self.profile = False
        self.last_gpu_ms: dict[str, float] = {}
        self.last_host_ms: dict[str, float] = {}
        self.profile_kernels = False
        self.last_kernel_ms: dict[str, float] = {}
        self._kernel_stamps: list[str] | None = None  # kernels timed in this frame
        self.prefetched = 0
        self.ran_ahead = 0
        self.last_ahead_s = 0.0
        self._runner: Any = None
        self._device: Any = None
        self._resources = ResourceTracker()
        self._pending: DeferredRelease[list[Any]] | None = None
        self._staging: StagingBuffers | None = None
        self._buffers: dict[str, Any] = {}
        self._groups: dict[tuple[Any, ...], Any] = {}  # by kernel and buffers bound
        self._kernels: dict[tuple[Any, ...], tuple[Any, Any]] = {}
        self._uniform_data = b""
        self._size: tuple[int, int] | None = None
        self._current = 0  # which of the two state and guide buffers hold the history
        self._signature: tuple[Any, ...] | None = None
        self._prefetcher = Prefetcher(ti.dense)
        self._ahead: _Submitted | None = None  # a staged frame's work, submitted ahead
        self._readback_turn = 0
        self._closed = False

    # ------------------------------------------------------------------ the frame

    def frame(
        self, frame: TemporalFrame, params: tp.TemporalParams, *, restart: bool
    ) -> TemporalResult:
        """`TemporalSession.frame`: the next frame, its history kept on the device.

        Raises:
            InvalidOperationError: the session or its denoiser is closed.
            InvalidArgumentError: images of different sizes, or the errors of
                `oidn_gpu.Denoiser.denoise` for these images.
        """
        frames = self.frames
        with frames.lock:
            if self._closed:
                raise InvalidOperationError("the temporal session is closed")
            frames.check_open()
            images, planned = self._planned(frame)
            with planned.runner._device.queue_lock:
                ran_ahead = self.ran_ahead
                submitted = self._submitted(frame, params, restart, images, planned)
                try:
                    started = time.perf_counter()
                    self._run_ahead(submitted)
                    ahead_s = time.perf_counter() - started
                    result = self._finish(submitted)
                    self.last_ahead_s = self._ahead_share(ahead_s, self.ran_ahead > ran_ahead)
                    return result
                except BaseException:
                    self._discard_ahead()
                    self._release_staging(submitted)
                    raise

    def _ahead_share(self, ahead_s: float, own_ahead: bool) -> float:
        """The seconds of a frame call that were the next frame's work, queued behind this
        one's (`last_ahead_s`): submitting it (where the driver runs the work as it is
        submitted, as CPU drivers do), and the wait for this frame's output, which covers
        the work queued behind it too: all of that wait where this frame's work ran in
        the call before (``own_ahead``), else half (two frames of one size and network)."""
        if self._ahead is None:
            return 0.0
        wait = self.last_host_ms.get("wait", 0.0) / 1e3
        return ahead_s + (wait if own_ahead else wait / 2)

    def prefetch(self, frame: TemporalFrame) -> None:
        """Start staging ``frame``'s images for a later `frame` call with the same object:
        a worker thread copies them into a second set of upload buffers while this
        session's current frame runs (see the module docstring); at most two are kept,
        the oldest dropped. A frame that `frame` would refuse is left alone here: its
        `frame` call raises the error.

        Raises:
            InvalidOperationError: the session is closed.
        """
        frames = self.frames
        with frames.lock:
            if self._closed:
                raise InvalidOperationError("the temporal session is closed")
            if frames.closed:
                return
            try:
                runner = self._planned(frame)[1].runner
            except OIDNGPUError:
                return
            if self._runner is not None and runner is not self._runner:
                return  # attaching it would drop the history the current frame needs
            with runner._device.queue_lock:
                self._attach(runner)
                self._prefetcher.start(self._device, self._staging, frame)

    def _planned(self, frame: TemporalFrame) -> tuple[Any, NetworkFrame]:
        """The frame's network images and their network planned by the frame path (the
        runner computes any autoexposure, on the device)."""
        images = ti.network_images(frame)
        return images, self.frames.plan(images, on_device=True)

    def _submitted(
        self,
        frame: TemporalFrame,
        params: tp.TemporalParams,
        restart: bool,
        images: Any,
        planned: NetworkFrame,
    ) -> _Submitted:
        """The frame's GPU work: the one submitted ahead for it, else submitted now."""
        ahead, self._ahead = self._ahead, None
        if (
            ahead is not None
            and ahead.frame is frame
            and ahead.params == params
            and (not restart and self._signature == ahead.signature)
        ):
            self.ran_ahead += 1
            return ahead
        staged = None
        if ahead is not None:  # its images may still be the input buffers'
            if ahead.frame is frame and self._prefetcher.resident is ahead.staged:
                staged = ahead.staged
            self._release_staging(ahead, keep=staged is not None)
        self._use(planned.runner, images.height, images.width)
        signature = ti.signature(frame, images)
        restart = restart or self._signature != signature
        self._signature = None  # set again once the frame has finished
        return self._submit(frame, params, restart, images, planned, signature, staged)

    def _submit(
        self,
        frame: TemporalFrame,
        params: tp.TemporalParams,
        restart: bool,
        images: Any,
        planned: NetworkFrame,
        signature: tuple[Any, ...],
        staged: Any = None,
    ) -> _Submitted:
        """Queue the frame's passes, network, pass 2 and readback (its images staged by
        `prefetch`: ``staged``, else taken from the prefetcher or uploaded now)."""
        runner = planned.runner
        height, width = images.height, images.width
        start = time.perf_counter()
        timestamps = self._timestamps()
        if timestamps is not None:
            self._stamp(timestamps, 0)
            self._kernel_stamps = [] if self.profile_kernels else None
        keep_min = ti.keep_min(height * width, params.cut_threshold)
        self._write_uniform(height, width, 0 if restart else keep_min, restart)
        self._device.write_buffer(self._buffers["counter"], 0, bytes(F32_BYTES))
        if staged is None:
            staged = self._prefetcher.take(self._device, self._staging, frame)
        staging = self._queue_passes(frame, params, restart, timestamps, staged)
        uploaded = time.perf_counter()
        self._network(runner, images, planned)
        encoder = self._device.create_command_encoder("oidn/temporal/stabilize")
        if timestamps is not None:
            encoder.write_timestamps(PassTimestamps(timestamps, 3))
        self._encode_stabilize(encoder, params)
        if timestamps is not None:
            encoder.write_timestamps(PassTimestamps(timestamps, 4))
        readback = self._encode_readback(encoder, height, width, runner.frame_buffer)
        if timestamps is not None:
            encoder.write_timestamps(PassTimestamps(timestamps, 5))
            encoder.resolve_timestamps(timestamps, len(PHASES) + 1, self._buffers["resolve"])
            if self._kernel_stamps:
                encoder.resolve_timestamps(
                    self._buffers["kernel_timestamps"],
                    2 * len(self._kernel_stamps),
                    self._buffers["kernel_resolve"],
                )
        self._device.submit([encoder.finish()])
        self._prefetcher.submit_ready(self._device, self._staging)
        host_ms = {
            "upload": (uploaded - start) * 1e3,
            "submit": (time.perf_counter() - uploaded) * 1e3,
        }
        return _Submitted(
            frame,
            params,
            restart,
            signature,
            keep_min,
            readback,
            staging,
            staged,
            planned,
            host_ms,
            timestamps is not None,
        )

    def _run_ahead(self, current: _Submitted) -> None:
        """Submit the oldest staged frame's work behind ``current``'s, as its own call
        will run it if it continues the history with the same parameters (its call
        checks that, else runs it again): the GPU then never waits for the host between
        frames. Not while profiling."""
        staged = self._prefetcher.next_staged()
        if staged is None or current.profiled or self.profile:
            return
        try:
            images, planned = self._planned(staged.frame)
        except OIDNGPUError:
            return  # its own call raises it
        if planned.runner is not self._runner or (
            ti.signature(staged.frame, images) != current.signature
        ):
            return
        staged.future.exception()  # its images are in the upload buffers
        taken = self._prefetcher.take(self._device, self._staging, staged.frame)
        if taken is None:
            return
        self._current = 1 - self._current  # its history: the state current writes
        try:
            self._ahead = self._submit(
                staged.frame, current.params, False, images, planned, current.signature, taken
            )
        except Exception:
            self._prefetcher.done_with(taken)
        finally:
            self._current = 1 - self._current

    def _finish(self, sub: _Submitted) -> TemporalResult:
        """Wait for a submitted frame and read it back: the history is its now."""
        height, width = sub.signature[:2]
        frame, restart, planned = sub.frame, sub.restart, sub.planned
        input_scale: float = planned.input_scale
        output, count, scale = self._read(sub.readback, height, width)
        self._prefetcher.submit_ready(self._device, self._staging)
        self._release_staging(sub)
        if sub.staged is not None:
            self.prefetched += 1
        self.last_host_ms = {**sub.host_ms, **self.last_host_ms}
        if sub.profiled:
            self._read_timestamps()
        self._current = 1 - self._current
        self._signature = sub.signature
        if planned.autoexposes:
            input_scale = scale
            if scale == 0.0:
                process.warn_if_autoexposure_blackens(
                    tp.pack_signal(frame.color, None, None)[:, :, :3], scale
                )
        self.frames.record(planned, input_scale)
        cut = not restart and count < sub.keep_min
        fraction = 0.0 if restart or cut else count / float(height * width)
        return TemporalResult(output, fraction, cut)

    def _release_staging(self, sub: _Submitted, keep: bool = False) -> None:
        """Map a submitted frame's upload buffers again (they are once the GPU is done);
        with ``keep`` its staging stays taken (its images are used again)."""
        if keep:
            return
        for buffer in sub.staging:
            self._device.map_for_write(buffer, wait=False)
        if sub.staged is not None:
            self._prefetcher.done_with(sub.staged)

    def _discard_ahead(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None and self._device is not None:
            self._release_staging(ahead)

    def _network(self, runner: Any, images: Any, planned: NetworkFrame) -> None:
        """Queue the network on the accumulated images in the reprojection buffer, as the
        frame path planned it."""
        height, width = images.height, images.width
        plan = planned.plan
        reprojection = self._buffers["reprojection"]
        given = [0] + [
            3 * (i + 1)
            for i, image in enumerate((images.albedo, images.normal))
            if image is not None
        ]
        inputs = [
            GpuImage(
                reprojection, height, width, 3, pixel_stride=tp.REPROJECTION_CHANNELS, offset=offset
            )
            for offset in given
        ]
        denoised = GpuImage(self._buffers["denoised"], height, width, 3)
        runner.denoise_buffers(
            inputs, denoised, mode=plan.mode, plan=plan.tiles, autoexposure=planned.autoexposes
        )

    # ------------------------------------------------------------------ buffers

    def _use(self, runner: Any, height: int, width: int) -> None:
        """The session's buffers on ``runner``'s device for this size (made on first use,
        remade, with the history dropped, when the runner or the size changes)."""
        if self._pending is not None:
            self._pending.collect()
        if runner is self._runner and self._size == (height, width):
            return
        if runner is self._runner:
            self._release_buffers_now()
        else:
            self._attach(runner)
        pixels = height * width
        channels = {
            "signal": tp.SIGNAL_CHANNELS,
            "guide0": tp.GUIDE_CHANNELS,
            "guide1": tp.GUIDE_CHANNELS,
            "state0": tp.STATE_CHANNELS,
            "state1": tp.STATE_CHANNELS,
            "motion_finite": 2,
            "hist": tp.REPROJECTION_CHANNELS,
            "reprojection": tp.REPROJECTION_CHANNELS,
            "luma": 2,
            "missing": 1,
            "rows": 1,
            "denoised": 3,
            "output": 3,
        }
        for name, count in channels.items():
            self._buffers[name] = self._make(name, pixels * count * F32_BYTES, STORAGE_USAGE)
        self._buffers["counter"] = self._make("counter", 16, STORAGE_USAGE)
        self._buffers["params"] = self._make(
            "params", kt.SESSION_PARAMS.size, BufferUsage.UNIFORM | BufferUsage.COPY_DST
        )
        for turn in (0, 1):
            self._buffers[f"readback{turn}"] = self._make(
                f"readback{turn}",
                pixels * 3 * F32_BYTES + TAIL_BYTES,
                BufferUsage.MAP_READ | BufferUsage.COPY_DST,
            )
        self._uniform_data = b""
        self._size = (height, width)
        self._signature = None

    def _attach(self, runner: Any) -> None:
        """Use ``runner``'s device (a new one drops every buffer and the history)."""
        if runner is self._runner:
            return
        self._release_buffers_now()
        self._release_device()
        self._runner, self._device = runner, runner._device
        self._pending = DeferredRelease(self._device, self._release_list)
        self._staging = StagingBuffers(self._device, self._resources, self._pending.retire)

    def _write_uniform(self, height: int, width: int, keep_min: int, restart: bool) -> None:
        data = kt.SESSION_PARAMS.pack(
            width=width, height=height, keep_min=keep_min, restart=int(restart)
        )
        if data != self._uniform_data:
            self._device.write_buffer(self._buffers["params"], 0, data)
            self._uniform_data = data

    # ------------------------------------------------------------------ lifetime

    def _release_list(self, buffers: list[Any]) -> None:
        for buffer in buffers:
            self._resources.release(buffer)

    def _release_buffers_now(self) -> None:
        """Drop the size's buffers and bind groups (after the GPU finished: a frame
        submitted ahead may still run)."""
        self._discard_ahead()
        if self._device is not None and self._size is not None:
            self._device.wait_idle()
        if self._runner is not None and not self._runner.closed:
            self._runner.release_bindings()  # its tile bind groups hold our buffers
        keep = {"timestamps", "resolve", "kernel_timestamps", "kernel_resolve"}
        for name in [n for n in self._buffers if n not in keep and not n.startswith("in_")]:
            self._resources.release(self._buffers.pop(name))
        self._groups.clear()
        self._size = None

    def _release_device(self) -> None:
        self._prefetcher.close(self._device)  # joins the worker writing upload buffers
        if self._staging is not None:
            self._staging.close()
        if self._pending is not None:
            self._pending.release_all()
        self._buffers.clear()
        self._kernels.clear()
        self._resources.release_all()
        self._staging = self._pending = None

    def resources(self) -> tuple[int, int]:
        """(live buffers, bytes) the session holds."""
        snap = self._resources.snapshot()
        return snap.count(BUFFER), snap.byte_size

    def close(self) -> None:
        """`TemporalSession.close`: release the device history and buffers; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._device is None:
            return
        with self._device.queue_lock:
            self._release_buffers_now()
            self._release_device()
        self._runner = self._device = None

    def __enter__(self) -> WgpuTemporalSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(eq=False)
class _Submitted:
    """A frame whose GPU work is queued, and what reading it back needs."""

    frame: TemporalFrame
    params: tp.TemporalParams
    restart: bool
    signature: tuple[Any, ...]
    keep_min: int
    readback: Any
    staging: list[Any]  # upload buffers to map again
    staged: Any  # its `temporal_prefetch.Staged`, or None
    planned: NetworkFrame  # its network's plan, runner and input scale
    host_ms: dict[str, float]
    profiled: bool
