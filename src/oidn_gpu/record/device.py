"""`RecordingDevice`: a `GpuDevice` that records everything submitted into a `Program`.

The wgpu backend talks to the GPU only through the `backends.gpu_device.GpuDevice`
interface (buffers, uploads, shader modules, pipelines, bind groups, command
encoders, submits, fences). `RecordingDevice` implements that interface, so the
unchanged `WgpuExecutor` and `GpuDenoiser` run against it: nothing is
monkeypatched, no wgpu object is imitated, and there is no second code path.
It needs no wgpu. It records

- buffers (size, usage, initial data, label) in creation order;
- shader modules and compute pipelines (entry point, automatic layout);
- bind groups (pipeline, group, whole-buffer entries);
- operations in queue order: submits of dispatches and buffer copies, and
  queue writes;

and `to_program` turns that into a `record.format.Program`. Reading results
back is impossible (nothing runs): `read_buffer` raises `InvalidOperationError`.
Timestamp queries are reported absent, so profiling paths are skipped.

Pipelines may be compiled on the pipeline cache's worker threads, so their
creation order is not deterministic; `to_program` numbers pipelines by first
use (bind groups are created in the caller's order) and shaders by pipeline,
which makes the bytes of a recording reproducible.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oidn_gpu.backends.gpu_device import (
    FEATURE_F16,
    FEATURE_SUBGROUP,
    STORAGE_USAGE,
    AdapterInfo,
    Capabilities,
    PassTimestamps,
    buffer_byte_size,
    padded_bytes,
)
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.record.config import RecordConfig
from oidn_gpu.record.format import (
    U32_MAX,
    BindGroupDesc,
    BindingDesc,
    BufferDesc,
    Copy,
    Dispatch,
    PipelineDesc,
    Program,
    ProgramMeta,
    ShaderDesc,
    Submit,
    Write,
)

# Limits the config does not carry: the largest a program can express (u32 sizes,
# checked again against the replaying device) and WebGPU's defaults for the rest.
RECORDING_LIMITS = {
    "max-buffer-size": U32_MAX + 1 - 4,
    "max-storage-buffer-binding-size": U32_MAX + 1 - 4,
    "max-uniform-buffer-binding-size": 65536,
    "max-compute-workgroup-size-z": 64,
    "max-storage-buffers-per-shader-stage": 8,
    "max-bind-groups": 4,
}
_CONFIG_FEATURES = {
    "shader-f16": FEATURE_F16,
    "subgroups": FEATURE_SUBGROUP,
    "chromium-experimental-subgroup-matrix": "chromium-experimental-subgroup-matrix",
    "wgpu-cooperative-matrix": "wgpu-cooperative-matrix",
}


def recording_capabilities(config: RecordConfig) -> Capabilities:
    """The `Capabilities` a `RecordingDevice` reports for a config."""
    limits = dict(RECORDING_LIMITS)
    limits.update(
        {
            "max-compute-workgroup-storage-size": config.max_compute_workgroup_storage_size,
            "max-compute-invocations-per-workgroup": config.max_compute_invocations_per_workgroup,
            "max-compute-workgroup-size-x": config.max_compute_workgroup_size_x,
            "max-compute-workgroup-size-y": config.max_compute_workgroup_size_y,
            "max-compute-workgroups-per-dimension": config.max_compute_workgroups_per_dimension,
        }
    )
    return Capabilities(
        features=frozenset(_CONFIG_FEATURES[f] for f in config.features),
        limits=tuple(sorted(limits.items())),
        subgroup_min_size=config.subgroup_min_size,
        subgroup_max_size=config.subgroup_max_size,
        adapter=AdapterInfo(
            vendor="oidn-gpu",
            architecture="",
            device="recording device",
            description="records a replayable program; runs nothing",
            adapter_type="recording",
            backend_type="recording",
        ),
    )


# --- recorded objects (what the executor holds instead of wgpu objects) ---------------------


@dataclass(eq=False)
class RecordedBuffer:
    id: int
    size: int
    usage: int
    label: str
    data: bytes = b""

    def destroy(self) -> None:
        """No-op: a program's buffers live as long as the program."""


