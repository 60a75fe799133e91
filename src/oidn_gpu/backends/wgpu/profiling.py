"""Per-layer GPU timestamps of one network execution.

`Profiler.arm` asks for the next execution to be timed; `begin` then gives one
`PassTimestamps` per layer (each layer's dispatch gets its own compute pass with
a timestamp at its beginning and end), `finish` resolves the queries into a
buffer in the same command encoder, and `last` reads that buffer (waiting for
the GPU) into an `ExecutionProfile`. At most one profile is in flight. Off, it
costs nothing: no query set exists and dispatches share one compute pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu.backends.gpu_device import BufferUsage, CommandEncoder, GpuDevice, PassTimestamps
from oidn_gpu.backends.wgpu.resources import BUFFER, QUERY_SET, ResourceTracker

TIMESTAMP_BYTES = 8  # a resolved timestamp query is one u64


@dataclass(frozen=True)
class LayerTiming:
    """GPU time of one layer (one compute pass) and its arithmetic."""

    name: str
    kernel: str
    elapsed_ms: float
    flops: float

    @property
    def gflops_per_s(self) -> float:
        return self.flops / (self.elapsed_ms * 1e6) if self.elapsed_ms > 0 else 0.0


@dataclass(frozen=True)
class ExecutionProfile:
    """Per-layer GPU timestamps of one execution."""

    height: int
    width: int
    total_ms: float
    layers: tuple[LayerTiming, ...]

    @property
    def flops(self) -> float:
        return sum(layer.flops for layer in self.layers)


@dataclass(frozen=True)
class TimedLayer:
    """What a profile reports of one layer besides its time."""

    name: str
    kernel: str
    flops: float


@dataclass
class _Pending:
    height: int
    width: int
    layers: tuple[TimedLayer, ...]
    query_set: Any
    resolve: Any
    count: int


class Profiler:
    """Timestamp queries around each layer of an armed execution.

    Args:
        device: the executor's device.
        resources: the executor's tracker (query sets and buffers are counted there).
    """

    def __init__(self, device: GpuDevice, resources: ResourceTracker) -> None:
        self._device = device
        self._resources = resources
        self._armed = False
        self._pending: _Pending | None = None
        self._last: ExecutionProfile | None = None

    def arm(self) -> bool:
        """Time the next execution; False when the device has no ``timestamp-query``."""
        if not self._device.capabilities.has_timestamps:
            return False
        self._armed = True
        return True

    def begin(
        self, height: int, width: int, layers: Sequence[TimedLayer]
    ) -> list[PassTimestamps] | None:
        """The timestamps of each layer's pass when armed (which this disarms), else None.

        After encoding the layers, call `finish` with the same encoder.
        """
        if not self._armed:
            return None
        self._armed = False
        self.resolve()  # keep one profile in flight at most
        count = 2 * len(layers)
        query_set = self._resources.track(
            QUERY_SET, self._device.create_query_set("oidn/profile", count)
        )
        resolve = self._resources.track(
            BUFFER,
            self._device.create_buffer(
                "oidn/profile/resolve",
                count * TIMESTAMP_BYTES,
                BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC,
            ),
        )
        self._pending = _Pending(height, width, tuple(layers), query_set, resolve, count)
        return [PassTimestamps(query_set, 2 * i, 2 * i + 1) for i in range(len(layers))]

    def finish(self, encoder: CommandEncoder) -> None:
        """Resolve the queries of the execution `begin` timed, in that execution's encoder."""
        pending = self._pending
        if pending is not None:
            encoder.resolve_timestamps(pending.query_set, pending.count, pending.resolve)

    def resolve(self) -> None:
        """Read the pending profile's timestamps (waits for the GPU) into `last`."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        try:
            raw = self._device.read_buffer(pending.resolve, 0, pending.count * TIMESTAMP_BYTES)
        finally:
            self._resources.release(pending.query_set)
            self._resources.release(pending.resolve)
        ticks = np.frombuffer(raw, np.uint64).astype(np.int64)
        period = self._device.timestamp_period_ns
        timings = []
        for index, layer in enumerate(pending.layers):
            elapsed = max(0, int(ticks[2 * index + 1] - ticks[2 * index])) * period / 1e6
            timings.append(LayerTiming(layer.name, layer.kernel, elapsed, layer.flops))
        total = sum(t.elapsed_ms for t in timings)
        self._last = ExecutionProfile(pending.height, pending.width, total, tuple(timings))

    @property
    def last(self) -> ExecutionProfile | None:
        """The last profiled execution (waits for its timestamps)."""
        self.resolve()
        return self._last

    @property
    def pending(self) -> int:
        """1 while a profile waits to be read, else 0."""
        return 1 if self._pending is not None else 0

    def close(self) -> None:
        """Drop a pending profile and release its queries."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._resources.release(pending.query_set)
            self._resources.release(pending.resolve)
