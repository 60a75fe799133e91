"""Bytes -> Program: a strict, bounds-checked reader of oidn-web's program format.

Versions 2 (oidn-web's) and 3 (each section followed by its CRC-32, checked as
the section ends: a corrupt file is refused before anything is created) are read.

Every count and length is checked against the bytes that remain before
anything is allocated, so a truncated or hostile file costs at most its own
size in memory. After parsing, every cross reference and range is validated
(ids in range, offsets and sizes aligned and inside their buffers, a dispatch's
bind group made for its pipeline), so a replayer never sees an inconsistent
program. Any defect raises `ProgramFormatError` naming the byte offset and the
reason; nothing else escapes.
"""

from __future__ import annotations

import struct
import zlib

from oidn_gpu.record.format import (
    ACCUMULATION_CODES,
    BOUND_BYTES_PER_WORKGROUP,
    BUFFER_USAGE_MASK,
    ERROR_MAGIC,
    FRAME_BYTES,
    MAX_BIND_GROUPS,
    MAX_BINDING_INDEX,
    MAX_DISPATCH_WORKGROUPS,
    MAX_PROGRAM_WORKGROUPS,
    META_MAGIC,
    META_VERSION,
    META_VERSIONS,
    MODEL_MAGIC,
    MODEL_PACKET_VERSION,
    NO_BUFFER,
    PROGRAM_MAGIC,
    PROGRAM_VERSION,
    PROGRAM_VERSIONS,
    STORAGE_OFFSET_ALIGNMENT,
    BindGroupDesc,
    BindingDesc,
    BufferDesc,
    BufferUsage,
    CommandKind,
    Copy,
    Dispatch,
    MetaAccumulation,
    MetaPrecision,
    OperationKind,
    PipelineDesc,
    Program,
    ProgramFormatError,
    ProgramMeta,
    ShaderDesc,
    Submit,
    Write,
)

# Smallest encoding of one record, to bound counts by the remaining bytes.
_MIN_BUFFER = 16  # size, usage, data length, label length
_MIN_SHADER = 4
_MIN_PIPELINE = 8
_MIN_BIND_GROUP = 12
_ENTRY = 16
_MIN_OPERATION = 8
_COMMAND = 24
_MAX_OUTPUT_CHANNELS = 4


