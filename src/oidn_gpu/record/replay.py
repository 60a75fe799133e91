"""`Replayer`: runs a recorded program on a wgpu device, with no model code.

Construction creates every resource once: buffers (with their initial data),
shader modules, compute pipelines (automatic layouts), bind groups (layouts from
``pipeline.get_bind_group_layout(group)``). `Replayer.run` binds the caller's
inputs and output and replays the operations in order: queue writes, and
submits whose consecutive dispatches share one compute pass (WebGPU makes each
dispatch's writes visible to the next) and whose copies go between passes.
Repeated runs reuse every resource; bind groups that reference caller-owned
buffers are made once per distinct set of such buffers (a few are kept).

A denoise program's META names its frame buffer, the uniform holding the input
scale and ``1/s`` (`format.frame_data`) that every tile's input and output pass
reads; ``run(..., input_scale=s)`` writes it before the operations (autoexposure
per frame with the same recorded program), ``input_scale=None`` restores the
recorded scale. The buffer is rewritten only when its contents change.

Inputs and output are either NumPy arrays (written into the program's own
buffers; the output is read back and returned) or ``wgpu.GPUBuffer`` objects
(bound in place of the program's buffers; `run` returns the output buffer
without waiting). Shader modules are compiled with wgpu's runtime bounds checks
unless ``trusted=True``: a program file is untrusted input.

Replay is bounded: the reader refuses dispatches beyond the format's workgroup
bounds (`format.MAX_DISPATCH_WORKGROUPS`, `format.MAX_PROGRAM_WORKGROUPS`), and
each run has a wall-clock deadline (``deadline_s``, default
`DEFAULT_DEADLINE_S`): the run waits for the GPU after every
`SYNC_WORKGROUPS` workgroups submitted (and, with host arrays, before reading
the output) and raises `DeadlineExceededError` once the deadline has passed;
work already submitted still finishes on the GPU.

This module needs wgpu (through `backends.wgpu.device`).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from oidn_gpu.backends.lru import LruCache
from oidn_gpu.backends.wgpu.device import open_device
from oidn_gpu.errors import DeadlineExceededError, InvalidArgumentError, UnsupportedDeviceError
from oidn_gpu.record.format import (
    BufferUsage,
    Copy,
    Dispatch,
    Program,
    ProgramFormatError,
    Submit,
    Write,
    frame_data,
)
from oidn_gpu.record.reader import read_program, validate_program
from oidn_gpu.record.summary import frame_input_scale

_BIND_GROUP_CACHE_SIZE = 4
# The default wall-clock limit of one run, far above what a recorded denoise takes; a
# program that runs longer stops with `DeadlineExceededError` (deadline_s=None: no limit).
DEFAULT_DEADLINE_S = 600.0
# A run waits for the GPU (and checks its deadline) after this many workgroups submitted.
SYNC_WORKGROUPS = 1 << 20
_HOST_USAGE = BufferUsage.COPY_SRC | BufferUsage.COPY_DST


def _needed_usage(program: Program) -> list[int]:
    """Per buffer, the usages the program's operations and bindings need."""
    need = [0] * len(program.buffers)
    for group in program.bind_groups:
        for e in group.entries:
            usage = program.buffers[e.buffer].usage
            need[e.buffer] |= usage & (BufferUsage.STORAGE | BufferUsage.UNIFORM)
    for op in program.operations:
        if isinstance(op, Write):
            need[op.buffer] |= BufferUsage.COPY_DST
            continue
        for c in op.commands:
            if isinstance(c, Copy):
                need[c.source] |= BufferUsage.COPY_SRC
                need[c.destination] |= BufferUsage.COPY_DST
    return need


