"""The staging of later frames for `WgpuTemporalSession.prefetch`.

`Prefetcher.start` takes a frame's upload buffers (one of two sets, mapped, on the
caller's thread, which holds the device's queue lock) and a worker thread copies the
frame's images into them while the caller goes on with the current frame: the worker
only writes host memory (the mapped ranges), every wgpu call stays on the caller's
thread. `Prefetcher.submit_ready` submits the GPU copies of a finished staging into the
session's input buffers (behind the work already queued, which has read them); the
frame's own call then finds its images on the device (`Prefetcher.take`).

A staging that failed, or whose input buffers another upload has overwritten since, is
dropped: the frame is then uploaded from its host arrays as without prefetch, which
raises the frame's error in its turn, so nothing of another frame is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oidn_gpu.backends.base import TemporalFrame
from oidn_gpu.backends.wgpu.frames import F32_BYTES
from oidn_gpu.image.host_copy import parallel_copyto

ROLES = ("color", "albedo", "normal", "motion", "depth")
CHANNELS = {"motion": 2, "depth": 1}  # the others 3
SLOTS = 2


@dataclass(eq=False)
class Staged:
    """A frame staged in upload buffers ``slot``: ``uploads`` ``{role: (buffer, bytes)}``;
    ``inputs`` ``{role: input buffer}`` once its GPU copies are submitted."""

    frame: TemporalFrame
    slot: int
    uploads: dict[str, tuple[Any, int]]
    future: Future
    inputs: dict[str, Any] = field(default_factory=dict)

    def ready(self) -> bool:
        """The worker finished this staging without an error."""
        return self.future.done() and self.future.exception() is None


class Prefetcher:
    """Up to `SLOTS` frames staged ahead for one session.

    Args:
        dense: the session's conversion of a frame image into the bytes it uploads
            (``dense(role, array)``: C-contiguous float32).
    """

    def __init__(self, dense: Callable[[str, Any], np.ndarray]) -> None:
        self._dense = dense
        self._pending: list[Staged] = []  # oldest first
        self._taken: list[Staged] = []  # taken by frames not finished yet
        self._worker: ThreadPoolExecutor | None = None
        self.resident: Staged | None = None  # whose images the input buffers hold

    def start(self, device: Any, staging: Any, frame: TemporalFrame) -> None:
        """Start staging ``frame`` (the caller holds the device's queue lock); a frame
        whose images have no uploadable shape is left alone (its own call raises)."""
        sizes = _upload_sizes(frame)
        if sizes is None:
            return
        slot = self._free_slot(device)
        if slot is None:
            return
        uploads: dict[str, tuple[Any, int]] = {}
        views: dict[str, np.ndarray] = {}
        for role, size in sizes.items():
            buffer = staging.get(f"temporal-{role}/upload{slot}", size, upload=True)
            device.map_for_write(buffer)
            uploads[role] = (buffer, size)
            views[role] = np.frombuffer(device.mapped_range(buffer, size), np.uint8)
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="oidn-wgpu-temporal-stage")
        future = self._worker.submit(self._fill, frame, views)
        self._pending.append(Staged(frame, slot, uploads, future))

    def _fill(self, frame: TemporalFrame, views: dict[str, np.ndarray]) -> None:
        """On the worker: the frame's images copied into the mapped upload buffers."""
        for role, view in views.items():
            source = self._dense(role, getattr(frame, role)).reshape(-1).view(np.uint8)
            parallel_copyto(view[: len(source)], source)
            view[len(source) :] = 0

    def _free_slot(self, device: Any) -> int | None:
        """A set of upload buffers that no staging holds (pending ones are dropped for it,
        the oldest first), or None while frames not finished hold both."""
        while True:
            used = {staged.slot for staged in (*self._pending, *self._taken)}
            free = [slot for slot in range(SLOTS) if slot not in used]
            if free or not self._pending:
                return free[0] if free else None
            self._drop(device, self._pending.pop(0))

    def _drop(self, device: Any, staged: Staged) -> None:
        """Forget a staging: after its worker finished; its upload buffers mapped again
        where its copies were submitted (they are mapped once the GPU is done)."""
        staged.future.exception()  # waits; the error belongs to the frame, never raised
        if staged.inputs:
            for buffer, _ in staged.uploads.values():
                device.map_for_write(buffer, wait=False)
        if self.resident is staged:
            self.resident = None

    def take(self, device: Any, staging: Any, frame: TemporalFrame) -> Staged | None:
        """The staging of ``frame`` with its copies submitted (submitted now if they were
        not), or None (not prefetched, failed, or its input buffers overwritten since)."""
        staged = next((s for s in self._pending if s.frame is frame), None)
        if staged is None:
            return None
        self._pending.remove(staged)
        self._taken.append(staged)
        if staged.future.exception() is not None or (staged.inputs and self.resident is not staged):
            self.done_with(staged)
            self._drop(device, staged)
            return None
        if not staged.inputs:
            self._submit(device, staging, staged)
        return staged

    def next_staged(self) -> Staged | None:
        """The oldest staging not taken yet."""
        return self._pending[0] if self._pending else None

    def done_with(self, staged: Staged) -> None:
        """The frame that took ``staged`` is finished: its upload buffers may be reused."""
        if any(s is staged for s in self._taken):
            self._taken = [s for s in self._taken if s is not staged]

    def submit_ready(self, device: Any, staging: Any) -> None:
        """Submit the GPU copies of the oldest finished staging not yet submitted (the
        input buffers hold one frame at a time)."""
        waiting = [s for s in self._pending if not s.inputs]
        if waiting and waiting[0].ready() and self.resident not in self._pending:
            self._submit(device, staging, waiting[0])

    def _submit(self, device: Any, staging: Any, staged: Staged) -> None:
        encoder = device.create_command_encoder("oidn/temporal/prefetched")
        for role, (buffer, size) in staged.uploads.items():
            buffer.unmap()
            target = staging.get(f"temporal-{role}", size)
            encoder.copy_buffer(buffer, 0, target, 0, size)
            staged.inputs[role] = target
        device.submit([encoder.finish()])
        self.resident = staged

    def overwritten(self) -> None:
        """The input buffers were uploaded into otherwise."""
        self.resident = None

    def close(self, device: Any) -> None:
        """Join the worker and forget every staging (before the buffers go)."""
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None
        for staged in self._pending:
            self._drop(device, staged)
        self._pending.clear()
        self._taken.clear()
        self.resident = None


def _upload_sizes(frame: TemporalFrame) -> dict[str, int] | None:
    """The bytes each given image of ``frame`` uploads (dense float32), or None where an
    image has no ``[H, W]`` or ``[H, W, C]`` shape of the color's size."""
    try:
        height, width = np.shape(frame.color)[:2]
    except ValueError:
        return None
    sizes = {}
    for role in ROLES:
        image = getattr(frame, role)
        if image is None:
            continue
        shape = np.shape(image)
        if len(shape) not in (2, 3) or shape[:2] != (height, width):
            return None
        sizes[role] = max(height * width * CHANNELS.get(role, 3) * F32_BYTES, F32_BYTES)
    return sizes
