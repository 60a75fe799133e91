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

The transfer word keeps oidn-webgpu's meaning: with hdr, 0 (and any unknown
value) PU and 1 log; without hdr, 0 and 1 mean no curve (oidn-webgpu clamps LDR
color to [0, 1] and applies none). oidn-gpu adds 2 linear (no curve, in either
mode), 3 sRGB and 4 PU. OIDN's own LDR default is the sRGB curve: `make_config`
with ``transfer="default"`` writes 3 for an LDR config, so programs recorded
through it denoise as OIDN does.

Parsing follows oidn-webgpu's reader (``program.ts``), which takes what it is
given: words past the end read as absent (each option then takes its default,
as an absent word reads ``undefined`` there), extra words and a trailing partial
word are ignored, unknown feature bits are dropped, and an out-of-range choice
word takes oidn-webgpu's default for it. Only what would make a wrong or
unbounded program is refused, naming the word and oidn-webgpu's rule: a version
other than 1, a missing or out-of-range width or height, more than
`MAX_MATRIX_CONFIGS` matrix configurations, a maxComputeWorkgroupsPerDimension
of 0, kernel 3 (at recording), and an input scale that is not a finite positive
float32.

This port has no subgroup-matrix kernels: kernel 3 is rejected, and the matrix
configurations and options are read and kept but do not change the program.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from oidn_gpu.backends.base import Precision
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.record.format import CONFIG_VERSION, U32_MAX, WORD_BYTES

# The precision word's values, in word order (the wgpu backend's precisions).
PRECISIONS = tuple(p.value for p in (Precision.AUTO, Precision.FP32, Precision.FP16))
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
    """The denoise part of a config: what one whole denoise does.

    ``transfer`` is a `TRANSFERS` name; ``"default"`` is word 0, oidn-webgpu's meaning:
    PU with hdr, no curve without (`make_config` writes ``"srgb"`` for OIDN's LDR curve).
    """

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
    if c.max_compute_workgroups_per_dimension == 0:
        raise InvalidArgumentError(
            "config word 10 (maxComputeWorkgroupsPerDimension) is 0; expected at least 1 "
            "(WebGPU guarantees 65535): nothing could be dispatched"
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
        if d.transfer == "log" and not d.hdr:
            raise InvalidArgumentError(
                "config transfer 'log' needs hdr: oidn-webgpu applies no curve to LDR color "
                "whatever the transfer word (use 'linear', 'srgb' or 'pu')"
            )
        _check_word("max tile edge", d.max_tile_edge)
        scale = float(d.input_scale)
        if not math.isfinite(scale) or scale <= 0:
            raise InvalidArgumentError(
                f"config input scale {d.input_scale!r} (the last denoise word, float32 bits) "
                "must be a finite number > 0; 0 means 1 (oidn-webgpu's rule)"
            )


def _choice(what: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        expected = ", ".join(repr(c) for c in choices)
        raise InvalidArgumentError(f"unknown config {what} {value!r}; expected one of {expected}")


def _choice_word(value: int | None, choices: tuple[str, ...]) -> str:
    """oidn-webgpu's ``choices[word]``: an absent or out-of-range word is the default."""
    return choices[value] if value is not None and value < len(choices) else choices[0]


def transfer_name(word: int | None, hdr: bool) -> str:
    """The `TRANSFERS` name of a denoise config's transfer word (see the module doc).

    oidn-webgpu reads ``word === 1 ? 'log' : 'pu'`` and uses it only with hdr; LDR color
    gets no curve. oidn-gpu's words 2 to 4 name their curve in either mode.
    """
    if word is not None and 2 <= word < len(TRANSFERS):
        return TRANSFERS[word]
    if word == 1 and hdr:
        return "log"
    return "default"  # PU with hdr, no curve without


def parse_config(data: bytes | bytearray | memoryview, *, denoise: bool) -> RecordConfig:
    """Decode config words as oidn-webgpu does; ``denoise``: read the four denoise words.

    Absent words take their defaults, extra words are ignored and out-of-range choices
    are the default choice (see the module doc).

    Raises:
        InvalidArgumentError: a version other than 1, no width or height, more matrix
            configurations than `MAX_MATRIX_CONFIGS`, or a value `RecordConfig` refuses.
    """
    raw = bytes(data)
    words = list(struct.unpack(f"<{len(raw) // WORD_BYTES}I", raw[: len(raw) // 4 * 4]))

    def word(index: int) -> int | None:
        return words[index] if index < len(words) else None

    if len(words) < 3:
        raise InvalidArgumentError(
            f"config has {len(words)} whole word(s); expected at least 3 (version, width, height)"
        )
    if words[0] != CONFIG_VERSION:
        raise InvalidArgumentError(
            f"unsupported config version {words[0]}; expected {CONFIG_VERSION}"
        )
    count = word(13) or 0
    if count > MAX_MATRIX_CONFIGS:
        raise InvalidArgumentError(
            f"config word 13 says {count} matrix configurations; at most {MAX_MATRIX_CONFIGS} "
            "are supported (oidn-webgpu reads that many, past the end of the config)"
        )
    matrices = []
    for index in range(count):
        base = _FIXED_WORDS + 5 * index
        matrices.append(
            MatrixConfig(
                "f16" if word(base) == 1 else "f32",
                "f16" if word(base + 1) == 1 else "f32",
                *(word(base + k) or 0 for k in (2, 3, 4)),
            )
        )
    options = _FIXED_WORDS + 5 * count
    double = word(options)
    denoise_options = None
    if denoise:
        base = options + _OPTION_WORDS
        hdr = word(base) == 1
        scale = word(base + 3) or 0
        denoise_options = DenoiseOptions(
            hdr=hdr,
            transfer=transfer_name(word(base + 1), hdr),
            max_tile_edge=word(base + 2) or 0,
            input_scale=1.0 if scale == 0 else _f32_value(scale),
        )
    limit_words = {name: word(6 + i) for i, name in enumerate(DEFAULT_LIMITS)}
    config = RecordConfig(
        width=words[1],
        height=words[2],
        precision=_choice_word(word(3), PRECISIONS),
        kernel=_choice_word(word(4), KERNELS),
        features=frozenset(name for name, bit in FEATURE_BITS.items() if (word(5) or 0) & bit),
        **{n: DEFAULT_LIMITS[n] if v is None else v for n, v in limit_words.items()},
        subgroup_min_size=word(11) or 0,
        subgroup_max_size=word(12) or 0,
        matrix_configs=tuple(matrices),
        double_buffer="default" if double == 0 else "on" if double == 2 else "off",
        accumulation="f16" if word(options + 1) == 1 else "f32",
        sub_pixel=word(options + 2) != 1,
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
        denoise, hdr, transfer, max_tile_edge, input_scale: the denoise words;
            ``transfer="default"`` is OIDN's curve for the mode (PU with hdr, else sRGB,
            written as word 3).
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
    if transfer == "default" and not hdr:
        transfer = "srgb"  # OIDN's LDR curve; word 0 means no curve in LDR (oidn-webgpu)
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
    "transfer_name",
]