@dataclass(eq=False)
class RecordedShader:
    id: int
    code: str
    label: str
    trusted: bool


@dataclass(eq=False)
class RecordedPipeline:
    id: int
    shader: RecordedShader
    entry_point: str
    label: str


@dataclass(eq=False)
class RecordedBindGroup:
    id: int
    pipeline: RecordedPipeline
    group: int
    entries: tuple[tuple[int, RecordedBuffer, int, int], ...]
    label: str


@dataclass(frozen=True)
class _RecordedDispatch:
    pipeline: RecordedPipeline
    bind_group: RecordedBindGroup
    grid: tuple[int, int, int]


@dataclass(frozen=True)
class _RecordedCopy:
    source: RecordedBuffer
    source_offset: int
    destination: RecordedBuffer
    destination_offset: int
    size: int


@dataclass(frozen=True)
class RecordedCommandBuffer:
    commands: tuple[_RecordedDispatch | _RecordedCopy, ...]
    label: str


@dataclass(frozen=True)
class _RecordedWrite:
    buffer: RecordedBuffer
    offset: int
    data: bytes


@dataclass(frozen=True)
class _RecordedSubmit:
    commands: tuple[_RecordedDispatch | _RecordedCopy, ...]


class RecordingCommandEncoder:
    """The `CommandEncoder` interface, recording dispatches and copies in order."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._commands: list[_RecordedDispatch | _RecordedCopy] = []

    def dispatch(
        self,
        pipeline: Any,
        bind_group: Any,
        groups: Sequence[int],
        *,
        label: str = "",
        timestamps: PassTimestamps | None = None,
    ) -> None:
        if timestamps is not None:
            raise InvalidOperationError("a recording device has no timestamp queries")
        if not isinstance(pipeline, RecordedPipeline) or not isinstance(
            bind_group, RecordedBindGroup
        ):
            raise InvalidArgumentError(
                "the pipeline or bind group was not made by this recording device"
            )
        if bind_group.pipeline is not pipeline:
            raise InvalidOperationError(
                f"bind group '{bind_group.label}' was made for pipeline "
                f"'{bind_group.pipeline.label}', not '{pipeline.label}'"
            )
        x, y, z = (int(g) for g in groups)
        self._commands.append(_RecordedDispatch(pipeline, bind_group, (x, y, z)))

    def write_timestamps(self, timestamps: PassTimestamps, *, label: str = "") -> None:
        raise InvalidOperationError("a recording device has no timestamp queries")

    def copy_buffer(
        self,
        source: Any,
        source_offset: int,
        destination: Any,
        destination_offset: int,
        byte_size: int,
    ) -> None:
        self._commands.append(
            _RecordedCopy(
                source, int(source_offset), destination, int(destination_offset), int(byte_size)
            )
        )

    def resolve_timestamps(self, query_set: Any, count: int, destination: Any) -> None:
        raise InvalidOperationError("a recording device has no timestamp queries")

    def finish(self) -> RecordedCommandBuffer:
        return RecordedCommandBuffer(tuple(self._commands), self.label)


class _DoneFence:
    """A fence that has always signalled: nothing recorded is ever in flight."""

    def is_done(self) -> bool:
        return True

    def wait(self, timeout_s: float | None = None) -> bool:
        return True


class _RecordingHandle:
    """Stands for the wgpu device (the pipeline cache is keyed by it)."""


@dataclass
class _Log:
    buffers: list[RecordedBuffer] = field(default_factory=list)
    shaders: list[RecordedShader] = field(default_factory=list)
    pipelines: list[RecordedPipeline] = field(default_factory=list)
    bind_groups: list[RecordedBindGroup] = field(default_factory=list)
    operations: list[_RecordedSubmit | _RecordedWrite] = field(default_factory=list)


class RecordingDevice:
    """A `GpuDevice` that records instead of running (see the module doc).

    Args:
        capabilities: what the device reports (`recording_capabilities` of a config).
    """

    def __init__(self, capabilities: Capabilities) -> None:
        self.capabilities = capabilities
        self.owned = False
        self._handle: _RecordingHandle | None = _RecordingHandle()
        self._lock = threading.Lock()
        self._queue_lock = threading.RLock()
        self._ids = itertools.count()
        self._log = _Log()

    @property
    def handle(self) -> Any:
        """Stands for the device (the pipeline cache hangs off it); None once closed."""
        return self._handle

    @property
    def queue_lock(self) -> Any:
        """Serializes whole recorded denoises, as on a wgpu device."""
        return self._queue_lock

    # -- resources ----------------------------------------------------------------------

    def _new_buffer(self, label: str, byte_size: int, usage: int, data: bytes) -> RecordedBuffer:
        buffer_byte_size(label, byte_size, self.capabilities.max_buffer_size, "a program")
        with self._lock:
            buffer = RecordedBuffer(len(self._log.buffers), byte_size, int(usage), label, data)
            self._log.buffers.append(buffer)
        return buffer

    def create_buffer(self, label: str, byte_size: int, usage: int = STORAGE_USAGE) -> Any:
        size = buffer_byte_size(label, byte_size, self.capabilities.max_buffer_size, "a program")
        return self._new_buffer(label, size, usage, b"")

    def create_buffer_with_data(self, label: str, data: np.ndarray | bytes, usage: int) -> Any:
        padded = padded_bytes(data)
        return self._new_buffer(label, len(padded), usage, padded)

    def write_buffer(self, buffer: Any, byte_offset: int, data: Any) -> None:
        raw = np.ascontiguousarray(data).tobytes() if isinstance(data, np.ndarray) else bytes(data)
        self._check_buffer(buffer)
        with self._lock:
            self._log.operations.append(_RecordedWrite(buffer, int(byte_offset), raw))

    def read_buffer(self, buffer: Any, byte_offset: int = 0, byte_size: int | None = None) -> bytes:
        raise InvalidOperationError(
            "a recording device runs nothing, so it cannot read buffers back; replay the "
            "recorded program on a GPU to get results"
        )

    def read_mapped(self, buffer: Any, out: np.ndarray) -> float:
        self.read_buffer(buffer)
        return 0.0

    def create_query_set(self, label: str, count: int) -> Any:
        raise InvalidOperationError("a recording device has no timestamp queries")

    # -- kernels ------------------------------------------------------------------------

    def create_shader_module(self, label: str, source: str, *, trusted: bool) -> Any:
        with self._lock:
            shader = RecordedShader(next(self._ids), source, label, trusted)
            self._log.shaders.append(shader)
        return shader

    def create_compute_pipeline(self, label: str, module: Any, entry_point: str) -> Any:
        if not isinstance(module, RecordedShader):
            raise InvalidArgumentError("the module was not made by this recording device")
        with self._lock:
            pipeline = RecordedPipeline(next(self._ids), module, entry_point, label)
            self._log.pipelines.append(pipeline)
        return pipeline

    def create_bind_group(self, label: str, pipeline: Any, buffers: Sequence[Any]) -> Any:
        """Bind whole ``buffers`` to bindings 0..n-1 of group 0, as `GpuDevice` does."""
        if not isinstance(pipeline, RecordedPipeline):
            raise InvalidArgumentError("the pipeline was not made by this recording device")
        for buffer in buffers:
            self._check_buffer(buffer)
        entries = tuple((i, b, 0, 0) for i, b in enumerate(buffers))  # size 0 = whole buffer
        with self._lock:
            group = RecordedBindGroup(len(self._log.bind_groups), pipeline, 0, entries, label)
            self._log.bind_groups.append(group)
        return group

    # -- commands -----------------------------------------------------------------------

    def create_command_encoder(self, label: str = "") -> RecordingCommandEncoder:
        return RecordingCommandEncoder(label)

    def submit(self, command_buffers: Sequence[Any]) -> None:
        commands: list[Any] = []
        for cb in command_buffers:
            if not isinstance(cb, RecordedCommandBuffer):
                raise InvalidArgumentError(
                    "the command buffer was not made by this recording device"
                )
            commands.extend(cb.commands)
        with self._lock:
            self._log.operations.append(_RecordedSubmit(tuple(commands)))

    def fence(self) -> Any:
        return _DoneFence()

    def wait_idle(self) -> None:
        """Nothing is ever in flight."""

    @property
    def timestamp_period_ns(self) -> float:
        return 1.0

    def close(self) -> None:
        """Forget everything recorded (the recorded data can be large).

        Dropping the handle also lets the pipeline cache's weak entry for this device go.
        """
        self._log = _Log()
        self._handle = None

    def _check_buffer(self, buffer: Any) -> None:
        if not isinstance(buffer, RecordedBuffer) or (
            buffer.id >= len(self._log.buffers) or self._log.buffers[buffer.id] is not buffer
        ):
            raise InvalidArgumentError("the buffer was not made by this recording device")

    # -- the program --------------------------------------------------------------------

    @property
    def buffers(self) -> tuple[RecordedBuffer, ...]:
        return tuple(self._log.buffers)

    @property
    def operation_count(self) -> int:
        return len(self._log.operations)

    def clear_operations(self) -> None:
        """Drop the operations recorded so far (resources stay)."""
        with self._lock:
            self._log.operations.clear()

    def to_program(
        self,
        inputs: Sequence[RecordedBuffer],
        output: RecordedBuffer,
        *,
        output_external: bool,
        output_width: int,
        output_height: int,
        output_channels: int,
        meta: ProgramMeta | None = None,
    ) -> Program:
        """The recorded program (see the module doc for the numbering of pipelines)."""
        log = self._log
        for buffer in (*inputs, output):
            self._check_buffer(buffer)
        pipeline_order: list[RecordedPipeline] = []
        seen: set[int] = set()
        used = [g.pipeline for g in log.bind_groups] + [
            c.pipeline
            for op in log.operations
            if isinstance(op, _RecordedSubmit)
            for c in op.commands
            if isinstance(c, _RecordedDispatch)
        ]
        rest = sorted(log.pipelines, key=lambda p: (p.label, p.entry_point, p.shader.code))
        for pipeline in used + rest:
            if pipeline.id not in seen:
                seen.add(pipeline.id)
                pipeline_order.append(pipeline)
        pipeline_index = {p.id: i for i, p in enumerate(pipeline_order)}
        shader_order: list[RecordedShader] = []
        shader_index: dict[int, int] = {}
        unused_shaders = sorted(
            (s for s in log.shaders if all(p.shader is not s for p in pipeline_order)),
            key=lambda s: (s.label, s.code),
        )
        for shader in [p.shader for p in pipeline_order] + unused_shaders:
            if shader.id not in shader_index:
                shader_index[shader.id] = len(shader_order)
                shader_order.append(shader)

        def command(c: Any) -> Dispatch | Copy:
            if isinstance(c, _RecordedDispatch):
                return Dispatch(pipeline_index[c.pipeline.id], c.bind_group.id, *c.grid)
            return Copy(
                c.source.id, c.source_offset, c.destination.id, c.destination_offset, c.size
            )

        operations: list[Submit | Write] = []
        for op in log.operations:
            if isinstance(op, _RecordedWrite):
                operations.append(Write(op.buffer.id, op.offset, op.data))
            else:
                operations.append(Submit(tuple(command(c) for c in op.commands)))
        return Program(
            inputs=tuple(b.id for b in inputs),
            output=output.id,
            output_external=output_external,
            output_width=output_width,
            output_height=output_height,
            output_channels=output_channels,
            buffers=tuple(BufferDesc(b.size, b.usage, b.data, b.label) for b in log.buffers),
            shaders=tuple(ShaderDesc(s.code) for s in shader_order),
            pipelines=tuple(
                PipelineDesc(shader_index[p.shader.id], p.entry_point) for p in pipeline_order
            ),
            bind_groups=tuple(
                BindGroupDesc(
                    pipeline_index[g.pipeline.id],
                    g.group,
                    tuple(BindingDesc(i, b.id, off, size) for i, b, off, size in g.entries),
                )
                for g in log.bind_groups
            ),
            operations=tuple(operations),
            meta=meta,
        )


__all__ = ["RecordedBuffer", "RecordingDevice", "recording_capabilities"]
