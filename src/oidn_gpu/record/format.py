"""The recorded-program file format (oidn-web's ``program.ts``): constants and the value types.

A *program* is everything one denoise (or one network execution) of a fixed
image size submits to a WebGPU device: buffers with their initial data, WGSL
shader modules, compute pipelines, bind groups, and the operations in queue
order (submits of dispatches and buffer copies, queue writes). A native host
replays it with no Python and no model code. ``docs/program-format.md`` is the
byte-by-byte specification; this module is its single source of truth in code
(`writer` and `reader` import every number from here).

Layout summary (all integers u32 little-endian; a *blob* is a u32 byte length,
the bytes, and zero padding to a multiple of 4; a *string* is a UTF-8 blob)::

    magic "OIDN" (0x4e44494f), version 3 (2: oidn-web's, without checksums; still read)
    input count, input buffer ids, output buffer id, output external (0/1),
    output width, output height, output channels
    buffers:     count, then size, usage, data blob (length 0 = zero-filled), label string
    shaders:     count, then code string
    pipelines:   count, then shader id, entry point string
    bind groups: count, then pipeline id, group, entry count,
                 entries (binding, buffer id, offset, size; size 0 = rest of buffer)
    operations:  count, then kind
                 0 submit: command count, then kind
                     0 dispatch: pipeline id, bind group id, x, y, z
                     1 copy: source, source offset, destination, destination offset, size
                 1 write: buffer id, offset, data blob
    optional META extension: "META" (0x4154454d), version 1, precision (1 fp32, 2 fp16),
                 tile count, kernels bitmask, frame buffer id (0xffffffff = none),
                 weight buffer count, weight buffer ids;
                 META version 2 (oidn-gpu, written in version 3 files only) adds the sums:
                 accumulation of the other layers, of the first, of the final layer
                 (`ACCUMULATION_CODES`)
    version 3 only: after each section (the header from the magic to the output
                 channels, buffers, shaders, pipelines, bind groups, operations, META)
                 a u32 CRC-32 of that section's bytes

The frame buffer (`frame_data`) is a 16-byte uniform: f32 input scale, f32
output scale (``1/s`` in float32, 0 when ``s == 0``), 8 zero bytes.

Nothing here imports wgpu: programs can be read, written and inspected anywhere.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from oidn_gpu.backends.gpu_device import BufferUsage
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels.spec import FRAME_PARAMS

# --- magic numbers and versions (oidn-web, program.ts) -------------------------------------

PROGRAM_MAGIC = 0x4E44494F  # b"OIDN" little-endian
PROGRAM_VERSION = 3  # what `write_program` writes: version 2 with section checksums
OIDN_WEB_PROGRAM_VERSION = 2  # oidn-web's version: no checksums; read, and written on request
PROGRAM_VERSIONS = (OIDN_WEB_PROGRAM_VERSION, PROGRAM_VERSION)
META_MAGIC = 0x4154454D  # b"META"
META_VERSION = 2  # oidn-gpu's META: oidn-web's version 1 and the accumulation words
OIDN_WEB_META_VERSION = 1  # oidn-web's META (the only one a version 2 file holds)
META_VERSIONS = (OIDN_WEB_META_VERSION, META_VERSION)
MODEL_MAGIC = 0x4C444F4D  # b"MODL": model inspection packet
MODEL_PACKET_VERSION = 1
ERROR_MAGIC = 0x4F525245  # b"ERRO": error packet
CONFIG_VERSION = 1
NO_BUFFER = 0xFFFFFFFF  # META frame buffer id when there is none
U32_MAX = 0xFFFFFFFF
WORD_BYTES = 4
FRAME_BYTES = FRAME_PARAMS.size  # the META frame buffer's contents: input, output scale

# The sections of a program, in file order; version 3 follows each with its CRC-32
# (zlib's, the IEEE 802.3 polynomial) of the section's bytes.
SECTIONS = ("header", "buffers", "shaders", "pipelines", "bind groups", "operations", "META")

# --- bounds on the work a program may ask for (replay must end) ---------------------------
# A dispatch runs at most one workgroup per 4 bytes its bind group binds (every kernel's
# workgroup writes or reads its own part of a bound buffer), and at most
# MAX_DISPATCH_WORKGROUPS; a program at most MAX_PROGRAM_WORKGROUPS in all. Measured on
# recorded denoises (every kernel, fp16 and fp32): at most 0.25 workgroups per pixel in one
# dispatch and 1.32 in all (rt_alb_large, direct conv), so a denoise of the largest image one
# buffer holds (2^28 RGBA float32 pixels), tiled, stays below each.
BOUND_BYTES_PER_WORKGROUP = 4
MAX_DISPATCH_WORKGROUPS = 1 << 26
MAX_PROGRAM_WORKGROUPS = 1 << 31

# --- WebGPU constants the format stores as numbers (GPUBufferUsage, WebGPU spec) -----------
# A buffer record's usage holds `BufferUsage` bits (the device interface's, WebGPU's values).

BUFFER_USAGE_MASK = 0x03FF
MAX_BIND_GROUPS = 4  # WebGPU's guaranteed maxBindGroups
MAX_BINDING_INDEX = 65535  # WebGPU's maxBindingsPerBindGroup is 1000; indices may be sparse
STORAGE_OFFSET_ALIGNMENT = 256  # WebGPU default minStorage/UniformBufferOffsetAlignment

# --- operation and command kinds ------------------------------------------------------------


class OperationKind(enum.IntEnum):
    SUBMIT = 0
    WRITE = 1


class CommandKind(enum.IntEnum):
    DISPATCH = 0
    COPY = 1


class MetaPrecision(enum.IntEnum):
    FP32 = 1
    FP16 = 2


# META version 2's accumulation words: how an fp16 program's convolutions sum their products,
# by the wgpu backend's names (`kernels.gemm.Accumulation`; code = index). fp32 programs: 0.
ACCUMULATION_CODES = ("f32", "f16-chains", "f16-partials", "f16-chains16", "f16-pairs", "f16-lanes")


@dataclass(frozen=True)
class MetaAccumulation:
    """How a program's fp16 convolutions sum (META version 2), by the wgpu backend's names.

    Attributes:
        layers: the accumulation of every convolution but the first and the final layer.
        first: that of the convolutions that read only the network input.
        final: that of the final layer.
    """

    layers: str = "f32"
    first: str = "f32"
    final: str = "f32"

    def __post_init__(self) -> None:
        for name in ("layers", "first", "final"):
            value = getattr(self, name)
            if value not in ACCUMULATION_CODES:
                raise InvalidArgumentError(
                    f"unknown {name} accumulation {value!r}; expected one of {ACCUMULATION_CODES}"
                )

    def describe(self) -> str:
        """``f16-partials``, or ``f16-chains (first layer f32, final layer f32)`` where the
        first or final layer sums otherwise."""
        others = [
            f"{name} layer {value}"
            for name, value in (("first", self.first), ("final", self.final))
            if value != self.layers
        ]
        return self.layers + (f" ({', '.join(others)})" if others else "")


class KernelBit(enum.IntFlag):
    """META kernels bitmask: which convolution families the network uses."""

    DIRECT = 1
    IMPLICIT_GEMM = 2
    SUBGROUP_MATRIX = 4
    SPATIAL = 8
    OTHER = 16


KERNEL_BIT_NAMES = {
    KernelBit.DIRECT: "direct",
    KernelBit.IMPLICIT_GEMM: "implicit-gemm",
    KernelBit.SUBGROUP_MATRIX: "subgroup-matrix",
    KernelBit.SPATIAL: "spatial",
    KernelBit.OTHER: "other",
}


def kernel_names(bits: int) -> tuple[str, ...]:
    """Names of the kernel families set in a META kernels bitmask."""
    return tuple(name for bit, name in KERNEL_BIT_NAMES.items() if bits & bit)


class ProgramFormatError(InvalidArgumentError):
    """A program (or config, or packet) is malformed; says where and why.

    Attributes:
        offset: byte offset in the data where the problem was found (None if not positional).
        reason: the message without the offset.
    """

    def __init__(self, reason: str, offset: int | None = None) -> None:
        self.offset = offset
        self.reason = reason
        where = f" at byte {offset}" if offset is not None else ""
        super().__init__(f"invalid program{where}: {reason}")


# --- the program as a value -----------------------------------------------------------------


@dataclass(frozen=True)
class BufferDesc:
    """One GPU buffer: ``data`` (possibly shorter than the buffer) fills it at creation."""

    byte_size: int
    usage: int
    data: bytes = b""
    label: str = ""


@dataclass(frozen=True)
class ShaderDesc:
    """One WGSL shader module."""

    code: str


@dataclass(frozen=True)
class PipelineDesc:
    """A compute pipeline with an automatic layout."""

    shader: int
    entry_point: str


@dataclass(frozen=True)
class BindingDesc:
    """A buffer binding; ``byte_size`` 0 binds the rest of the buffer from ``byte_offset``."""

    binding: int
    buffer: int
    byte_offset: int = 0
    byte_size: int = 0


@dataclass(frozen=True)
class BindGroupDesc:
    """A bind group of group index ``group`` in ``pipeline``'s automatic layout."""

    pipeline: int
    group: int
    entries: tuple[BindingDesc, ...]


