"""Config words of `record_network` / `record_denoise` (oidn-web's ``program.ts``).

A config is a sequence of little-endian u32 words describing the device to
record for and the denoise to record, so a native host can ask for a program
without Python objects::

    0 version (1)          1 width                2 height
    3 precision (0 auto, 1 fp32, 2 fp16)
    4 kernel (0 auto, 1 implicit-gemm, 2 direct, 3 subgroup-matrix,
              4 spatial, 5 subgroup; 4 and 5 are this port's families)
    5 features (1 shader-f16, 2 subgroups, 4 chromium-experimental-subgroup-matrix,
                8 wgpu-cooperative-matrix)
    6 maxComputeWorkgroupStorageSize      7 maxComputeInvocationsPerWorkgroup
    8 maxComputeWorkgroupSizeX            9 maxComputeWorkgroupSizeY
    10 maxComputeWorkgroupsPerDimension   11 subgroupMinSize   12 subgroupMaxSize
    13 matrix configuration count, then per configuration:
       component type (0 f32, 1 f16), result type, M, N, K
    then the subgroup-matrix options: double buffering (0 default, 1 off, 2 on),
    accumulation (0 f32, 1 f16), sub-pixel decoders (0 on, 1 off)
    and for a denoise: hdr (0/1), transfer, maximum tile edge (0 = whole image),
    input scale (float32 bits; 0 means 1)

The transfer word is oidn-web's "0 PU, 1 log" for HDR, extended: 0 is OIDN's
default for the mode (PU when hdr, else the sRGB curve), 1 log, 2 linear (an
sRGB-encoded or normal-only input), 3 sRGB, 4 PU.

This port has no subgroup-matrix kernels: kernel 3 is rejected, and the matrix
configurations and options are validated and kept but do not change the program.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.record.format import CONFIG_VERSION, U32_MAX, WORD_BYTES

PRECISIONS = ("auto", "fp32", "fp16")
KERNELS = ("auto", "implicit-gemm", "direct", "subgroup-matrix", "spatial", "subgroup")
FEATURE_BITS = {
    "shader-f16": 1,
    "subgroups": 2,
    "chromium-experimental-subgroup-matrix": 4,
    "wgpu-cooperative-matrix": 8,
}
# wgpu-native spells the subgroup feature "subgroup"; the config uses WebGPU's name.
_DEVICE_FEATURE_NAMES = {"subgroup": "subgroups"}
COMPONENT_TYPES = ("f32", "f16")
DOUBLE_BUFFER = ("default", "off", "on")
TRANSFERS = ("default", "log", "linear", "srgb", "pu")
MAX_MATRIX_CONFIGS = 64
MAX_IMAGE_EDGE = 65536  # px; beyond any WebGPU buffer limit at 16 bytes per pixel
_FIXED_WORDS = 14  # words 0..13
_OPTION_WORDS = 3
_DENOISE_WORDS = 4

# WebGPU's guaranteed minimums: the defaults of a config made without a device.
DEFAULT_LIMITS = {
    "max_compute_workgroup_storage_size": 16384,
    "max_compute_invocations_per_workgroup": 256,
    "max_compute_workgroup_size_x": 256,
    "max_compute_workgroup_size_y": 256,
    "max_compute_workgroups_per_dimension": 65535,
}


@dataclass(frozen=True)
class MatrixConfig:
    """One subgroup-matrix configuration an adapter reports."""

    component_type: str = "f16"
    result_type: str = "f16"
    m: int = 8
    n: int = 8
    k: int = 8


@dataclass(frozen=True)
class DenoiseOptions:
    """The denoise part of a config: what one whole denoise does."""

    hdr: bool = False
    transfer: str = "default"
    max_tile_edge: int = 0
    input_scale: float = 1.0


@dataclass(frozen=True)
class RecordConfig:
    """A decoded config. `to_bytes` and `parse_config` convert to and from words."""

    width: int
    height: int
    precision: str = "auto"
    kernel: str = "auto"
    features: frozenset[str] = frozenset()
    max_compute_workgroup_storage_size: int = DEFAULT_LIMITS["max_compute_workgroup_storage_size"]
    max_compute_invocations_per_workgroup: int = DEFAULT_LIMITS[
        "max_compute_invocations_per_workgroup"
    ]
    max_compute_workgroup_size_x: int = DEFAULT_LIMITS["max_compute_workgroup_size_x"]
    max_compute_workgroup_size_y: int = DEFAULT_LIMITS["max_compute_workgroup_size_y"]
    max_compute_workgroups_per_dimension: int = DEFAULT_LIMITS[
        "max_compute_workgroups_per_dimension"
    ]
    subgroup_min_size: int = 0
    subgroup_max_size: int = 0
    matrix_configs: tuple[MatrixConfig, ...] = ()
    double_buffer: str = "default"
    accumulation: str = "f32"
    sub_pixel: bool = True
    denoise: DenoiseOptions | None = field(default=None)

    def to_words(self) -> list[int]:
        _check_config(self)
        words = [
            CONFIG_VERSION,
            self.width,
            self.height,
            PRECISIONS.index(self.precision),
            KERNELS.index(self.kernel),
            sum(FEATURE_BITS[f] for f in self.features),
            self.max_compute_workgroup_storage_size,
            self.max_compute_invocations_per_workgroup,
            self.max_compute_workgroup_size_x,
            self.max_compute_workgroup_size_y,
            self.max_compute_workgroups_per_dimension,
            self.subgroup_min_size,
            self.subgroup_max_size,
            len(self.matrix_configs),
        ]
        for mc in self.matrix_configs:
            words += [
                COMPONENT_TYPES.index(mc.component_type),
                COMPONENT_TYPES.index(mc.result_type),
                mc.m,
                mc.n,
                mc.k,
            ]
        words += [
            DOUBLE_BUFFER.index(self.double_buffer),
            COMPONENT_TYPES.index(self.accumulation),
            0 if self.sub_pixel else 1,
        ]
        if self.denoise is not None:
            d = self.denoise
            scale_bits = 0 if d.input_scale == 1.0 else _f32_bits(d.input_scale)
            words += [int(d.hdr), TRANSFERS.index(d.transfer), d.max_tile_edge, scale_bits]
        return words

    def to_bytes(self) -> bytes:
        words = self.to_words()
        return struct.pack(f"<{len(words)}I", *words)


def _f32_bits(value: float) -> int:
    return int(struct.unpack("<I", struct.pack("<f", value))[0])


def _f32_value(bits: int) -> float:
    return float(struct.unpack("<f", struct.pack("<I", bits))[0])


def _check_word(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= U32_MAX:
        raise InvalidArgumentError(f"config {name} must be a u32, got {value!r}")


def _check_config(c: RecordConfig) -> None:
    for name in ("width", "height"):
        value = getattr(c, name)
        _check_word(name, value)
        if not 1 <= value <= MAX_IMAGE_EDGE:
            raise InvalidArgumentError(
                f"config {name} {value} is out of range; expected 1 to {MAX_IMAGE_EDGE}"
            )
    _choice("precision", c.precision, PRECISIONS)
    _choice("kernel", c.kernel, KERNELS)
    for f in c.features:
        _choice("feature", f, tuple(FEATURE_BITS))
    for name in (*DEFAULT_LIMITS, "subgroup_min_size", "subgroup_max_size"):
        _check_word(name, getattr(c, name))
    if c.subgroup_min_size > c.subgroup_max_size:
        raise InvalidArgumentError(
            f"config subgroup sizes {c.subgroup_min_size}..{c.subgroup_max_size} are reversed"
        )
    if len(c.matrix_configs) > MAX_MATRIX_CONFIGS:
        raise InvalidArgumentError(
            f"config has {len(c.matrix_configs)} matrix configurations; at most "
            f"{MAX_MATRIX_CONFIGS} are supported"
        )
    for mc in c.matrix_configs:
        _choice("matrix component type", mc.component_type, COMPONENT_TYPES)
        _choice("matrix result type", mc.result_type, COMPONENT_TYPES)
        for name in ("m", "n", "k"):
            _check_word(f"matrix {name}", getattr(mc, name))
    _choice("double buffering", c.double_buffer, DOUBLE_BUFFER)
    _choice("accumulation", c.accumulation, COMPONENT_TYPES)
    if c.denoise is not None:
        d = c.denoise
        _choice("transfer", d.transfer, TRANSFERS)
        _check_word("max tile edge", d.max_tile_edge)
        scale = float(d.input_scale)
        if not math.isfinite(scale) or scale <= 0:
            raise InvalidArgumentError(
                f"config input scale {d.input_scale!r} must be a finite number > 0"
            )


def _choice(what: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        expected = ", ".join(repr(c) for c in choices)
        raise InvalidArgumentError(f"unknown config {what} {value!r}; expected one of {expected}")


def _enum_word(words: list[int], index: int, what: str, choices: tuple[str, ...]) -> str:
    value = words[index]
    if value >= len(choices):
        raise InvalidArgumentError(
            f"config word {index} ({what}) is {value}; expected 0 to {len(choices) - 1}"
        )
    return choices[value]


def parse_config(data: bytes | bytearray | memoryview, *, denoise: bool) -> RecordConfig:
    """Decode config words; ``denoise`` says whether the four denoise words must follow.

    Raises:
        InvalidArgumentError: wrong length, version or an out-of-range word.
    """
    raw = bytes(data)
    if len(raw) % WORD_BYTES:
        raise InvalidArgumentError(f"config has {len(raw)} bytes; expected a multiple of 4")
    words = list(struct.unpack(f"<{len(raw) // WORD_BYTES}I", raw))
    if len(words) < _FIXED_WORDS:
        raise InvalidArgumentError(
            f"config has {len(words)} words; expected at least {_FIXED_WORDS}"
        )
    if words[0] != CONFIG_VERSION:
        raise InvalidArgumentError(
            f"unsupported config version {words[0]}; expected {CONFIG_VERSION}"
        )
    count = words[13]
    if count > MAX_MATRIX_CONFIGS:
        raise InvalidArgumentError(
            f"config has {count} matrix configurations; at most {MAX_MATRIX_CONFIGS} are supported"
        )
    options = _FIXED_WORDS + 5 * count
    expected = options + _OPTION_WORDS + (_DENOISE_WORDS if denoise else 0)
    if len(words) != expected:
        kind = "denoise" if denoise else "network"
        raise InvalidArgumentError(
            f"{kind} config has {len(words)} words; expected {expected} for {count} matrix "
            "configuration(s)"
        )
    features = frozenset(name for name, bit in FEATURE_BITS.items() if words[5] & bit)
    if words[5] & ~sum(FEATURE_BITS.values()):
        raise InvalidArgumentError(f"config features {words[5]:#x} has unknown bits")
    matrices = []
    for index in range(count):
        base = _FIXED_WORDS + 5 * index
        matrices.append(
            MatrixConfig(
                _enum_word(words, base, "matrix component type", COMPONENT_TYPES),
                _enum_word(words, base + 1, "matrix result type", COMPONENT_TYPES),
                *words[base + 2 : base + 5],
            )
        )
    if words[options + 2] > 1:
        raise InvalidArgumentError(
            f"config word {options + 2} (sub-pixel decoders) is {words[options + 2]}; "
            "expected 0 or 1"
        )
    denoise_options = None
    if denoise:
        base = options + _OPTION_WORDS
        if words[base] > 1:
            raise InvalidArgumentError(
                f"config word {base} (hdr) is {words[base]}; expected 0 or 1"
            )
        scale = 1.0 if words[base + 3] == 0 else _f32_value(words[base + 3])
        denoise_options = DenoiseOptions(
            hdr=bool(words[base]),
            transfer=_enum_word(words, base + 1, "transfer", TRANSFERS),
            max_tile_edge=words[base + 2],
            input_scale=scale,
        )
    config = RecordConfig(
        width=words[1],
        height=words[2],
        precision=_enum_word(words, 3, "precision", PRECISIONS),
        kernel=_enum_word(words, 4, "kernel", KERNELS),
        features=features,
        max_compute_workgroup_storage_size=words[6],
        max_compute_invocations_per_workgroup=words[7],
        max_compute_workgroup_size_x=words[8],
        max_compute_workgroup_size_y=words[9],
        max_compute_workgroups_per_dimension=words[10],
        subgroup_min_size=words[11],
        subgroup_max_size=words[12],
        matrix_configs=tuple(matrices),
        double_buffer=_enum_word(words, options, "double buffering", DOUBLE_BUFFER),
        accumulation=_enum_word(words, options + 1, "accumulation", COMPONENT_TYPES),
        sub_pixel=words[options + 2] == 0,
        denoise=denoise_options,
    )
    _check_config(config)
    return config


def device_features(names: Iterable[str]) -> frozenset[str]:
    """Config feature names of a device's feature set (unknown features are dropped)."""
    out = set()
    for name in names:
        name = _DEVICE_FEATURE_NAMES.get(str(name), str(name))
        if name in FEATURE_BITS:
            out.add(name)
    return frozenset(out)


