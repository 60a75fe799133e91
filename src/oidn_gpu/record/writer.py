"""Program -> bytes, in oidn-web's layout (``serializeProgram`` in ``program.ts``).

Every integer is a little-endian u32; a blob is its byte length, the bytes and
zero padding to a multiple of 4; a string is a UTF-8 blob. Version 3 (the
default) follows each section with the CRC-32 of its bytes and writes META
version 2 (with the accumulation) where the program has one; version 2 is
oidn-web's layout byte for byte (META version 1, without the accumulation), for
hosts that read only that. The output is deterministic: the same `Program`
value always gives the same bytes.
"""

from __future__ import annotations

import struct
import zlib

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.record.format import (
    ACCUMULATION_CODES,
    ERROR_MAGIC,
    META_MAGIC,
    META_VERSION,
    MODEL_MAGIC,
    MODEL_PACKET_VERSION,
    NO_BUFFER,
    OIDN_WEB_META_VERSION,
    PROGRAM_MAGIC,
    PROGRAM_VERSION,
    PROGRAM_VERSIONS,
    U32_MAX,
    CommandKind,
    Copy,
    Dispatch,
    OperationKind,
    Program,
    ProgramMeta,
    Submit,
    Write,
)


class ByteWriter:
    """Appends u32 words, blobs and strings to a growing buffer.

    ``checksums``: `end_section` appends the CRC-32 of the bytes since the last one.
    """

    def __init__(self, *, checksums: bool = False) -> None:
        self._parts: list[bytes] = []
        self.byte_size = 0
        self._checksums = checksums
        self._crc = 0

    def _append(self, data: bytes) -> None:
        self._parts.append(data)
        self.byte_size += len(data)
        if self._checksums:
            self._crc = zlib.crc32(data, self._crc)

    def u32(self, value: int) -> None:
        if not isinstance(value, int) or not 0 <= value <= U32_MAX:
            raise InvalidArgumentError(f"program value {value!r} does not fit in a u32")
        self._append(struct.pack("<I", value))

    def end_section(self) -> None:
        """Append the section's CRC-32 (not part of any section), when checksumming."""
        if self._checksums:
            crc, self._crc = self._crc, 0
            self._parts.append(struct.pack("<I", crc))
            self.byte_size += 4

    def u32s(self, values: list[int] | tuple[int, ...]) -> None:
        for value in values:
            self.u32(value)

    def blob(self, data: bytes) -> None:
        self.u32(len(data))
        self._append(bytes(data))
        self._append(b"\0" * (-len(data) % 4))

    def string(self, text: str) -> None:
        self.blob(text.encode("utf-8"))

    def finish(self) -> bytes:
        return b"".join(self._parts)


def write_program(program: Program, *, version: int = PROGRAM_VERSION) -> bytes:
    """Serialize ``program``, with the META extension when it has one.

    ``version`` 3 (the default) checksums every section; 2 is oidn-web's layout, for
    hosts that read only version 2 (readers then cannot tell a corrupt file), whose
    META is oidn-web's version 1: the program's accumulation is not written there.

    Raises:
        InvalidArgumentError: an unknown version, or a value that does not fit the
            format (e.g. a buffer over 4 GiB).
    """
    if version not in PROGRAM_VERSIONS:
        raise InvalidArgumentError(
            f"unknown program version {version!r}; expected one of {PROGRAM_VERSIONS}"
        )
    w = ByteWriter(checksums=version == PROGRAM_VERSION)
    w.u32(PROGRAM_MAGIC)
    w.u32(version)
    w.u32(len(program.inputs))
    w.u32s(program.inputs)
    w.u32(program.output)
    w.u32(1 if program.output_external else 0)
    w.u32(program.output_width)
    w.u32(program.output_height)
    w.u32(program.output_channels)
    w.end_section()
    _write_resources(w, program)
    _write_operations(w, program)
    if program.meta is not None:
        _write_meta(w, program.meta, sums=version == PROGRAM_VERSION)
    return w.finish()