@dataclass(frozen=True)
class Dispatch:
    """``dispatchWorkgroups(x, y, z)`` with ``pipeline`` and ``bind_group`` set."""

    pipeline: int
    bind_group: int
    x: int
    y: int = 1
    z: int = 1


@dataclass(frozen=True)
class Copy:
    """``copyBufferToBuffer``."""

    source: int
    source_offset: int
    destination: int
    destination_offset: int
    byte_size: int


Command = Dispatch | Copy


@dataclass(frozen=True)
class Submit:
    """One ``queue.submit`` of the commands, in order."""

    commands: tuple[Command, ...]


@dataclass(frozen=True)
class Write:
    """``queue.writeBuffer(buffer, byte_offset, data)``."""

    buffer: int
    byte_offset: int
    data: bytes


Operation = Submit | Write


@dataclass(frozen=True)
class ProgramMeta:
    """The optional META extension: what the program is, for hosts and `program info`.

    Attributes:
        precision: network storage precision.
        tiles: tiles of a whole-denoise program (0 for a network program).
        kernels: `KernelBit` mask of the convolution families used.
        frame_buffer: id of a per-frame uniform the host may rewrite, or None.
        weight_buffers: ids of the buffers holding network weights and biases.
        accumulation: how the convolutions sum (META version 2), or None when the
            program does not say (META version 1, as every version 2 file).
    """

    precision: MetaPrecision = MetaPrecision.FP32
    tiles: int = 0
    kernels: int = 0
    frame_buffer: int | None = None
    weight_buffers: tuple[int, ...] = ()
    accumulation: MetaAccumulation | None = None


