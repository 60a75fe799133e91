"""GPU time of whole command buffers, for the benchmarks.

`open_timed_device` opens a `TimedDevice`: a `WgpuDevice` whose command encoders carry a
timestamp at their start and another at their end while a `CommandTimer` is active, so the
GPU time of everything a denoise records (its passes, the network, the copies) is measured
without changing the code that records it. Per-layer times are `profiling.py`'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from oidn_gpu.backends.gpu_device import BufferUsage, PassTimestamps
from oidn_gpu.backends.wgpu.device import WgpuDevice, open_device


class TimedDevice(WgpuDevice):
    """A `WgpuDevice` whose command encoders can carry start/end timestamps (`CommandTimer`)."""

    def __init__(self, base: Any) -> None:
        super().__init__(base.device, base.adapter, owned=False)
        self._base = base
        self.timer: CommandTimer | None = None

    def create_command_encoder(self, label: str) -> Any:
        encoder = super().create_command_encoder(label)
        timer = self.timer
        return timer.wrap(encoder) if timer is not None and timer.active else encoder

    def close_base(self) -> None:
        self._base.close()


def open_timed_device(device: Any = None) -> Any:
    """`open_device(device)` as a `TimedDevice` (the same wgpu device, closed with it)."""
    return TimedDevice(open_device(device))


class CommandTimer:
    """GPU time of whole command buffers: an empty compute pass writes a timestamp at the
    start of each encoder of a `TimedDevice` and another one at its end.

    Use as a context manager around submissions, wait for the queue, then call
    `elapsed_ms` (one value per encoder; empty without ``timestamp-query`` or when the
    device is not a `TimedDevice`).
    """

    MAX_ENCODERS = 512

    def __init__(self, device: Any) -> None:
        self.device = device
        self.enabled = isinstance(device, TimedDevice) and device.capabilities.has_timestamps
        self.active = False
        self._query_set: Any = None
        self._count = 0

    def __enter__(self) -> CommandTimer:
        self._count = 0
        if self.enabled:
            if self._query_set is None:
                self._query_set = self.device.create_query_set(
                    "oidn/bench/timer", 2 * self.MAX_ENCODERS
                )
            self.device.timer = self
            self.active = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.active = False
        if self.enabled:
            self.device.timer = None

    def wrap(self, encoder: Any) -> Any:
        if self._count >= self.MAX_ENCODERS:
            return encoder
        index = self._count
        self._count += 1
        return _TimedEncoder(encoder, self._query_set, 2 * index)

    def elapsed_ms(self) -> list[float]:
        """Waits for the queue; GPU ms of each encoder recorded in the last ``with``."""
        if not self.enabled or self._count == 0:
            return []
        count = 2 * self._count
        device = self.device
        resolve = device.create_buffer(
            "oidn/bench/timer/resolve", count * 8, BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC
        )
        encoder = WgpuDevice.create_command_encoder(device, "oidn/bench/timer/resolve")
        encoder.resolve_timestamps(self._query_set, count, resolve)
        device.submit([encoder.finish()])
        ticks = np.frombuffer(device.read_buffer(resolve, 0, count * 8), np.uint64).astype(np.int64)
        resolve.destroy()
        period = device.timestamp_period_ns
        return [
            max(0, int(ticks[2 * i + 1] - ticks[2 * i])) * period / 1e6 for i in range(self._count)
        ]


class _TimedEncoder:
    """Wraps a command encoder: a timestamp pass first, another one in `finish`."""

    def __init__(self, encoder: Any, query_set: Any, index: int) -> None:
        self._encoder = encoder
        self._query_set = query_set
        self._index = index
        encoder.write_timestamps(
            PassTimestamps(query_set, begin_index=index), label="oidn/bench/timer/start"
        )

    def finish(self) -> Any:
        self._encoder.write_timestamps(
            PassTimestamps(self._query_set, end_index=self._index + 1),
            label="oidn/bench/timer/end",
        )
        return self._encoder.finish()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)
