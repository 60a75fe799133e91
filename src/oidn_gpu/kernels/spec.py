"""The result type of every WGSL generator, the specs generators take, and the params layout.

A generator is a pure function ``generate(spec) -> Kernel``: text and metadata
only. It never imports wgpu, holds no device and no cache; the backend caches
compiled pipelines by ``Kernel.key``.

This module is the public interface between the generators (``kernels/*``) and
the backends. It defines:

- `Precision`: storage precision of activations and weights (``vec4<f32>`` or
  ``vec4<f16>``).
- `WeightLayout`: the two blocked vec4 weight layouts (see `kernels.weights`).
- `ConvSource`, `ConvSpec`: one 3x3 convolution, optionally fused with
  upsample+concat of several sources (decoder) or a trailing 2x2 max pool.
- `PoolSpec`: a stand-alone 2x2 max pool.
- `ParamField`, `ParamsLayout`: a uniform params struct declared once in Python;
  it prints the WGSL ``struct Params`` and packs the matching bytes
  (`SHAPE_PARAMS`; `FRAME_PARAMS`, the denoise passes' per-frame ``struct Frame``).
- `DeviceLimits`: the device limits and features kernel choice depends on.
- `Binding`, `BindingKind`, `Kernel`: the generated kernel and its binding table.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from oidn_gpu.errors import InvalidArgumentError

VEC4 = 4  # channels per storage block


def blocks(channels: int) -> int:
    """Number of vec4 blocks holding ``channels`` channels (``ceil(channels / 4)``)."""
    return -(-channels // VEC4)


class Precision(enum.Enum):
    """Storage precision of activations and weights."""

    FP32 = "fp32"
    FP16 = "fp16"

    @property
    def scalar(self) -> str:
        """WGSL scalar type name (``f32`` or ``f16``)."""
        return "f32" if self is Precision.FP32 else "f16"

    @property
    def vec4(self) -> str:
        """WGSL storage vector type (``vec4<f32>`` or ``vec4<f16>``)."""
        return f"vec4<{self.scalar}>"

    @property
    def itemsize(self) -> int:
        """Bytes per scalar (4 or 2)."""
        return 4 if self is Precision.FP32 else 2

    @property
    def numpy_dtype(self) -> str:
        """NumPy dtype name of one scalar (``float32`` or ``float16``)."""
        return "float32" if self is Precision.FP32 else "float16"


class DecoderForm(enum.Enum):
    """How an implicit-GEMM decoder conv reads its nearest-x2 upsampled sources.

    FULL: a 3x3 conv over the upsampled channels (9 taps x every input block). PARITY: the
    output pixels of one parity ``(y % 2, x % 2)`` read an upsampled source through a 2x2
    kernel at low resolution (the 3x3 weights summed per parity, `kernels.weights`), the
    other sources through their 3x3 taps; one parity per workgroup (`kernels.conv_parity`).
    """

    FULL = "full"
    PARITY = "parity"


class WeightLayout(enum.Enum):
    """Blocked vec4 layouts of 3x3 conv weights (see `kernels.weights`).

    Both store vec4s of 4 output lanes for one input channel and one tap.
    With ``ob`` the output block, ``t = ky * 3 + kx`` the tap, ``ib`` the input
    block (over the concatenated, per-source padded input blocks) and ``il`` the
    input lane (0..3), the vec4 index is:

    - OUTPUT_MAJOR: ``((ob * 9 + t) * IB + ib) * 4 + il``
    - K_MAJOR:      ``((t * IB + ib) * OB + ob) * 4 + il``
    """

    OUTPUT_MAJOR = "output-major"
    K_MAJOR = "k-major"


class BindingKind(enum.Enum):
    """How a binding is declared in WGSL."""

    STORAGE_READ = "read-only-storage"
    STORAGE_READ_WRITE = "storage"
    UNIFORM = "uniform"


@dataclass(frozen=True)
class Binding:
    """One ``@group(0) @binding(index)`` declaration, by name."""

    index: int
    name: str
    kind: BindingKind


# --------------------------------------------------------------------------- params


class ParamType(enum.Enum):
    """WGSL scalar types allowed in a params struct (all 4 bytes)."""

    U32 = "u32"
    I32 = "i32"
    F32 = "f32"


_PACK_CODES = {ParamType.U32: "<I", ParamType.I32: "<i", ParamType.F32: "<f"}


@dataclass(frozen=True)
class ParamField:
    """One scalar field of a params struct."""

    name: str
    type: ParamType = ParamType.U32


@dataclass(frozen=True)
class ParamsLayout:
    """A uniform params struct, declared once: prints the WGSL struct and packs its bytes.

    Every field is a 4-byte scalar, so the WGSL layout is the fields in order
    with no holes; the packed size is rounded up to 16 bytes (uniform buffers).
    """

    fields: tuple[ParamField, ...]
    struct_name: str = "Params"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def size(self) -> int:
        """Packed size in bytes (a multiple of 16, at least 16)."""
        return max(16, -(-4 * len(self.fields) // 16) * 16)

    def wgsl(self) -> str:
        """The WGSL ``struct`` declaration."""
        lines = [f"struct {self.struct_name} {{"]
        lines += [f"  {f.name}: {f.type.value}," for f in self.fields]
        lines.append("}")
        return "\n".join(lines)

    def pack(self, **values: float) -> bytes:
        """Pack the field values (all fields, by name) into little-endian bytes.

        Raises:
            InvalidArgumentError: a field is missing, unknown, or out of range.
        """
        missing = [n for n in self.names if n not in values]
        unknown = sorted(set(values) - set(self.names))
        if missing or unknown:
            raise InvalidArgumentError(
                f"params {self.struct_name}: missing fields {missing}, unknown fields {unknown}; "
                f"expected {list(self.names)}"
            )
        out = bytearray()
        for f in self.fields:
            value = values[f.name]
            try:
                if f.type is ParamType.F32:
                    out += struct.pack("<f", float(value))
                else:
                    if int(value) != value:
                        raise InvalidArgumentError(
                            f"params field '{f.name}' must be an integer, got {value!r}"
                        )
                    out += struct.pack(_PACK_CODES[f.type], int(value))
            except struct.error as err:
                raise InvalidArgumentError(
                    f"params field '{f.name}' value {value!r} does not fit {f.type.value}"
                ) from err
        out += bytes(self.size - len(out))
        return bytes(out)


#: Params of every convolution / pool kernel: the OUTPUT tensor's spatial size.
SHAPE_PARAMS = ParamsLayout((ParamField("height"), ParamField("width")))

#: The per-frame uniform of the denoise input and output passes (binding ``frame``):
#: the main input's scale ``s`` and the output scale ``1/s`` (float32 division, 0 when
#: ``s == 0``), 16 bytes. One buffer serves every tile of a frame, so a host may
#: rewrite it between frames (autoexposure) without touching the per-tile params.
FRAME_PARAMS = ParamsLayout(
    (ParamField("input_scale", ParamType.F32), ParamField("output_scale", ParamType.F32)),
    struct_name="Frame",
)


# --------------------------------------------------------------------------- specs


@dataclass(frozen=True)
class ConvSource:
    """One input tensor of a convolution.

    ``upsample``: the source is at half the conv resolution and is read through
    nearest x2 upsampling (``src[y // 2, x // 2]``); the conv resolution must be even.
    """

    channels: int
    upsample: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.channels, int) or self.channels < 1:
            raise InvalidArgumentError(
                f"source channels must be a positive int, got {self.channels!r}"
            )


@dataclass(frozen=True)
class ConvSpec:
    """A 3x3 / stride 1 / zero-pad 1 convolution with bias, and its fusions.

    The conv input is the channel concatenation of ``sources`` (each source's
    channels padded to whole vec4 blocks, see `in_blocks`). ``pool`` fuses a 2x2
    max pool after the activation (the output is then half resolution).
    ``out_precision`` (default: ``precision``) is the output tensor precision;
    the final layer writes fp32.
    """

    sources: tuple[ConvSource, ...]
    out_channels: int
    precision: Precision = Precision.FP32
    relu: bool = True
    pool: bool = False
    out_precision: Precision | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.sources, tuple) or not self.sources:
            raise InvalidArgumentError(
                "a convolution needs at least one source (a non-empty tuple)"
            )
        if not isinstance(self.out_channels, int) or self.out_channels < 1:
            raise InvalidArgumentError(
                f"out_channels must be a positive int, got {self.out_channels!r}"
            )
        if not isinstance(self.precision, Precision):
            raise InvalidArgumentError(f"precision must be a Precision, got {self.precision!r}")
        if self.pool and any(s.upsample for s in self.sources):
            raise InvalidArgumentError("a fused pool cannot read upsampled sources")
        if self.out_precision is None:
            object.__setattr__(self, "out_precision", self.precision)

    @classmethod
    def simple(
        cls,
        in_channels: int,
        out_channels: int,
        precision: Precision = Precision.FP32,
        *,
        relu: bool = True,
        pool: bool = False,
        out_precision: Precision | None = None,
    ) -> ConvSpec:
        """A plain conv of one source."""
        return cls((ConvSource(in_channels),), out_channels, precision, relu, pool, out_precision)

    @property
    def in_channels(self) -> int:
        return sum(s.channels for s in self.sources)

    @property
    def source_blocks(self) -> tuple[int, ...]:
        return tuple(blocks(s.channels) for s in self.sources)

    @property
    def in_blocks(self) -> int:
        """Input vec4 blocks, concatenated over sources (each padded separately)."""
        return sum(self.source_blocks)

    @property
    def out_blocks(self) -> int:
        return blocks(self.out_channels)

    @property
    def decoder(self) -> bool:
        """True when some source is upsampled or there are several sources."""
        return len(self.sources) > 1 or any(s.upsample for s in self.sources)

    def describe(self) -> str:
        """Short deterministic text of the spec (used in keys and shader headers)."""
        src = "+".join(f"{s.channels}{'u' if s.upsample else ''}" for s in self.sources)
        parts = [
            f"in={src}",
            f"out={self.out_channels}",
            self.precision.value,
            f"out_{self.out_precision.value}",  # type: ignore[union-attr]
            "relu" if self.relu else "linear",
        ]
        if self.pool:
            parts.append("pool")
        return " ".join(parts)


@dataclass(frozen=True)
class ChannelsSpec:
    """The spec of a kernel that only needs a channel count and a tensor precision."""

    channels: int
    precision: Precision = Precision.FP32

    def __post_init__(self) -> None:
        if not isinstance(self.channels, int) or self.channels < 1:
            raise InvalidArgumentError(f"channels must be a positive int, got {self.channels!r}")

    def describe(self) -> str:
        return f"channels={self.channels} {self.precision.value}"


@dataclass(frozen=True)
class PoolSpec(ChannelsSpec):
    """A stand-alone 2x2 / stride 2 max pool of a ``channels``-channel tensor."""


@dataclass(frozen=True)
class DeviceLimits:
    """Device limits and features that kernel choice and validation depend on.

    Defaults are WebGPU's guaranteed minimums, without optional features.
    """

    max_workgroup_storage_bytes: int = 16384
    max_invocations_per_workgroup: int = 256
    max_workgroup_size_x: int = 256
    max_workgroup_size_y: int = 256
    max_workgroup_size_z: int = 64
    max_workgroups_per_dimension: int = 65535
    shader_f16: bool = False
    subgroups: bool = False
    subgroup_min_size: int = 4
    subgroup_max_size: int = 128
    # A discrete GPU with large limits: kernel choice uses the large-GPU GEMM defaults
    # (`kernels.gemm.default_options`).
    large_gpu: bool = False


# --------------------------------------------------------------------------- kernel


@dataclass(frozen=True)
class Kernel:
    """A generated compute shader and how to dispatch it.

    Attributes:
        name: family name, e.g. ``conv-igemm``.
        key: unique, deterministic cache key of the spec (same spec, same key).
        source: WGSL text. Its first line is a comment naming generator and spec.
        entry_point: the ``@compute`` function name.
        workgroup_size: ``(x, y, z)`` as declared in the shader.
        bindings: ordered binding table (group 0).
        grid: maps the output shape ``(channels, height, width)`` to the number of
            workgroups ``(x, y, z)`` to dispatch.
        trusted: True when every index the kernel computes is proven in range for
            the shapes the planner allows, so the backend may compile it without
            runtime bounds checks.
        features: WGSL ``enable`` features the source needs (``f16``, ``subgroups``).
        workgroup_storage_bytes: shared memory the kernel declares.
        params: layout of the uniform bound as ``params`` (None: no params binding).
        weight_layout: layout the ``weights`` binding must be packed in (None: no weights).
        parity_weights: the weights are packed per output parity (`DecoderForm.PARITY`).
        precision: storage precision of the kernel's input tensors / weights.
    """

    name: str
    key: str
    source: str = field(repr=False)
    entry_point: str
    workgroup_size: tuple[int, int, int]
    bindings: tuple[Binding, ...]
    grid: Callable[[int, int, int], tuple[int, int, int]] = field(compare=False)
    trusted: bool = False
    features: tuple[str, ...] = ()
    workgroup_storage_bytes: int = 0
    params: ParamsLayout | None = None
    weight_layout: WeightLayout | None = None
    precision: Precision | None = None
    parity_weights: bool = False

    def binding(self, name: str) -> Binding:
        for binding in self.bindings:
            if binding.name == name:
                return binding
        raise KeyError(f"kernel {self.key} has no binding named '{name}'")

    @property
    def binding_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.bindings)

    def pack_params(self, **values: float) -> bytes:
        """Pack this kernel's params uniform (see `ParamsLayout.pack`)."""
        if self.params is None:
            raise InvalidArgumentError(f"kernel {self.key} has no params")
        return self.params.pack(**values)


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for non-negative ints."""
    return -(-a // b)
