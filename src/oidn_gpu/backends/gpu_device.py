"""The GPU device interface: what the wgpu executor and denoise pipeline ask of a device.

`GpuDevice` is the narrow surface through which the wgpu backend talks to a GPU:
buffers, uploads, shader modules, pipelines, bind groups, command encoders,
submissions, fences, query sets and readback. Two classes implement it:
`backends.wgpu.device.WgpuDevice` runs everything on a wgpu device, and
`record.device.RecordingDevice` records it into a replayable program. Neither
subclasses the other; both share the helpers of this module:

- `buffer_byte_size`: the one rounding of buffer sizes (whole 4-byte words, at
  least one word) and the check against the device's largest buffer;
- `padded_bytes`: initial buffer data padded to that size;
- `DeferredRelease`: objects released only once a queue fence says the GPU has
  finished the work submitted before they were retired.

A `CommandEncoder` records work for one submission. Its one `dispatch` helper
binds a pipeline and its bind group and dispatches a workgroup grid; consecutive
dispatches share one compute pass (a dispatch with timestamps gets its own).

This module imports no GPU library, so the recorder, the kernels' tests and
type checks work without wgpu.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

from oidn_gpu.errors import OutOfMemoryError


class BufferUsage(enum.IntFlag):
    """Buffer usage flags, with WebGPU's values (``GPUBufferUsage`` in the WebGPU spec);
    wgpu and recorded programs use the same bits."""

    MAP_READ = 0x0001
    MAP_WRITE = 0x0002
    COPY_SRC = 0x0004
    COPY_DST = 0x0008
    INDEX = 0x0010
    VERTEX = 0x0020
    UNIFORM = 0x0040
    STORAGE = 0x0080
    INDIRECT = 0x0100
    QUERY_RESOLVE = 0x0200


# Activation and image buffers: bound as storage, filled and read back by copies.
STORAGE_USAGE = BufferUsage.STORAGE | BufferUsage.COPY_SRC | BufferUsage.COPY_DST

# The optional features the kernels can use, by their wgpu-native names.
FEATURE_F16 = "shader-f16"
FEATURE_SUBGROUP = "subgroup"
FEATURE_TIMESTAMP = "timestamp-query"
OPTIONAL_FEATURES = (FEATURE_F16, FEATURE_SUBGROUP, FEATURE_TIMESTAMP)

# WGSL `enable`/capability names used in Kernel.features -> device feature needed.
KERNEL_FEATURE_TO_DEVICE = {
    "f16": FEATURE_F16,
    "shader-f16": FEATURE_F16,
    "subgroups": FEATURE_SUBGROUP,
    "subgroup": FEATURE_SUBGROUP,
}

# Buffer sizes are whole 32-bit words: WebGPU requires copy and write sizes that are
# multiples of 4 bytes (COPY_BUFFER_ALIGNMENT in the WebGPU spec).
WORD_BYTES = 4


def buffer_byte_size(label: str, byte_size: int, max_buffer_size: int, holder: str) -> int:
    """The size a buffer of ``byte_size`` bytes is created with: whole words, at least one.

    Args:
        label: the buffer's label, for the error message.
        byte_size: the bytes asked for.
        max_buffer_size: the largest buffer ``holder`` allows.
        holder: who imposes the limit, e.g. ``"the device"``.

    Raises:
        OutOfMemoryError: the rounded size is larger than ``max_buffer_size``.
    """
    size = max(WORD_BYTES, -(-int(byte_size) // WORD_BYTES) * WORD_BYTES)
    if size > max_buffer_size:
        raise OutOfMemoryError(
            f"buffer '{label}' needs {size} bytes but {holder} allows at most "
            f"{max_buffer_size}; use smaller tiles"
        )
    return size


def padded_bytes(data: np.ndarray | bytes) -> bytes:
    """Initial buffer contents as bytes, zero padded to `buffer_byte_size`'s rounding."""
    raw = np.ascontiguousarray(data).tobytes() if isinstance(data, np.ndarray) else bytes(data)
    size = max(WORD_BYTES, -(-len(raw) // WORD_BYTES) * WORD_BYTES)
    return raw + b"\0" * (size - len(raw))


@dataclass(frozen=True)
class AdapterInfo:
    """What the adapter says about itself."""

    vendor: str
    architecture: str
    device: str
    description: str
    adapter_type: str
    backend_type: str

    @property
    def is_cpu(self) -> bool:
        return self.adapter_type.lower() == "cpu"

    @property
    def is_discrete(self) -> bool:
        return "discrete" in self.adapter_type.lower()


@dataclass(frozen=True)
class Capabilities:
    """Features and limits of an open device, frozen at creation.

    Attributes:
        features: device feature names (wgpu-native spelling).
        limits: every device limit as ``(name, value)`` pairs, sorted by name.
        subgroup_min_size: smallest subgroup size the adapter reports (0 if unknown).
        subgroup_max_size: largest subgroup size the adapter reports (0 if unknown).
        adapter: the adapter's description.
    """

    features: frozenset[str]
    limits: tuple[tuple[str, int], ...]
    subgroup_min_size: int
    subgroup_max_size: int
    adapter: AdapterInfo

    def limit(self, name: str) -> int:
        """The value of limit ``name`` (wgpu spelling, e.g. ``max-buffer-size``)."""
        for key, value in self.limits:
            if key == name:
                return value
        raise KeyError(f"unknown device limit '{name}'")

    @property
    def has_f16(self) -> bool:
        return FEATURE_F16 in self.features

    @property
    def has_subgroups(self) -> bool:
        return FEATURE_SUBGROUP in self.features

    @property
    def has_timestamps(self) -> bool:
        return FEATURE_TIMESTAMP in self.features

    @property
    def max_storage_buffer_binding_size(self) -> int:
        return self.limit("max-storage-buffer-binding-size")

    @property
    def max_buffer_size(self) -> int:
        return self.limit("max-buffer-size")

    @property
    def max_compute_workgroup_storage_size(self) -> int:
        return self.limit("max-compute-workgroup-storage-size")

    @property
    def max_compute_invocations_per_workgroup(self) -> int:
        return self.limit("max-compute-invocations-per-workgroup")

    @property
    def max_compute_workgroup_size(self) -> tuple[int, int, int]:
        return (
            self.limit("max-compute-workgroup-size-x"),
            self.limit("max-compute-workgroup-size-y"),
            self.limit("max-compute-workgroup-size-z"),
        )

    @property
    def max_compute_workgroups_per_dimension(self) -> int:
        return self.limit("max-compute-workgroups-per-dimension")

    @property
    def max_storage_buffers_per_shader_stage(self) -> int:
        return self.limit("max-storage-buffers-per-shader-stage")

    def supports_kernel_features(self, features: Sequence[str]) -> bool:
        """Whether every WGSL feature a kernel declares is enabled on this device."""
        return all(KERNEL_FEATURE_TO_DEVICE.get(f, f) in self.features for f in features)

    def describe(self) -> str:
        a = self.adapter
        return f"{a.device} ({a.backend_type}, {a.adapter_type}; {a.description})".strip()


@dataclass(frozen=True)
class PassTimestamps:
    """Timestamp queries written at the beginning and/or end of one compute pass."""

    query_set: Any
    begin_index: int | None = None
    end_index: int | None = None


class Fence(Protocol):
    """Signals once all work submitted before its creation has finished."""

    def is_done(self) -> bool: ...

    def wait(self, timeout_s: float | None = None) -> bool: ...


class CommandEncoder(Protocol):
    """Records the work of one submission."""

    def dispatch(
        self,
        pipeline: Any,
        bind_group: Any,
        groups: Sequence[int],
        *,
        label: str = "",
        timestamps: PassTimestamps | None = None,
    ) -> None:
        """Bind ``pipeline`` and ``bind_group`` (group 0) and dispatch ``groups`` (x, y, z)."""
        ...

    def write_timestamps(self, timestamps: PassTimestamps, *, label: str = "") -> None:
        """Write timestamps with no work in between (an empty compute pass)."""
        ...

    def copy_buffer(
        self,
        source: Any,
        source_offset: int,
        destination: Any,
        destination_offset: int,
        byte_size: int,
    ) -> None: ...

    def resolve_timestamps(self, query_set: Any, count: int, destination: Any) -> None:
        """Resolve queries ``0..count-1`` of ``query_set`` into ``destination`` (u64 each)."""
        ...

    def finish(self) -> Any:
        """The command buffer to `GpuDevice.submit`."""
        ...


@runtime_checkable
class GpuDevice(Protocol):
    """What the wgpu executor and the denoise pipeline ask of a device.

    Attributes:
        capabilities: features and limits.
        owned: whether `close` destroys the underlying device.
        handle: the object that identifies the underlying device; the pipeline cache
            of that device hangs off it, so the two are freed together.
    """

    capabilities: Capabilities
    owned: bool

    @property
    def handle(self) -> Any: ...

    def create_buffer(self, label: str, byte_size: int, usage: int = STORAGE_USAGE) -> Any:
        """A zero-initialized buffer, `buffer_byte_size` bytes."""
        ...

    def create_buffer_with_data(self, label: str, data: np.ndarray | bytes, usage: int) -> Any: ...

    def write_buffer(self, buffer: Any, byte_offset: int, data: np.ndarray | bytes) -> None:
        """A queue write, ordered with submissions."""
        ...

    def read_buffer(self, buffer: Any, byte_offset: int = 0, byte_size: int | None = None) -> bytes:
        """Copy a buffer (COPY_SRC usage) to the host; waits for the queue."""
        ...

    def read_mapped(self, buffer: Any, out: np.ndarray) -> float:
        """Copy the first ``out.nbytes`` bytes of a MAP_READ buffer into the C-contiguous
        ``out``, straight from the mapped memory; waits for the work writing it and
        returns the seconds spent waiting (the copy excluded)."""
        ...

    def create_query_set(self, label: str, count: int) -> Any: ...

    def create_shader_module(self, label: str, source: str, *, trusted: bool) -> Any: ...

    def create_compute_pipeline(self, label: str, module: Any, entry_point: str) -> Any: ...

    def create_bind_group(self, label: str, pipeline: Any, buffers: Sequence[Any]) -> Any:
        """Bind whole ``buffers`` in order to bindings 0..n-1 of group 0."""
        ...

    def create_command_encoder(self, label: str) -> CommandEncoder: ...

    def submit(self, command_buffers: Sequence[Any]) -> None: ...

    def fence(self) -> Fence:
        """A fence for all work submitted so far."""
        ...

    def wait_idle(self) -> None:
        """Block until the queue has finished all submitted work."""
        ...

    @property
    def timestamp_period_ns(self) -> float: ...

    @property
    def queue_lock(self) -> Any:
        """Reentrant lock shared by everything that uses this device's queue: a whole
        denoise (uploads, submissions, readback) holds it, so threads take turns."""
        ...

    def close(self) -> None: ...


# The queue lock hangs off the device's handle (like the pipeline cache), so every
# `GpuDevice` wrapping one wgpu device shares it. wgpu-py's queue helpers (staging copies
# and buffer mapping when reading back) are not safe from several threads at once
# (pygfx/wgpu-py issue 781), so whole denoises on one device take turns.
_QUEUE_LOCK_ATTRIBUTE = "_oidn_gpu_queue_lock"
_queue_locks_lock = threading.Lock()


def queue_lock_of(handle: Any) -> Any:
    """The reentrant queue lock of the device identified by ``handle`` (created once)."""
    lock = getattr(handle, _QUEUE_LOCK_ATTRIBUTE, None)
    if lock is None:
        with _queue_locks_lock:
            lock = getattr(handle, _QUEUE_LOCK_ATTRIBUTE, None)
            if lock is None:
                lock = threading.RLock()
                setattr(handle, _QUEUE_LOCK_ATTRIBUTE, lock)
    return lock


T = TypeVar("T")


class DeferredRelease(Generic[T]):
    """Objects waiting for the GPU before they are released.

    Work recorded with a buffer may still be in flight when its owner drops it;
    `retire` takes a fence of everything submitted so far and `collect` releases
    the objects whose fence has signalled.

    Args:
        device: the device whose queue the fences watch.
        release: called once per retired object when it is safe to free.
    """

    def __init__(self, device: GpuDevice, release: Callable[[T], None]) -> None:
        self._device = device
        self._release = release
        self._pending: list[tuple[Fence, T]] = []

    def retire(self, item: T) -> None:
        """Release ``item`` once the queue finished the work submitted so far."""
        self._pending.append((self._device.fence(), item))

    def collect(self) -> None:
        """Release every retired object whose fence has signalled."""
        keep = []
        for fence, item in self._pending:
            if fence.is_done():
                self._release(item)
            else:
                keep.append((fence, item))
        self._pending = keep

    def release_all(self) -> None:
        """Wait for the queue if anything is pending, then release everything."""
        pending, self._pending = self._pending, []
        if pending:
            self._device.wait_idle()
        for _, item in pending:
            self._release(item)

    def __len__(self) -> int:
        return len(self._pending)


__all__ = [
    "FEATURE_F16",
    "FEATURE_SUBGROUP",
    "FEATURE_TIMESTAMP",
    "OPTIONAL_FEATURES",
    "STORAGE_USAGE",
    "AdapterInfo",
    "BufferUsage",
    "Capabilities",
    "CommandEncoder",
    "DeferredRelease",
    "Fence",
    "GpuDevice",
    "PassTimestamps",
    "buffer_byte_size",
    "padded_bytes",
    "queue_lock_of",
]