def make_config(
    width: int,
    height: int,
    *,
    precision: str = "auto",
    kernel: str = "auto",
    device: Any = None,
    features: Iterable[str] | None = None,
    denoise: bool = False,
    hdr: bool = False,
    transfer: str = "default",
    max_tile_edge: int = 0,
    input_scale: float = 1.0,
    **limits: int,
) -> bytes:
    """Config bytes for `record_network` (``denoise=False``) or `record_denoise`.

    Args:
        width, height: the image (or network input) size in pixels.
        precision: ``"auto"``, ``"fp32"`` or ``"fp16"``.
        kernel: a name of `KERNELS`.
        device: a `GpuDevice` or its `Capabilities`; its features, limits and subgroup
            sizes are copied, so the program matches what that device would run.
        features: config feature names (override the device's).
        denoise, hdr, transfer, max_tile_edge, input_scale: the denoise words.
        limits: any `RecordConfig` limit field, overriding the device's.

    Raises:
        InvalidArgumentError: a value out of range.
    """
    fields: dict[str, Any] = {}
    if device is not None:
        caps = getattr(device, "capabilities", device)
        x, y, _ = caps.max_compute_workgroup_size
        fields = {
            "features": device_features(caps.features),
            "max_compute_workgroup_storage_size": caps.max_compute_workgroup_storage_size,
            "max_compute_invocations_per_workgroup": caps.max_compute_invocations_per_workgroup,
            "max_compute_workgroup_size_x": x,
            "max_compute_workgroup_size_y": y,
            "max_compute_workgroups_per_dimension": caps.max_compute_workgroups_per_dimension,
            "subgroup_min_size": caps.subgroup_min_size,
            "subgroup_max_size": caps.subgroup_max_size,
        }
    if features is not None:
        fields["features"] = frozenset(features)
    unknown = set(limits) - set(RecordConfig.__dataclass_fields__)
    if unknown:
        raise InvalidArgumentError(f"unknown config fields {sorted(unknown)}")
    fields.update(limits)
    options = DenoiseOptions(hdr, transfer, max_tile_edge, float(input_scale)) if denoise else None
    config = RecordConfig(
        width=width, height=height, precision=precision, kernel=kernel, denoise=options, **fields
    )
    return config.to_bytes()


__all__ = [
    "FEATURE_BITS",
    "KERNELS",
    "PRECISIONS",
    "TRANSFERS",
    "DenoiseOptions",
    "MatrixConfig",
    "RecordConfig",
    "make_config",
    "parse_config",
]