def _write_meta(w: ByteWriter, meta: ProgramMeta, *, sums: bool) -> None:
    """META version 2 when ``sums`` and the program records its accumulation, else oidn-web's
    version 1."""
    accumulation = meta.accumulation if sums else None
    w.u32(META_MAGIC)
    w.u32(OIDN_WEB_META_VERSION if accumulation is None else META_VERSION)
    w.u32(int(meta.precision))
    w.u32(meta.tiles)
    w.u32(int(meta.kernels))
    w.u32(NO_BUFFER if meta.frame_buffer is None else meta.frame_buffer)
    w.u32(len(meta.weight_buffers))
    w.u32s(meta.weight_buffers)
    if accumulation is not None:
        for name in (accumulation.layers, accumulation.first, accumulation.final):
            w.u32(ACCUMULATION_CODES.index(name))
    w.end_section()


def _write_resources(w: ByteWriter, program: Program) -> None:
    """The buffers, shaders, pipelines and bind groups sections."""
    w.u32(len(program.buffers))
    for buffer in program.buffers:
        if not 0 < buffer.byte_size <= U32_MAX:
            raise InvalidArgumentError(
                f"program buffer '{buffer.label}' has {buffer.byte_size} bytes; expected 1 to "
                f"{U32_MAX} (the format's 32-bit size limit)"
            )
        w.u32(buffer.byte_size)
        w.u32(int(buffer.usage))
        w.blob(buffer.data)
        w.string(buffer.label)
    w.end_section()
    w.u32(len(program.shaders))
    for shader in program.shaders:
        w.string(shader.code)
    w.end_section()
    w.u32(len(program.pipelines))
    for pipeline in program.pipelines:
        w.u32(pipeline.shader)
        w.string(pipeline.entry_point)
    w.end_section()
    w.u32(len(program.bind_groups))
    for group in program.bind_groups:
        w.u32(group.pipeline)
        w.u32(group.group)
        w.u32(len(group.entries))
        for entry in group.entries:
            w.u32s((entry.binding, entry.buffer, entry.byte_offset, entry.byte_size))
    w.end_section()


def _write_operations(w: ByteWriter, program: Program) -> None:
    w.u32(len(program.operations))
    for op in program.operations:
        if isinstance(op, Submit):
            w.u32(OperationKind.SUBMIT)
            w.u32(len(op.commands))
            for command in op.commands:
                if isinstance(command, Dispatch):
                    w.u32(CommandKind.DISPATCH)
                    w.u32s((command.pipeline, command.bind_group, command.x, command.y, command.z))
                elif isinstance(command, Copy):
                    w.u32(CommandKind.COPY)
                    w.u32s(
                        (
                            command.source,
                            command.source_offset,
                            command.destination,
                            command.destination_offset,
                            command.byte_size,
                        )
                    )
                else:
                    raise InvalidArgumentError(f"unknown program command {command!r}")
        elif isinstance(op, Write):
            w.u32(OperationKind.WRITE)
            w.u32(op.buffer)
            w.u32(op.byte_offset)
            w.blob(op.data)
        else:
            raise InvalidArgumentError(f"unknown program operation {op!r}")
    w.end_section()


def error_packet(message: str) -> bytes:
    """The ``ERRO`` packet: magic 0x4f525245 and the message string."""
    w = ByteWriter()
    w.u32(ERROR_MAGIC)
    w.string(message)
    return w.finish()


def model_packet(image_inputs: int) -> bytes:
    """The model inspection packet: ``MODL`` magic, version 1, image input count."""
    w = ByteWriter()
    w.u32(MODEL_MAGIC)
    w.u32(MODEL_PACKET_VERSION)
    w.u32(image_inputs)
    return w.finish()


__all__ = ["ByteWriter", "error_packet", "model_packet", "write_program"]