@dataclass(frozen=True)
class Program:
    """A recorded GPU program (oidn-web's format, version 2; written as version 3).

    ``inputs`` and ``output`` are buffer ids. Output pixels are RGBA float32
    (16 bytes); ``output_channels`` of them are meaningful.
    """

    inputs: tuple[int, ...]
    output: int
    output_external: bool
    output_width: int
    output_height: int
    output_channels: int
    buffers: tuple[BufferDesc, ...] = ()
    shaders: tuple[ShaderDesc, ...] = ()
    pipelines: tuple[PipelineDesc, ...] = ()
    bind_groups: tuple[BindGroupDesc, ...] = ()
    operations: tuple[Operation, ...] = ()
    meta: ProgramMeta | None = field(default=None)

    @property
    def initial_data_bytes(self) -> int:
        return sum(len(b.data) for b in self.buffers)

    @property
    def buffer_bytes(self) -> int:
        """GPU memory of all buffers."""
        return sum(b.byte_size for b in self.buffers)

    @property
    def workgroup_count(self) -> int:
        """Workgroups of all dispatches, summed."""
        return sum(
            c.x * c.y * c.z
            for op in self.operations
            if isinstance(op, Submit)
            for c in op.commands
            if isinstance(c, Dispatch)
        )

    @property
    def dispatch_count(self) -> int:
        return sum(
            isinstance(c, Dispatch)
            for op in self.operations
            if isinstance(op, Submit)
            for c in op.commands
        )


__all__ = [
    "ACCUMULATION_CODES",
    "BOUND_BYTES_PER_WORKGROUP",
    "BUFFER_USAGE_MASK",
    "CONFIG_VERSION",
    "ERROR_MAGIC",
    "FRAME_BYTES",
    "MAX_DISPATCH_WORKGROUPS",
    "MAX_PROGRAM_WORKGROUPS",
    "META_MAGIC",
    "META_VERSION",
    "META_VERSIONS",
    "MODEL_MAGIC",
    "NO_BUFFER",
    "OIDN_WEB_META_VERSION",
    "OIDN_WEB_PROGRAM_VERSION",
    "PROGRAM_MAGIC",
    "PROGRAM_VERSION",
    "PROGRAM_VERSIONS",
    "SECTIONS",
    "BindGroupDesc",
    "BindingDesc",
    "BufferDesc",
    "BufferUsage",
    "Command",
    "CommandKind",
    "Copy",
    "Dispatch",
    "KernelBit",
    "MetaAccumulation",
    "MetaPrecision",
    "Operation",
    "OperationKind",
    "PipelineDesc",
    "Program",
    "ProgramFormatError",
    "ProgramMeta",
    "ShaderDesc",
    "Submit",
    "Write",
    "frame_data",
    "kernel_names",
]


def frame_data(input_scale: float) -> bytes:
    """The frame buffer's 16 bytes for input scale ``s``, as `GpuDenoiser` writes them.

    f32 ``s``, f32 ``1/s`` (a float32 division; 0 when ``s == 0``, as OIDN's
    ``getOutputScale``), then zeros.

    Raises:
        InvalidArgumentError: ``s`` is NaN (resolve autoexposure first).
    """
    with np.errstate(divide="ignore", over="ignore"):
        try:
            scale = np.float32(input_scale)
        except (TypeError, ValueError):
            raise InvalidArgumentError(
                f"input scale must be a number, got {input_scale!r}"
            ) from None
        if np.isnan(scale):
            raise InvalidArgumentError("input scale is NaN; compute autoexposure or pass a number")
        output = np.float32(0) if scale == 0 else np.float32(1) / scale
    return FRAME_PARAMS.pack(input_scale=float(scale), output_scale=float(output))