class Replayer:
    """Creates a program's resources on a device and runs it (see the module doc).

    Args:
        program: a `Program` or its bytes (parsed and validated by `read_program`).
        device: a `GpuDevice`, a ``wgpu.GPUDevice``, or None to open the default device.
        trusted: compile shaders without wgpu's runtime checks (only for programs you made).
        deadline_s: the wall-clock limit of each `run` in seconds (None: no limit).

    Raises:
        ProgramFormatError: a malformed program, or one whose shaders or bindings the
            device rejects.
        UnsupportedDeviceError: the device lacks a feature or limit the program needs.
    """

    def __init__(
        self,
        program: Program | bytes,
        device: Any = None,
        *,
        trusted: bool = False,
        deadline_s: float | None = DEFAULT_DEADLINE_S,
    ):
        if deadline_s is not None and not (
            isinstance(deadline_s, (int, float)) and not math.isnan(deadline_s) and deadline_s >= 0
        ):
            raise InvalidArgumentError(
                f"deadline_s must be None or a number of seconds >= 0, got {deadline_s!r}"
            )
        self.deadline_s = deadline_s
        if isinstance(program, (bytes, bytearray, memoryview)):
            program = read_program(program)
        else:
            validate_program(program)
        self.program = program
        self._trusted = bool(trusted)
        self._closed = True
        self._gpu = open_device(device)
        self._owns_device = device is None
        self._raw = self._gpu.device
        self._needed = _needed_usage(program)
        self._frame = None if program.meta is None else program.meta.frame_buffer
        self._frame_data = b""  # the frame buffer's contents as last written
        self._recorded_frame = b""
        self._buffers: list[Any] = []
        self._pipelines: list[Any] = []
        self._bind_groups: list[Any] = []
        self._rebound: LruCache[tuple[tuple[int, int], ...], tuple[list[Any], list[Any]]] = (
            LruCache(_BIND_GROUP_CACHE_SIZE)
        )
        self._closed = False
        try:
            self._check_device()
            self._create()
        except BaseException:
            self.close()
            raise

    # -- construction ------------------------------------------------------------------

    def _check_device(self) -> None:
        caps = self._gpu.capabilities
        p = self.program
        for i, b in enumerate(p.buffers):
            if b.byte_size > caps.max_buffer_size:
                raise UnsupportedDeviceError(
                    f"program buffer {i} ('{b.label}') has {b.byte_size} bytes but the device "
                    f"allows {caps.max_buffer_size}; record with smaller tiles"
                )
        for g in p.bind_groups:
            for e in g.entries:
                b = p.buffers[e.buffer]
                size = e.byte_size or b.byte_size - e.byte_offset
                if b.usage & BufferUsage.STORAGE and size > caps.max_storage_buffer_binding_size:
                    raise UnsupportedDeviceError(
                        f"program binds {size} bytes of buffer {e.buffer} ('{b.label}') but the "
                        f"device binds at most {caps.max_storage_buffer_binding_size}; record "
                        "with smaller tiles"
                    )
        limit = caps.max_compute_workgroups_per_dimension
        for op in p.operations:
            if isinstance(op, Submit):
                for c in op.commands:
                    if isinstance(c, Dispatch) and max(c.x, c.y, c.z) > limit:
                        raise UnsupportedDeviceError(
                            f"program dispatches {(c.x, c.y, c.z)} workgroups but the device "
                            f"allows {limit} per dimension"
                        )
        if any("enable f16" in s.code for s in p.shaders) and not caps.has_f16:
            raise UnsupportedDeviceError(
                "the program's shaders need the 'shader-f16' feature, which this device lacks; "
                "record an fp32 program"
            )
        if any("enable subgroups" in s.code for s in p.shaders) and not caps.has_subgroups:
            raise UnsupportedDeviceError(
                "the program's shaders need the 'subgroup' feature, which this device lacks"
            )

    def _create(self) -> None:
        p = self.program
        host = set(p.inputs) | {p.output}
        for i, b in enumerate(p.buffers):
            usage = b.usage | (_HOST_USAGE if i in host else 0)
            if i == self._frame:
                usage |= BufferUsage.COPY_DST
                self._recorded_frame = b.data + bytes(b.byte_size - len(b.data))
                self._frame_data = self._recorded_frame
            self._buffers.append(self._create_buffer(i, b.label, b.byte_size, usage, b.data))
        modules = []
        for i, shader in enumerate(p.shaders):
            try:
                modules.append(
                    self._gpu.create_shader_module(
                        f"oidn/replay/shader/{i}", shader.code, trusted=self._trusted
                    )
                )
            except Exception as err:  # wgpu's GPUValidationError carries the compiler message
                raise ProgramFormatError(f"shader {i} does not compile: {err}") from None
        for i, pipe in enumerate(p.pipelines):
            try:
                self._pipelines.append(
                    self._gpu.create_compute_pipeline(
                        f"oidn/replay/pipeline/{i}", modules[pipe.shader], pipe.entry_point
                    )
                )
            except Exception as err:
                raise ProgramFormatError(f"pipeline {i} cannot be created: {err}") from None
        self._bind_groups = [
            self._create_bind_group(i, self._buffers) for i in range(len(p.bind_groups))
        ]

    def _create_buffer(self, index: int, label: str, size: int, usage: int, data: bytes) -> Any:
        try:
            if not data:
                return self._raw.create_buffer(label=label, size=size, usage=usage)
            buffer = self._raw.create_buffer(
                label=label, size=size, usage=usage, mapped_at_creation=True
            )
            buffer.write_mapped(data + b"\0" * (-len(data) % 4), 0)
            buffer.unmap()
            return buffer
        except Exception as err:
            raise ProgramFormatError(
                f"buffer {index} ('{label}') cannot be created: {err}"
            ) from None

    def _create_bind_group(self, index: int, buffers: Sequence[Any]) -> Any:
        g = self.program.bind_groups[index]
        entries = []
        for e in g.entries:
            buffer = buffers[e.buffer]
            size = e.byte_size or int(buffer.size) - e.byte_offset
            entries.append(
                {
                    "binding": e.binding,
                    "resource": {"buffer": buffer, "offset": e.byte_offset, "size": size},
                }
            )
        try:
            layout = self._pipelines[g.pipeline].get_bind_group_layout(g.group)
            return self._raw.create_bind_group(
                label=f"oidn/replay/bind-group/{index}", layout=layout, entries=entries
            )
        except Exception as err:
            raise ProgramFormatError(f"bind group {index} cannot be created: {err}") from None

    # -- running -----------------------------------------------------------------------

    @property
    def device(self) -> Any:
        """The `GpuDevice` the program runs on."""
        return self._gpu

    @property
    def output_buffer(self) -> Any:
        """The program's own output buffer (a caller's output is bound instead when given)."""
        return self._buffers[self.program.output]

    @property
    def has_frame(self) -> bool:
        """True when the program has a frame buffer, i.e. ``run`` takes an ``input_scale``."""
        return self._frame is not None

    @property
    def recorded_input_scale(self) -> float | None:
        """The input scale the program was recorded with (None without a frame buffer)."""
        return frame_input_scale(self.program)

    def run(
        self, inputs: Sequence[Any], output: Any = None, input_scale: float | None = None
    ) -> Any:
        """Replay the program once.

        Args:
            inputs: one per program input, in order: NumPy arrays with exactly the input
                buffer's byte size (written into the program's buffer), or ``GPUBuffer``
                objects of at least that size (bound in its place).
            output: None, or a ``GPUBuffer`` receiving the output (bound in place of the
                program's output when the program allows it, else copied into).
            input_scale: the scale of the color for this run (e.g. the host's
                `image.autoexposure.autoexposure` of an HDR color), written into the
                frame buffer with ``1/s`` before the operations; None: the recorded scale.

        Returns:
            With NumPy inputs and no ``output``: the output as float32, ``[H, W, 4]`` when
            the buffer holds RGBA pixels (waits for the GPU). Otherwise the output
            ``GPUBuffer``, submitted but not waited for.

        Raises:
            InvalidArgumentError: wrong number, size or usage of inputs or output; an
                ``input_scale`` that is NaN, or given for a program without a frame buffer.
            DeadlineExceededError: the run took longer than ``deadline_s``.
        """
        if self._closed:
            raise InvalidArgumentError("the replayer is closed")
        p = self.program
        if len(inputs) != len(p.inputs):
            raise InvalidArgumentError(
                f"the program takes {len(p.inputs)} input(s) but {len(inputs)} were given"
            )
        if input_scale is not None and self._frame is None:
            raise InvalidArgumentError(
                "the program has no frame buffer, so it takes no input scale (a network "
                "program, or one recorded with its scale baked in)"
            )
        frame = self._recorded_frame if input_scale is None else frame_data(input_scale)
        queue = self._raw.queue
        external: dict[int, Any] = {}
        host = output is None
        for index, (pid, value) in enumerate(zip(p.inputs, inputs, strict=True)):
            size = p.buffers[pid].byte_size
            if isinstance(value, np.ndarray):
                data = np.ascontiguousarray(value)
                if data.nbytes != size:
                    raise InvalidArgumentError(
                        f"input {index} has {data.nbytes} bytes; the program expects {size}"
                    )
                queue.write_buffer(self._buffers[pid], 0, memoryview(data).cast("B"))
            else:
                host = False
                self._check_external(value, pid, f"input {index}")
                external[pid] = value
        copy_to = None
        if output is not None:
            if p.output_external:
                self._check_external(output, p.output, "output")
                external[p.output] = output
            else:
                copy_to = output
                self._check_external(output, None, "output", BufferUsage.COPY_DST)
        buffers, groups = self._resources_for(external)
        if self._frame is not None and frame != self._frame_data:
            queue.write_buffer(self._buffers[self._frame], 0, frame)
            self._frame_data = frame
        deadline = _Deadline(self._gpu, self.deadline_s)
        self._run_operations(buffers, groups, deadline)
        result = buffers[p.output]
        if copy_to is not None:
            encoder = self._raw.create_command_encoder(label="oidn/replay/output")
            encoder.copy_buffer_to_buffer(result, 0, copy_to, 0, p.buffers[p.output].byte_size)
            queue.submit([encoder.finish()])
            result = copy_to
        if host:
            deadline.wait()
            return self.read_output()
        return result

    def _run_operations(self, buffers: list[Any], groups: list[Any], deadline: _Deadline) -> None:
        """The program's operations in order, on ``buffers`` and ``groups``."""
        queue = self._raw.queue
        for i, op in enumerate(self.program.operations):
            try:
                if isinstance(op, Write):
                    queue.write_buffer(buffers[op.buffer], op.byte_offset, op.data)
                else:
                    queue.submit([self._encode(op, buffers, groups)])
            except Exception as err:  # wgpu's validation errors name what the device refused
                raise ProgramFormatError(f"the device refused operation {i}: {err}") from None
            if isinstance(op, Submit):
                deadline.submitted(op)

    def read_output(self) -> np.ndarray:
        """Read the program's own output buffer back as float32 (waits for the GPU)."""
        p = self.program
        raw = self._raw.queue.read_buffer(self._buffers[p.output])
        out = np.frombuffer(bytes(raw), np.float32).copy()
        pixels = p.output_width * p.output_height
        if out.size == pixels * 4:
            return out.reshape(p.output_height, p.output_width, 4)
        return out

    def _check_external(self, buffer: Any, pid: int | None, what: str, usage: int = 0) -> None:
        size = (
            self.program.buffers[pid].byte_size
            if pid is not None
            else (self.program.buffers[self.program.output].byte_size)
        )
        if not hasattr(buffer, "size") or not hasattr(buffer, "usage"):
            raise InvalidArgumentError(
                f"{what} must be a NumPy array or a wgpu GPUBuffer, got {type(buffer).__name__}"
            )
        if int(buffer.size) < size:
            raise InvalidArgumentError(f"{what} buffer has {buffer.size} bytes; expected {size}")
        need = usage | (self._needed[pid] if pid is not None else 0)
        if int(buffer.usage) & need != need:
            raise InvalidArgumentError(
                f"{what} buffer has usage {int(buffer.usage):#x}; the program needs {need:#x}"
            )

    def _resources_for(self, external: dict[int, Any]) -> tuple[list[Any], list[Any]]:
        if not external:
            return self._buffers, self._bind_groups
        key = tuple(sorted((pid, id(b)) for pid, b in external.items()))
        cached = self._rebound.get(key)
        if cached is not None and all(cached[0][pid] is b for pid, b in external.items()):
            return cached
        buffers = list(self._buffers)
        for pid, b in external.items():
            buffers[pid] = b
        groups = list(self._bind_groups)
        for i, g in enumerate(self.program.bind_groups):
            if any(e.buffer in external for e in g.entries):
                groups[i] = self._create_bind_group(i, buffers)
        self._rebound.put(key, (buffers, groups))
        return buffers, groups

    def _encode(self, op: Submit, buffers: list[Any], groups: list[Any]) -> Any:
        encoder = self._raw.create_command_encoder(label="oidn/replay")
        compute = None
        current = None
        for c in op.commands:
            if isinstance(c, Dispatch):
                if compute is None:
                    compute = encoder.begin_compute_pass(label="oidn/replay")
                    current = None
                if current != c.pipeline:
                    compute.set_pipeline(self._pipelines[c.pipeline])
                    current = c.pipeline
                compute.set_bind_group(
                    self.program.bind_groups[c.bind_group].group, groups[c.bind_group]
                )
                compute.dispatch_workgroups(c.x, c.y, c.z)
            else:
                if compute is not None:
                    compute.end()
                    compute = None
                encoder.copy_buffer_to_buffer(
                    buffers[c.source],
                    c.source_offset,
                    buffers[c.destination],
                    c.destination_offset,
                    c.byte_size,
                )
        if compute is not None:
            compute.end()
        return encoder.finish()

    # -- lifetime ----------------------------------------------------------------------

    def close(self) -> None:
        """Release every GPU object of the program; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._rebound.clear()
        self._bind_groups = []
        self._pipelines = []
        for buffer in self._buffers:
            with contextlib.suppress(Exception):  # a lost device already freed everything
                buffer.destroy()
        self._buffers = []
        if self._owns_device:
            self._gpu.close()

    def __enter__(self) -> Replayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Deadline:
    """A run's deadline: waits for the GPU after every `SYNC_WORKGROUPS` workgroups."""

    def __init__(self, device: Any, seconds: float | None) -> None:
        self._device = device
        self._seconds = seconds
        self._end = None if seconds is None else time.monotonic() + seconds
        self._pending = 0

    def submitted(self, op: Submit) -> None:
        self._pending += sum(c.x * c.y * c.z for c in op.commands if isinstance(c, Dispatch))
        if self._pending >= SYNC_WORKGROUPS:
            self.wait()

    def wait(self) -> None:
        """Wait for the work submitted so far, at most until the deadline."""
        if self._end is None:
            return
        self._pending = 0
        remaining = self._end - time.monotonic()
        if remaining > 0 and self._device.fence().wait(remaining):
            return
        raise DeadlineExceededError(
            f"the program ran longer than its deadline of {self._seconds:g} s (deadline_s); "
            "the work already submitted still finishes on the GPU"
        )


def replay(
    program: Program | bytes,
    inputs: Sequence[Any],
    *,
    device: Any = None,
    input_scale: float | None = None,
    deadline_s: float | None = DEFAULT_DEADLINE_S,
) -> Any:
    """Replay a program once on host arrays and return the output (see `Replayer.run`)."""
    with Replayer(program, device, deadline_s=deadline_s) as replayer:
        return replayer.run(inputs, input_scale=input_scale)


__all__ = ["DEFAULT_DEADLINE_S", "SYNC_WORKGROUPS", "Replayer", "replay"]