class ByteReader:
    """A cursor over bytes; every read checks the remaining length first."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.data = bytes(data)
        self.offset = 0
        self.checksums = False  # set once the version says the sections carry CRC-32s
        self._section = 0

    def end_section(self, name: str) -> None:
        """Check the CRC-32 after a section (version 3); the next section starts after it."""
        if self.checksums:
            start, end = self._section, self.offset
            stored = self.u32(f"{name} checksum")
            actual = zlib.crc32(memoryview(self.data)[start:end])
            if stored != actual:
                raise self.fail(
                    f"the {name} section (bytes {start} to {end}) has CRC-32 {actual:#010x} but "
                    f"its checksum says {stored:#010x}: the file is corrupt",
                    end,
                )
        self._section = self.offset

    @property
    def remaining(self) -> int:
        return len(self.data) - self.offset

    def fail(self, reason: str, offset: int | None = None) -> ProgramFormatError:
        return ProgramFormatError(reason, self.offset if offset is None else offset)

    def u32(self, what: str) -> int:
        if self.remaining < 4:
            raise self.fail(f"truncated: {what} needs 4 bytes, {self.remaining} remain")
        (value,) = struct.unpack_from("<I", self.data, self.offset)
        self.offset += 4
        return int(value)

    def count(self, what: str, min_record_bytes: int) -> int:
        start = self.offset
        value = self.u32(f"{what} count")
        if value * min_record_bytes > self.remaining:
            raise self.fail(
                f"{what} count {value} needs at least {value * min_record_bytes} bytes but "
                f"{self.remaining} remain",
                start,
            )
        return value

    def blob(self, what: str) -> bytes:
        start = self.offset
        length = self.u32(f"{what} length")
        padded = length + (-length % 4)
        if padded > self.remaining:
            raise self.fail(
                f"{what} length {length} exceeds the {self.remaining} bytes that remain", start
            )
        data = self.data[self.offset : self.offset + length]
        if any(self.data[self.offset + length : self.offset + padded]):
            raise self.fail(f"{what} padding is not zero", self.offset + length)
        self.offset += padded
        return data

    def string(self, what: str) -> str:
        start = self.offset
        raw = self.blob(what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise self.fail(f"{what} is not UTF-8 ({err.reason})", start) from None


def read_program(data: bytes | bytearray | memoryview) -> Program:
    """Parse and validate a program.

    Raises:
        ProgramFormatError: the data is not a valid version 2 or 3 program, a section's
            checksum does not match, or its dispatches exceed the work bounds (the message
            has the byte offset and the reason; an ``ERRO`` packet's message is quoted).
    """
    r = ByteReader(data)
    magic = r.u32("magic")
    if magic == ERROR_MAGIC:
        raise ProgramFormatError(f"the data is an error packet: {_error_message(r)}", 0)
    if magic != PROGRAM_MAGIC:
        raise r.fail(f"bad magic {magic:#010x}; expected {PROGRAM_MAGIC:#010x} ('OIDN')", 0)
    version = r.u32("version")
    if version not in PROGRAM_VERSIONS:
        expected = " or ".join(str(v) for v in PROGRAM_VERSIONS)
        raise r.fail(f"unsupported version {version}; expected {expected}", 4)
    r.checksums = version == PROGRAM_VERSION
    header = _read_header(r)
    r.end_section("header")
    buffers = _read_buffers(r)
    r.end_section("buffers")
    shaders = tuple(
        ShaderDesc(r.string(f"shader {i} code")) for i in range(r.count("shader", _MIN_SHADER))
    )
    r.end_section("shaders")
    pipelines = _read_pipelines(r)
    r.end_section("pipelines")
    bind_groups = _read_bind_groups(r)
    r.end_section("bind groups")
    operations = _read_operations(r)
    r.end_section("operations")
    meta = None
    if r.remaining:
        meta = _read_meta(r)
        r.end_section("META")
    if r.remaining:
        raise r.fail(f"{r.remaining} unexpected bytes after the program")
    program = Program(
        *header,
        buffers=buffers,
        shaders=shaders,
        pipelines=pipelines,
        bind_groups=bind_groups,
        operations=operations,
        meta=meta,
    )
    validate_program(program)
    return program


def _error_message(r: ByteReader) -> str:
    try:
        return r.string("error message")
    except ProgramFormatError:
        return "(unreadable message)"


def _read_header(r: ByteReader) -> tuple:
    inputs = tuple(r.u32(f"input {i}") for i in range(r.count("input", 4)))
    output = r.u32("output buffer id")
    at = r.offset
    external = r.u32("output external flag")
    if external > 1:
        raise r.fail(f"output external flag is {external}; expected 0 or 1", at)
    at_size = r.offset
    width = r.u32("output width")
    height = r.u32("output height")
    if width == 0 or height == 0:
        raise r.fail(f"output size {width}x{height} is empty; expected at least 1x1", at_size)
    at = r.offset
    channels = r.u32("output channels")
    if not 1 <= channels <= _MAX_OUTPUT_CHANNELS:
        raise r.fail(f"output channels {channels}; expected 1 to {_MAX_OUTPUT_CHANNELS}", at)
    return inputs, output, bool(external), width, height, channels


def _read_buffers(r: ByteReader) -> tuple[BufferDesc, ...]:
    out = []
    for i in range(r.count("buffer", _MIN_BUFFER)):
        at = r.offset
        size = r.u32(f"buffer {i} size")
        usage = r.u32(f"buffer {i} usage")
        if size == 0 or size % 4:
            raise r.fail(f"buffer {i} size {size} is not a positive multiple of 4", at)
        if usage == 0 or usage & ~BUFFER_USAGE_MASK:
            raise r.fail(f"buffer {i} usage {usage:#x} is empty or has unknown bits", at + 4)
        data_at = r.offset
        data = r.blob(f"buffer {i} data")
        if len(data) > size:
            raise r.fail(f"buffer {i} data has {len(data)} bytes but the buffer {size}", data_at)
        label = r.string(f"buffer {i} label")
        out.append(BufferDesc(size, usage, data, label))
    return tuple(out)


def _read_pipelines(r: ByteReader) -> tuple[PipelineDesc, ...]:
    out = []
    for i in range(r.count("pipeline", _MIN_PIPELINE)):
        shader = r.u32(f"pipeline {i} shader id")
        at = r.offset
        entry = r.string(f"pipeline {i} entry point")
        if (
            not entry
            or not (entry[0].isalpha() or entry[0] == "_")
            or not all(c.isalnum() or c == "_" for c in entry)
            or not entry.isascii()
        ):
            raise r.fail(f"pipeline {i} entry point {entry[:40]!r} is not a WGSL identifier", at)
        out.append(PipelineDesc(shader, entry))
    return tuple(out)


def _read_bind_groups(r: ByteReader) -> tuple[BindGroupDesc, ...]:
    out = []
    for i in range(r.count("bind group", _MIN_BIND_GROUP)):
        pipeline = r.u32(f"bind group {i} pipeline id")
        group = r.u32(f"bind group {i} group index")
        entries = []
        for j in range(r.count(f"bind group {i} entry", _ENTRY)):
            entries.append(
                BindingDesc(
                    *(
                        r.u32(f"bind group {i} entry {j} {what}")
                        for what in ("binding", "buffer id", "offset", "size")
                    )
                )
            )
        out.append(BindGroupDesc(pipeline, group, tuple(entries)))
    return tuple(out)


def _read_operations(r: ByteReader) -> tuple[Submit | Write, ...]:
    out: list[Submit | Write] = []
    for i in range(r.count("operation", _MIN_OPERATION)):
        at = r.offset
        kind = r.u32(f"operation {i} kind")
        if kind == OperationKind.SUBMIT:
            commands: list[Dispatch | Copy] = []
            for j in range(r.count(f"operation {i} command", _COMMAND)):
                cat = r.offset
                ckind = r.u32(f"operation {i} command {j} kind")
                words = [r.u32(f"operation {i} command {j} word {k}") for k in range(5)]
                if ckind == CommandKind.DISPATCH:
                    commands.append(Dispatch(*words))
                elif ckind == CommandKind.COPY:
                    commands.append(Copy(*words))
                else:
                    raise r.fail(f"operation {i} command {j} has unknown kind {ckind}", cat)
            out.append(Submit(tuple(commands)))
        elif kind == OperationKind.WRITE:
            buffer = r.u32(f"operation {i} buffer id")
            offset = r.u32(f"operation {i} offset")
            out.append(Write(buffer, offset, r.blob(f"operation {i} data")))
        else:
            raise r.fail(f"operation {i} has unknown kind {kind}", at)
    return tuple(out)


def _read_meta(r: ByteReader) -> ProgramMeta:
    at = r.offset
    magic = r.u32("extension magic")
    if magic != META_MAGIC:
        raise r.fail(f"unknown extension {magic:#010x} after the operations; expected META", at)
    at = r.offset
    version = r.u32("META version")
    if version not in META_VERSIONS:
        expected = " or ".join(str(v) for v in META_VERSIONS)
        raise r.fail(f"unsupported META version {version}; expected {expected}", at)
    at = r.offset
    precision = r.u32("META precision")
    if precision not in (MetaPrecision.FP32, MetaPrecision.FP16):
        raise r.fail(f"META precision {precision}; expected 1 (fp32) or 2 (fp16)", at)
    tiles = r.u32("META tile count")
    kernels = r.u32("META kernels")
    frame = r.u32("META frame buffer id")
    weights = tuple(
        r.u32(f"META weight buffer {i}") for i in range(r.count("META weight buffer", 4))
    )
    accumulation = _read_accumulation(r) if version == META_VERSION else None
    return ProgramMeta(
        MetaPrecision(precision),
        tiles,
        kernels,
        None if frame == NO_BUFFER else frame,
        weights,
        accumulation,
    )


def _read_accumulation(r: ByteReader) -> MetaAccumulation:
    """META version 2's accumulation words: the other layers', the first's, the final's."""
    names = []
    for what in ("layers", "first layer", "final layer"):
        at = r.offset
        code = r.u32(f"META {what} accumulation")
        if code >= len(ACCUMULATION_CODES):
            raise r.fail(
                f"META {what} accumulation {code}; expected 0 to {len(ACCUMULATION_CODES) - 1} "
                f"({', '.join(f'{i} {n}' for i, n in enumerate(ACCUMULATION_CODES))})",
                at,
            )
        names.append(ACCUMULATION_CODES[code])
    return MetaAccumulation(*names)


def validate_program(p: Program) -> None:
    """Check every reference, range, usage and work bound of a program value.

    Raises:
        ProgramFormatError: the first inconsistency found.
    """
    for i, b in enumerate(p.inputs):
        _buffer_id(p, b, f"input {i}")
    if len(set(p.inputs)) != len(p.inputs):
        raise ProgramFormatError("an input buffer is listed twice")
    _buffer_id(p, p.output, "the output")
    if p.output in p.inputs:
        raise ProgramFormatError(f"the output buffer {p.output} is also an input")
    for i, pipe in enumerate(p.pipelines):
        if pipe.shader >= len(p.shaders):
            raise ProgramFormatError(
                f"pipeline {i} refers to shader {pipe.shader} but there are {len(p.shaders)}"
            )
    for i, g in enumerate(p.bind_groups):
        _validate_bind_group(p, i, g)
    _validate_operations(p)
    meta = p.meta
    if meta is not None:
        if meta.frame_buffer is not None:
            frame = p.buffers[_buffer_id(p, meta.frame_buffer, "the META frame buffer")]
            if not frame.usage & BufferUsage.UNIFORM or frame.byte_size < FRAME_BYTES:
                raise ProgramFormatError(
                    f"the META frame buffer {meta.frame_buffer} must be a UNIFORM buffer of at "
                    f"least {FRAME_BYTES} bytes (usage {frame.usage:#x}, {frame.byte_size} bytes)"
                )
            if meta.frame_buffer in p.inputs or meta.frame_buffer == p.output:
                raise ProgramFormatError("the META frame buffer is also an input or the output")
        for i, b in enumerate(meta.weight_buffers):
            _buffer_id(p, b, f"META weight buffer {i}")


def _buffer_id(p: Program, value: int, what: str) -> int:
    if value >= len(p.buffers):
        raise ProgramFormatError(f"{what} refers to buffer {value} but there are {len(p.buffers)}")
    return value


def _validate_bind_group(p: Program, i: int, g: BindGroupDesc) -> None:
    if g.pipeline >= len(p.pipelines):
        raise ProgramFormatError(
            f"bind group {i} refers to pipeline {g.pipeline} but there are {len(p.pipelines)}"
        )
    if g.group >= MAX_BIND_GROUPS:
        raise ProgramFormatError(f"bind group {i} has group index {g.group}; expected < 4")
    seen = set()
    for j, e in enumerate(g.entries):
        what = f"bind group {i} entry {j}"
        if e.binding > MAX_BINDING_INDEX or e.binding in seen:
            raise ProgramFormatError(f"{what} has a duplicate or huge binding {e.binding}")
        seen.add(e.binding)
        size = p.buffers[_buffer_id(p, e.buffer, what)].byte_size
        _check_usage(p, e.buffer, BufferUsage.STORAGE | BufferUsage.UNIFORM, what, "binds")
        if e.byte_offset % STORAGE_OFFSET_ALIGNMENT or e.byte_offset >= size:
            raise ProgramFormatError(
                f"{what} offset {e.byte_offset} is not a multiple of 256 inside the buffer"
            )
        if e.byte_size % 4 or e.byte_offset + e.byte_size > size:
            raise ProgramFormatError(
                f"{what} range {e.byte_offset}+{e.byte_size} is unaligned or exceeds the "
                f"buffer's {size} bytes"
            )


def _validate_operations(p: Program) -> None:
    bound = [_bound_bytes(p, g) for g in p.bind_groups]
    total = 0
    for i, op in enumerate(p.operations):
        if isinstance(op, Write):
            what = f"operation {i} (write)"
            size = p.buffers[_buffer_id(p, op.buffer, what)].byte_size
            _check_usage(p, op.buffer, BufferUsage.COPY_DST, what, "writes")
            _check_range(what, op.byte_offset, len(op.data), size)
            continue
        for j, c in enumerate(op.commands):
            what = f"operation {i} command {j}"
            if isinstance(c, Copy):
                _validate_copy(p, what, c)
                continue
            if c.pipeline >= len(p.pipelines) or c.bind_group >= len(p.bind_groups):
                raise ProgramFormatError(f"{what} refers to a missing pipeline or bind group")
            if p.bind_groups[c.bind_group].pipeline != c.pipeline:
                raise ProgramFormatError(
                    f"{what} uses bind group {c.bind_group}, which was made for pipeline "
                    f"{p.bind_groups[c.bind_group].pipeline}, with pipeline {c.pipeline}"
                )
            total += _check_dispatch(what, c, bound[c.bind_group])
            if total > MAX_PROGRAM_WORKGROUPS:
                raise ProgramFormatError(
                    f"the dispatches up to {what} run {total} workgroups; a program runs at "
                    f"most {MAX_PROGRAM_WORKGROUPS}"
                )


def _validate_copy(p: Program, what: str, c: Copy) -> None:
    src = p.buffers[_buffer_id(p, c.source, what)].byte_size
    dst = p.buffers[_buffer_id(p, c.destination, what)].byte_size
    if c.source == c.destination:
        raise ProgramFormatError(f"{what} copies a buffer onto itself")
    _check_usage(p, c.source, BufferUsage.COPY_SRC, what, "copies from")
    _check_usage(p, c.destination, BufferUsage.COPY_DST, what, "copies into")
    _check_range(f"{what} source", c.source_offset, c.byte_size, src)
    _check_range(f"{what} destination", c.destination_offset, c.byte_size, dst)


def _check_usage(p: Program, buffer: int, usage: int, what: str, verb: str) -> None:
    """``buffer`` has one of the ``usage`` bits that its use by ``what`` needs (a host adds
    the copy usages to the inputs and the output, see docs/program-format.md)."""
    if usage & ~(BufferUsage.COPY_SRC | BufferUsage.COPY_DST) == 0 and (
        buffer in p.inputs or buffer == p.output
    ):
        return
    if not p.buffers[buffer].usage & usage:
        needed = " or ".join(f.name for f in BufferUsage if f & usage)
        raise ProgramFormatError(
            f"{what} {verb} buffer {buffer}, whose usage {p.buffers[buffer].usage:#x} lacks "
            f"{needed}"
        )


def _bound_bytes(p: Program, group: BindGroupDesc) -> int:
    """Bytes a bind group binds (valid entries only; `validate_program` checks the rest)."""
    total = 0
    for e in group.entries:
        if e.buffer < len(p.buffers):
            total += e.byte_size or max(p.buffers[e.buffer].byte_size - e.byte_offset, 0)
    return total


def _check_dispatch(what: str, c: Dispatch, bound_bytes: int) -> int:
    """The workgroups of one dispatch, within the format's bounds (else an error)."""
    count = c.x * c.y * c.z
    if count == 0:
        raise ProgramFormatError(
            f"{what} dispatches {(c.x, c.y, c.z)} workgroups, which runs nothing; a recorder "
            "writes at least one workgroup per dimension"
        )
    limit = min(MAX_DISPATCH_WORKGROUPS, bound_bytes // BOUND_BYTES_PER_WORKGROUP)
    if count > limit:
        raise ProgramFormatError(
            f"{what} dispatches {(c.x, c.y, c.z)} = {count} workgroups; expected at most "
            f"{limit} (one per {BOUND_BYTES_PER_WORKGROUP} bytes its bind group binds, at most "
            f"{MAX_DISPATCH_WORKGROUPS})"
        )
    return count


def _check_range(what: str, offset: int, size: int, buffer_size: int) -> None:
    if offset % 4 or size % 4 or offset + size > buffer_size:
        raise ProgramFormatError(
            f"{what} range {offset}+{size} is not 4-byte aligned or exceeds the buffer's "
            f"{buffer_size} bytes"
        )


def read_packet_error(data: bytes) -> str | None:
    """The message of an ``ERRO`` packet, or None when ``data`` is not one."""
    r = ByteReader(data)
    if r.remaining < 4 or r.u32("magic") != ERROR_MAGIC:
        return None
    return r.string("error message")


def read_model_packet(data: bytes) -> int:
    """The image input count of a model inspection packet.

    Raises:
        ProgramFormatError: not a model packet (an ``ERRO`` packet's message is quoted).
    """
    r = ByteReader(data)
    magic = r.u32("magic")
    if magic == ERROR_MAGIC:
        raise ProgramFormatError(f"the data is an error packet: {_error_message(r)}", 0)
    if magic != MODEL_MAGIC:
        raise r.fail(f"bad magic {magic:#010x}; expected {MODEL_MAGIC:#010x} ('MODL')", 0)
    version = r.u32("version")
    if version != MODEL_PACKET_VERSION:
        raise r.fail(f"unsupported model packet version {version}", 4)
    count = r.u32("image input count")
    if r.remaining:
        raise r.fail(f"{r.remaining} unexpected bytes after the packet")
    return count


__all__ = ["read_model_packet", "read_packet_error", "read_program", "validate_program"]
