"""The GPU work of `temporal_session.WgpuTemporalSession`'s frames: its kernels (generated
from `oidn_gpu.kernels.temporal` once per parameters and bound by buffer name), pass 1 and
its count and restart test queued in two submissions (the gather first, so that it runs
while the rest of the frame is uploaded), pass 2 and the readback encoded and read, and
the GPU timestamps of a profiled frame.

`TemporalEncoding` is the session's base: it works on the session's buffers, device and
runner, which the session attaches, sizes and releases (`temporal_session`), and uploads
the frame's images into them.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from oidn_gpu.backends.base import TemporalFrame
from oidn_gpu.backends.gpu_device import BufferUsage, PassTimestamps
from oidn_gpu.backends.wgpu import temporal_images as ti
from oidn_gpu.backends.wgpu.frames import F32_BYTES
from oidn_gpu.backends.wgpu.resources import BUFFER, QUERY_SET, ResourceTracker
from oidn_gpu.backends.wgpu.staging import StagingBuffers
from oidn_gpu.backends.wgpu.temporal_prefetch import Prefetcher
from oidn_gpu.image.host_copy import parallel_copyto
from oidn_gpu.kernels import temporal as kt
from oidn_gpu.temporal import passes as tp

# What the readback brings behind the output: the count of pixels with history (u32) and
# the input scale the network used (f32).
TAIL_BYTES = 2 * F32_BYTES
# GPU timestamps of a profiled frame (`WgpuTemporalSession.profile`), in this order.
PHASES = ("upload", "passes", "network", "stabilize", "readback")
KERNEL_STAMPS = 32  # the beginning and end of up to 16 kernels of a frame (profile_kernels)


def _tap_images(params: tp.TemporalParams, given: list[str]) -> list[str]:
    """The frame's images that the gather's tap tests use: depth, albedo and normal where
    they decide, and with depth the normals also (silhouettes, `passes.tap_tests`)."""
    used = (
        ("depth", params.use_depth),
        ("albedo", params.use_albedo),
        ("normal", params.use_normal or params.use_depth),
    )
    return [name for name, use in used if use and name in given]


class TemporalEncoding:
    """The kernels, dispatches, passes and timestamps of a `WgpuTemporalSession`.

    Attributes (the session's, set by it): the device and runner in use, the buffers by
    name (``state0``/``state1`` and ``guide0``/``guide1``: the history pairs, ``current``
    the one this frame reads), the frame size, the kernels and bind groups made so far,
    the kernels timed in this frame, and `profile`/`profile_kernels` with their results.
    """

    profile: bool
    profile_kernels: bool
    last_gpu_ms: dict[str, float]
    last_kernel_ms: dict[str, float]
    last_host_ms: dict[str, float]
    _device: Any
    _runner: Any
    _resources: ResourceTracker
    _staging: StagingBuffers | None
    _prefetcher: Prefetcher
    _buffers: dict[str, Any]
    _groups: dict[tuple[Any, ...], Any]
    _kernels: dict[tuple[Any, ...], tuple[Any, Any, str]]
    _kernel_stamps: list[str] | None
    _size: tuple[int, int] | None
    _current: int
    _readback_turn: int

    def _make(self, name: str, byte_size: int, usage: int) -> Any:
        return self._resources.track(
            BUFFER, self._device.create_buffer(f"oidn/temporal/{name}", byte_size, usage)
        )

    def _upload(self, frame: TemporalFrame, names: list[str], staging: list[Any]) -> None:
        """Upload the frame's images ``names`` (dense float32) into the session's input
        buffers (``in_<name>``); the upload buffers are appended to ``staging``."""
        assert self._staging is not None
        self._prefetcher.overwritten()
        for name in names:
            image = self._staging.upload(
                f"temporal-{name}", ti.dense(name, getattr(frame, name)), staging
            )
            self._buffers[f"in_{name}"] = image.buffer

    def _kernel(
        self, which: str, params: tp.TemporalParams | None = None, given: tuple[bool, ...] = ()
    ) -> tuple[Any, Any, str]:
        """``(kernel, pipeline, name)`` of one of the session's kernels, generated once
        (``name``: ``which``, ``"pack-guide"`` for the pack of the gather's images)."""
        key = (which, None if params is None else kt.TemporalSpec(params), given)
        entry = self._kernels.get(key)
        if entry is None:
            spec = key[1]
            kernel = {
                "pack": lambda: kt.generate_pack(*given[:3], signal=given[3], motion=not given[3]),
                "gather": lambda: kt.generate_reproject(spec, "gather"),
                "accumulate": lambda: kt.generate_reproject(
                    spec, "accumulate", count=True, missing=spec.params.disocclusion_margin > 0
                ),
                "changes": lambda: kt.generate_changes(spec, luma=True),
                "near_rows": lambda: kt.generate_near_rows(spec, compact=True),
                "near": lambda: kt.generate_near(spec),
                "restart": kt.generate_restart,
                "stabilize": lambda: kt.generate_stabilize(spec, session=True),
            }[which]()
            executor = self._runner.executor
            pipeline = executor.pipeline_cache.get(kernel, shader_checks=executor.shader_checks)
            name = "pack-guide" if which == "pack" and not given[3] else which
            entry = self._kernels[key] = (kernel, pipeline, name)
        return entry

    def _dispatch(self, encoder: Any, entry: tuple[Any, Any, str], names: tuple[str, ...]) -> None:
        """Dispatch a kernel over the frame, its buffers bound by name (``prev_*`` and
        ``next_*``: the history buffers of this frame's turn)."""
        kernel, pipeline, which = entry
        buffers = [self._named(name) for name in names] + [self._buffers["params"]]
        group_key = (kernel.key, *(id(buffer) for buffer in buffers))
        group = self._groups.get(group_key)
        if group is None:
            group = self._groups[group_key] = self._device.create_bind_group(
                kernel.key, pipeline, buffers
            )
        height, width = self._size
        stamps = self._kernel_stamps
        timed = None
        if stamps is not None and len(stamps) < KERNEL_STAMPS // 2:
            timed = PassTimestamps(
                self._buffers["kernel_timestamps"], 2 * len(stamps), 2 * len(stamps) + 1
            )
            stamps.append(which)
        encoder.dispatch(
            pipeline, group, kernel.grid(0, height, width), label=kernel.name, timestamps=timed
        )

    def _named(self, name: str) -> Any:
        turn = {"prev": self._current, "next": 1 - self._current}
        prefix, _, rest = name.partition("_")
        if prefix in turn and rest in ("state", "guide"):
            return self._buffers[f"{rest}{turn[prefix]}"]
        return self._buffers[name]

    def _queue_passes(
        self,
        frame: TemporalFrame,
        params: tp.TemporalParams,
        restart: bool,
        timestamps: Any,
        staged: Any,
    ) -> list[Any]:
        """Upload the frame and queue pass 1, the count and the restart or cut test: the
        images the gather needs first (motion and the guides the tap tests use), the
        gather submitted at once so that it runs while the rest is uploaded, then the
        accumulation (a prefetched frame's images are on the device already). Returns the
        upload buffers to map again."""
        staging: list[Any] = []
        if staged is not None:
            for name, buffer in staged.inputs.items():
                self._buffers[f"in_{name}"] = buffer
            staging.extend(buffer for buffer, _ in staged.uploads.values())
        given = [n for n in ("color", "albedo", "normal", "depth") if getattr(frame, n) is not None]
        early = [] if restart else ["motion", *_tap_images(params, given)]
        if early:
            if staged is None:
                self._upload(frame, early, staging)
            self._queue_gather(params, early)
        if staged is None:
            self._upload(frame, [n for n in given if n not in early], staging)
        encoder = self._device.create_command_encoder("oidn/temporal/passes")
        if timestamps is not None:
            encoder.write_timestamps(PassTimestamps(timestamps, 1))
        self._dispatch(
            encoder,
            self._kernel("pack", given=self._bound(given, True)),
            (*(f"in_{n}" for n in given), "signal", "next_guide"),
        )
        if not restart:
            self._encode_accumulation(encoder, params)
        self._dispatch(encoder, self._kernel("restart"), ("signal", "counter", "reprojection"))
        if timestamps is not None:
            encoder.write_timestamps(PassTimestamps(timestamps, 2))
        self._device.submit([encoder.finish()])
        return staging

    def _queue_gather(self, params: tp.TemporalParams, early: list[str]) -> None:
        """Submit the pack of the images ``early`` (motion and the tap tests' guides) and
        the gather half of the reprojection of the stored history."""
        encoder = self._device.create_command_encoder("oidn/temporal/gather")
        self._dispatch(
            encoder,
            self._kernel("pack", given=self._bound(early, False)),
            (
                *(f"in_{n}" for n in ("albedo", "normal", "depth", "motion") if n in early),
                "next_guide",
                "motion_finite",
            ),
        )
        self._dispatch(
            encoder,
            self._kernel("gather", params),
            ("motion_finite", "next_guide", "prev_guide", "prev_state", "hist"),
        )
        self._device.submit([encoder.finish()])

    def _encode_accumulation(self, encoder: Any, params: tp.TemporalParams) -> None:
        """The accumulation half of the reprojection (which also counts the pixels with
        history and marks the others), its light-change test in place and the input
        history dropped near disocclusions."""
        changes, near = params.change_sigmas != 0, params.disocclusion_margin > 0
        self._dispatch(
            encoder,
            self._kernel("accumulate", params),
            (
                "motion_finite",
                "next_guide",
                "signal",
                "hist",
                "reprojection",
                *(["luma"] if changes else []),
                *(["missing"] if near else []),
                "counter",
            ),
        )
        if changes:  # in place
            self._dispatch(
                encoder, self._kernel("changes", params), ("signal", "luma", "reprojection")
            )
        if near:
            self._dispatch(encoder, self._kernel("near_rows", params), ("missing", "rows"))
            self._dispatch(
                encoder, self._kernel("near", params), ("signal", "rows", "reprojection")
            )

    @staticmethod
    def _bound(names: list[str], signal: bool) -> tuple[bool, ...]:
        """`kernels.temporal.generate_pack`'s flags for the images ``names``: albedo,
        normal, depth bound; the signal written (else the motion)."""
        return (*(n in names for n in ("albedo", "normal", "depth")), signal)

    def _encode_stabilize(self, encoder: Any, params: tp.TemporalParams) -> None:
        self._dispatch(
            encoder,
            self._kernel("stabilize", params),
            ("denoised", "reprojection", "output", "next_state"),
        )

    def _encode_readback(self, encoder: Any, height: int, width: int, frame_uniform: Any) -> Any:
        """Copy the output, the count and the input scale into the readback buffer."""
        out_bytes = height * width * 3 * F32_BYTES
        readback = self._buffers[f"readback{self._readback_turn}"]
        self._readback_turn = 1 - self._readback_turn  # the next frame's may be read later
        encoder.copy_buffer(self._buffers["output"], 0, readback, 0, out_bytes)
        encoder.copy_buffer(self._buffers["counter"], 0, readback, out_bytes, F32_BYTES)
        encoder.copy_buffer(frame_uniform, 0, readback, out_bytes + F32_BYTES, F32_BYTES)
        return readback

    def _read(self, readback: Any, height: int, width: int) -> tuple[np.ndarray, int, float]:
        """Wait for the frame: ``(output, pixels with history, input scale)``."""
        pixels = height * width * 3
        output = np.empty((height, width, 3), np.float32)
        tail: list[Any] = []

        def copy_out(mapped: np.ndarray) -> None:
            parallel_copyto(output.reshape(-1).view(np.uint8), mapped[: pixels * F32_BYTES])
            rest = mapped[pixels * F32_BYTES :]
            tail.append(
                (
                    int(rest[:F32_BYTES].view(np.uint32)[0]),
                    float(rest[F32_BYTES:].view(np.float32)[0]),
                )
            )

        start = time.perf_counter()
        waited = self._device.read_mapped_with(readback, pixels * F32_BYTES + TAIL_BYTES, copy_out)
        copied = time.perf_counter() - start
        self.last_host_ms = {"wait": waited * 1e3, "readback": (copied - waited) * 1e3}
        return output, tail[0][0], tail[0][1]

    def _timestamps(self) -> Any:
        """The query set of a profiled frame, or None."""
        if not self.profile or not self._device.capabilities.has_timestamps:
            return None
        query = self._buffers.get("timestamps")
        if query is None:
            count = len(PHASES) + 1
            query = self._resources.track(
                QUERY_SET, self._device.create_query_set("oidn/temporal/timestamps", count)
            )
            self._buffers["timestamps"] = query
            self._buffers["resolve"] = self._make(
                "resolve", 8 * count, BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC
            )
            self._buffers["kernel_timestamps"] = self._resources.track(
                QUERY_SET, (self._device.create_query_set("oidn/temporal/kernels", KERNEL_STAMPS))
            )
            self._buffers["kernel_resolve"] = self._make(
                "kernel_resolve",
                8 * KERNEL_STAMPS,
                BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC,
            )
        return query

    def _stamp(self, query: Any, index: int) -> None:
        encoder = self._device.create_command_encoder("oidn/temporal/timestamp")
        encoder.write_timestamps(PassTimestamps(query, index))
        self._device.submit([encoder.finish()])

    def _read_timestamps(self) -> None:
        raw = self._device.read_buffer(self._buffers["resolve"], 0, 8 * (len(PHASES) + 1))
        ticks = np.frombuffer(raw, np.uint64).astype(np.int64)
        period = self._device.timestamp_period_ns
        self.last_gpu_ms = {
            phase: max(0, int(ticks[i + 1] - ticks[i])) * period / 1e6
            for i, phase in enumerate(PHASES)
        }
        names, self._kernel_stamps = self._kernel_stamps or [], None
        if names:
            raw = self._device.read_buffer(self._buffers["kernel_resolve"], 0, 16 * len(names))
            ticks = np.frombuffer(raw, np.uint64).astype(np.int64)
            self.last_kernel_ms = {
                name: max(0, int(ticks[2 * i + 1] - ticks[2 * i])) * period / 1e6
                for i, name in enumerate(names)
            }
