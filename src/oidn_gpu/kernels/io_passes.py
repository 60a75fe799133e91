"""Input and output passes: packing tensors, and the denoise pipeline's input/output processing.

Four kernels, each one invocation per pixel, workgroup 8x8x1, grid
``(ceil(W / 8), ceil(H / 8), 1)`` over the pixels named below, no shared memory.

- `generate_input_pack` (`PackSpec`): dense ``[H, W, C]`` f32 (``array<f32>``,
  binding ``source``) -> blocked ``[C, H, W]`` tensor (``output``), padding lanes
  zero. Params ``{height, width}``. Grid over ``(H, W)``.
- `generate_output_unpack` (`PackSpec`): blocked ``[C, H, W]`` (``input``) ->
  dense ``[H, W, C]`` f32 (``output``). Params ``{height, width}``.
- `generate_input_pass` (`InputPassSpec`): the denoise input processing of one
  tile (oidn-semantics section 4): main image ``main_image`` scaled by
  ``frame.input_scale``, sanitized (NaN -> 0, clamp to ``[0 or -1, 1 or FLT_MAX]``),
  snorm-mapped, transfer-encoded; ``albedo_image`` clamped to [0, 1];
  ``normal_image`` clamped to [-1, 1] then ``* 0.5 + 0.5``. Images are
  ``array<f32>``, or float16 host images as they are (``array<u32>``, two halves
  per word, widened exactly: `InputPassSpec.dtypes`), with per-image ``offset``,
  ``pixel_stride``, ``row_stride`` (in elements) and ``channels`` (1..3,
  broadcast to 3 as OIDN does). The
  network input ``output`` ``[3 * n_images, tensor_height, tensor_width]``
  (blocked) holds the processed pixel ``(src_y + ty - dst_y, src_x + tx - dst_x)``
  at tensor pixel ``(ty, tx)`` inside the ``copy_height x copy_width`` rectangle
  at ``(dst_y, dst_x)``, and exact zeros everywhere else (OIDN's bottom/right
  padding and the tile's alignment offset). Grid over the tensor
  ``(tensor_height, tensor_width)``.
- `generate_output_pass` (`OutputPassSpec`): the output processing (section 5)
  of the kept ``height x width`` rectangle: network output ``input`` (blocked,
  channels 0..2 of the first block) at tensor pixel ``(src_y + y, src_x + x)``,
  NaN -> 0 and clamp to [0, FLT_MAX], inverse transfer, 1-channel average,
  snorm, LDR clamp, ``* frame.output_scale``, then the first ``out_channels`` values
  are stored to ``output`` (``array<f32>`` with offset/strides) at image pixel
  ``(dst_y + y, dst_x + x)``; other channels (alpha) are untouched.
  Grid over ``(height, width)``. Half outputs: round on the host (NumPy
  ``astype(float16)`` is OIDN's rounding).

The input and output passes take two uniforms: ``params`` (`input_pass_params`,
`OUTPUT_PASS_PARAMS`: the tile's rectangles and the images' layouts, one per
tile) and, at the binding after it, ``frame`` (`spec.FRAME_PARAMS`:
``input_scale``, ``output_scale``), one per frame and shared by all tiles, so the
scale can change per frame without new per-tile params or bind groups (a host
replaying a recorded program rewrites it; oidn-web's ``frame`` uniform).

Transfer constants are printed from `oidn_gpu.image.transfer`; nothing is retyped.
Images reads and writes clamp their index to the buffer (``arrayLength``), so
every kernel here is trusted; the ``frame`` values are only multiplied into
pixel values and never reach an index.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import transfer as tf
from oidn_gpu.kernels import _common
from oidn_gpu.kernels.autoexposure import IMAGE_DTYPES, half_constants, image_binding_type
from oidn_gpu.kernels.spec import (
    FRAME_PARAMS,
    SHAPE_PARAMS,
    Binding,
    BindingKind,
    ChannelsSpec,
    Kernel,
    ParamField,
    ParamsLayout,
    Precision,
    blocks,
)
from oidn_gpu.kernels.template import render

WG_X = 8
WG_Y = 8
FLT_MAX = float(np.finfo(np.float32).max)
ONE_THIRD = float(np.float32(1.0) / np.float32(3.0))  # 0.33333334f, as OIDN

_COMPONENTS = ("x", "y", "z", "w")


class ImageRole(enum.Enum):
    """An image of the denoise input pass, in network channel order."""

    MAIN = "main"
    ALBEDO = "albedo"
    NORMAL = "normal"


@dataclass(frozen=True)
class PackSpec(ChannelsSpec):
    """Dense ``[H, W, channels]`` f32 <-> blocked tensor of ``precision``."""


@dataclass(frozen=True)
class InputPassSpec:
    """Denoise input pass: which images, tensor precision, transfer and mode flags.

    ``images`` starts with `ImageRole.MAIN`, then optionally ALBEDO, then NORMAL
    (OIDN's channel order). ``hdr``/``snorm`` select the main image's clamp range.
    ``dtypes`` gives each image's element type, ``"float32"`` or ``"float16"``
    (None: all float32).
    """

    images: tuple[ImageRole, ...] = (ImageRole.MAIN,)
    precision: Precision = Precision.FP32
    transfer: tf.Transfer = tf.Transfer.LINEAR
    hdr: bool = False
    snorm: bool = False
    dtypes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.dtypes is not None and (
            len(self.dtypes) != len(self.images) or any(d not in IMAGE_DTYPES for d in self.dtypes)
        ):
            raise InvalidArgumentError(
                f"invalid image dtypes {self.dtypes!r} for {len(self.images)} image(s); "
                "expected one of 'float32' or 'float16' per image"
            )
        allowed = [
            (ImageRole.MAIN,),
            (ImageRole.MAIN, ImageRole.ALBEDO),
            (ImageRole.MAIN, ImageRole.ALBEDO, ImageRole.NORMAL),
            (ImageRole.MAIN, ImageRole.NORMAL),
        ]
        if self.images not in allowed:
            raise InvalidArgumentError(
                f"invalid input images {self.images!r}; allowed: "
                f"{[tuple(r.value for r in a) for a in allowed]}"
            )
        if not isinstance(self.transfer, tf.Transfer):
            raise InvalidArgumentError(f"transfer must be a Transfer, got {self.transfer!r}")

    @property
    def channels(self) -> int:
        return 3 * len(self.images)

    @property
    def image_dtypes(self) -> tuple[str, ...]:
        return self.dtypes if self.dtypes is not None else ("float32",) * len(self.images)

    def describe(self) -> str:
        halves = [
            r.value for r, d in zip(self.images, self.image_dtypes, strict=True) if d == "float16"
        ]
        return (
            f"images={'+'.join(r.value for r in self.images)} {self.precision.value} "
            f"transfer={self.transfer.value} hdr={int(self.hdr)} snorm={int(self.snorm)}"
            + (f" f16={'+'.join(halves)}" if halves else "")
        )


@dataclass(frozen=True)
class OutputPassSpec:
    """Denoise output pass: network output precision/channels, transfer and mode flags."""

    transfer: tf.Transfer = tf.Transfer.LINEAR
    hdr: bool = False
    snorm: bool = False
    precision: Precision = Precision.FP32
    channels: int = 3

    def __post_init__(self) -> None:
        if not isinstance(self.transfer, tf.Transfer):
            raise InvalidArgumentError(f"transfer must be a Transfer, got {self.transfer!r}")
        if self.channels < 3:
            raise InvalidArgumentError(f"network output needs >= 3 channels, got {self.channels}")

    def describe(self) -> str:
        return (
            f"transfer={self.transfer.value} hdr={int(self.hdr)} snorm={int(self.snorm)} "
            f"{self.precision.value} channels={self.channels}"
        )


def _image_fields(name: str) -> tuple[ParamField, ...]:
    return tuple(
        ParamField(f"{name}_{f}") for f in ("offset", "pixel_stride", "row_stride", "channels")
    )


def input_pass_params(spec: InputPassSpec) -> ParamsLayout:
    """Per-tile params of the input pass (all u32; the scale is in ``frame``)."""
    fields = [
        ParamField(n)
        for n in (
            "tensor_height",
            "tensor_width",
            "dst_y",
            "dst_x",
            "src_y",
            "src_x",
            "copy_height",
            "copy_width",
        )
    ]
    for role in spec.images:
        fields += _image_fields(role.value)
    return ParamsLayout(tuple(fields))


_OUTPUT_PASS_U32 = (
    "tensor_width",
    "src_y",
    "src_x",
    "dst_y",
    "dst_x",
    "height",
    "width",
    "out_offset",
    "out_pixel_stride",
    "out_row_stride",
    "out_channels",
)
OUTPUT_PASS_PARAMS = ParamsLayout(tuple(ParamField(n) for n in _OUTPUT_PASS_U32))


def _transfer_consts(transfer: tf.Transfer) -> dict[str, float]:
    """The transfer curve's constants, from `oidn_gpu.image.transfer`."""
    if transfer is tf.Transfer.PU:
        c = tf.pu_constants()
        return {
            "PU_A": c.a,
            "PU_B": c.b,
            "PU_C": c.c,
            "PU_D": c.d,
            "PU_E": c.e,
            "PU_F": c.f,
            "PU_G": c.g,
            "PU_Y0": c.y0,
            "PU_Y1": c.y1,
            "PU_X0": c.x0,
            "PU_X1": c.x1,
            "PU_INV_C": c.inv_c,
            "NORM_SCALE": c.norm_scale,
            "RCP_NORM_SCALE": c.rcp_norm_scale,
        }
    if transfer is tf.Transfer.SRGB:
        c = tf.srgb_constants()
        return {
            "SRGB_A": c.a,
            "SRGB_B": c.b,
            "SRGB_C": c.c,
            "SRGB_Y0": c.y0,
            "SRGB_X0": c.x0,
            "SRGB_EXPONENT": c.exponent,
            "SRGB_INV_EXPONENT": c.inv_exponent,
        }
    if transfer is tf.Transfer.LOG:
        c = tf.log_constants()
        return {"NORM_SCALE": c.norm_scale, "RCP_NORM_SCALE": c.rcp_norm_scale}
    return {}


def _with_frame(
    entries: list[tuple[str, BindingKind, str]],
) -> tuple[tuple[Binding, ...], list[dict]]:
    """Binding table of ``entries`` then the ``frame`` uniform (declared as ``Frame``)."""
    bindings, decls = _common.make_bindings([*entries, ("frame", BindingKind.UNIFORM, "")])
    decls[-1] = {**decls[-1], "type": FRAME_PARAMS.struct_name}
    return bindings, decls


def _structs(params: ParamsLayout) -> str:
    """The WGSL declarations of ``struct Params`` and ``struct Frame``."""
    return f"{params.wgsl()}\n\n{FRAME_PARAMS.wgsl()}"


def _pixel_kernel(
    name: str,
    key: str,
    source: str,
    bindings: tuple[Binding, ...],
    enables: tuple[str, ...],
    params: ParamsLayout,
    precision: Precision,
) -> Kernel:
    """A trusted kernel of these passes: one invocation per pixel, ``WG_X x WG_Y`` groups."""
    return Kernel(
        name,
        key,
        source,
        "main",
        (WG_X, WG_Y, 1),
        bindings,
        _common.pixel_grid(WG_X, WG_Y),
        trusted=True,
        features=enables,
        params=params,
        precision=precision,
    )


def _block_lanes(lanes: list[str]) -> list[dict]:
    """Group lane expressions into vec4 constructor argument lists (zero padded)."""
    padded = lanes + ["0.0"] * ((-len(lanes)) % 4)
    return [
        {
            "index": b,
            "lanes": ", ".join(
                f"f32({e})" if e != "0.0" else "0.0" for e in padded[4 * b : 4 * b + 4]
            ),
        }
        for b in range(len(padded) // 4)
    ]


def generate_input_pack(spec: PackSpec) -> Kernel:
    """Dense f32 ``[H, W, C]`` (``source``) -> blocked tensor (``output``)."""
    key = f"input-pack[{spec.describe()}]"
    bindings, decls = _common.make_bindings(
        [
            ("source", BindingKind.STORAGE_READ, "f32"),
            ("output", BindingKind.STORAGE_READ_WRITE, spec.precision.vec4),
            ("params", BindingKind.UNIFORM, ""),
        ]
    )
    lanes = [f"source[src + {c}u]" for c in range(spec.channels)]
    enables = _common.enables_for(spec.precision)
    source = render(
        "input_pack.wgsl",
        header=f"oidn_gpu.kernels.io_passes.generate_input_pack {key}",
        consts={
            "WG_X": WG_X,
            "WG_Y": WG_Y,
            "CHANNELS": spec.channels,
            "OUT_BLOCKS": blocks(spec.channels),
        },
        enables=enables,
        params_struct=SHAPE_PARAMS.wgsl(),
        bindings=decls,
        out_type=spec.precision.vec4,
        out_f16=spec.precision is Precision.FP16,
        blocks=_block_lanes(lanes),
    )
    return _pixel_kernel("input-pack", key, source, bindings, enables, SHAPE_PARAMS, spec.precision)


def generate_output_unpack(spec: PackSpec) -> Kernel:
    """Blocked tensor (``input``) -> dense f32 ``[H, W, C]`` (``output``)."""
    key = f"output-unpack[{spec.describe()}]"
    bindings, decls = _common.make_bindings(
        [
            ("input", BindingKind.STORAGE_READ, spec.precision.vec4),
            ("output", BindingKind.STORAGE_READ_WRITE, "f32"),
            ("params", BindingKind.UNIFORM, ""),
        ]
    )
    blk = [
        {
            "index": b,
            "lanes": [
                {"channel": c, "component": _COMPONENTS[c - 4 * b]}
                for c in range(4 * b, min(4 * b + 4, spec.channels))
            ],
        }
        for b in range(blocks(spec.channels))
    ]
    enables = _common.enables_for(spec.precision)
    source = render(
        "output_unpack.wgsl",
        header=f"oidn_gpu.kernels.io_passes.generate_output_unpack {key}",
        consts={
            "WG_X": WG_X,
            "WG_Y": WG_Y,
            "CHANNELS": spec.channels,
            "IN_BLOCKS": blocks(spec.channels),
        },
        enables=enables,
        params_struct=SHAPE_PARAMS.wgsl(),
        bindings=decls,
        blocks=blk,
    )
    return _pixel_kernel(
        "output-unpack", key, source, bindings, enables, SHAPE_PARAMS, spec.precision
    )


def generate_input_pass(spec: InputPassSpec) -> Kernel:
    """The denoise input pass (see module doc).

    Bindings: images, ``output``, ``params`` (per tile), ``frame`` (`FRAME_PARAMS`).
    """
    key = f"input-pass[{spec.describe()}]"
    params = input_pass_params(spec)
    entries = [
        (f"{r.value}_image", BindingKind.STORAGE_READ, image_binding_type(d))
        for r, d in zip(spec.images, spec.image_dtypes, strict=True)
    ]
    entries += [
        ("output", BindingKind.STORAGE_READ_WRITE, spec.precision.vec4),
        ("params", BindingKind.UNIFORM, ""),
    ]
    bindings, decls = _with_frame(entries)
    lanes: list[str] = []
    for r in spec.images:
        lanes += [f"{r.value}_v.{c}" for c in "xyz"]
    consts: dict[str, object] = {
        "WG_X": WG_X,
        "WG_Y": WG_Y,
        "CHANNELS": spec.channels,
        "OUT_BLOCKS": blocks(spec.channels),
        "FLT_MAX": FLT_MAX,
        "MAIN_LO": -1.0 if spec.snorm else 0.0,
        "MAIN_HI": FLT_MAX if spec.hdr else 1.0,
        **_transfer_consts(spec.transfer),
        **half_constants(spec.image_dtypes),
    }
    enables = _common.enables_for(spec.precision)
    source = render(
        "input_pass.wgsl",
        header=f"oidn_gpu.kernels.io_passes.generate_input_pass {key}",
        consts=consts,
        enables=enables,
        params_struct=_structs(params),
        bindings=decls,
        images=[
            {"name": r.value, "buffer": f"{r.value}_image", "f16": d == "float16"}
            for r, d in zip(spec.images, spec.image_dtypes, strict=True)
        ],
        any_f16="float16" in spec.image_dtypes,
        aux=[r.value for r in spec.images[1:]],
        transfer=spec.transfer.value,
        snorm=spec.snorm,
        out_type=spec.precision.vec4,
        out_f16=spec.precision is Precision.FP16,
        blocks=_block_lanes(lanes),
    )
    return _pixel_kernel("input-pass", key, source, bindings, enables, params, spec.precision)


def generate_output_pass(spec: OutputPassSpec) -> Kernel:
    """The denoise output pass (see module doc).

    Bindings: ``input``, ``output``, ``params`` (per tile), ``frame`` (`FRAME_PARAMS`).
    """
    key = f"output-pass[{spec.describe()}]"
    bindings, decls = _with_frame(
        [
            ("input", BindingKind.STORAGE_READ, spec.precision.vec4),
            ("output", BindingKind.STORAGE_READ_WRITE, "f32"),
            ("params", BindingKind.UNIFORM, ""),
        ]
    )
    consts: dict[str, object] = {
        "WG_X": WG_X,
        "WG_Y": WG_Y,
        "IN_BLOCKS": blocks(spec.channels),
        "FLT_MAX": FLT_MAX,
        "ONE_THIRD": ONE_THIRD,
        **_transfer_consts(spec.transfer),
    }
    enables = _common.enables_for(spec.precision)
    source = render(
        "output_pass.wgsl",
        header=f"oidn_gpu.kernels.io_passes.generate_output_pass {key}",
        consts=consts,
        enables=enables,
        params_struct=_structs(OUTPUT_PASS_PARAMS),
        bindings=decls,
        transfer=spec.transfer.value,
        snorm=spec.snorm,
        hdr=spec.hdr,
    )
    return _pixel_kernel(
        "output-pass", key, source, bindings, enables, OUTPUT_PASS_PARAMS, spec.precision
    )
