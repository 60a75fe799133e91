"""Image files for the command-line tool: read, pick layers, write atomically.

Everything goes through OpenImageIO (imported lazily, extra ``images``): OpenEXR
(multi-layer, multi-part, half and float), PFM, Radiance HDR, TIFF, PNG, JPEG and
whatever else OpenImageIO reads. Pixels are always handed out as H x W x C
float32 arrays, top row first.

Encoding convention (decided here, used by the CLI):

* Float files (EXR, PFM, HDR, float TIFF) hold **linear** values.
* Integer files (PNG, JPEG, 8/16-bit TIFF) hold **sRGB-encoded** display values,
  read as ``value / max`` in [0, 1] with no transfer applied. That is exactly
  OIDN's LDR ``srgb=True`` input, so the CLI denoises them with ``srgb=True``
  and writes the result back as-is.
* Writing linear data into an integer file sRGB-encodes it (clamped to [0, 1]);
  writing sRGB data into a float file decodes it to linear. Within one kind
  values are written unchanged, so EXR -> EXR and PNG -> PNG are bit-faithful.
  Alpha is never converted, and is read and written unassociated (as stored).
* 32-bit integer channels (OpenEXR UINT: object IDs) are neither: `read_layer` refuses
  a layer or channel list that picks them (other channels of the part read as usual).
  Deep files are refused by every reader. Each image keeps its data and display windows
  (`Image.placement`, `oidn_gpu.image.windows`).

Multi-layer EXR: channels named ``layer.sublayer.C`` are grouped by everything
before the last dot (``ViewLayer.Denoising Albedo.R`` -> layer
``ViewLayer.Denoising Albedo``); channels without a dot form the root layer
``''``. Parts of a multi-part file are layers named after the part. The layer names
renderers give the beauty and the AOVs are in `oidn_gpu.image.aovs` (re-exported here as
`COLOR_LAYER_NAMES`, `ALBEDO_LAYER_NAMES` and `NORMAL_LAYER_NAMES`). Whole files, every
part and channel with its header, are read and written by `oidn_gpu.image.exr`.

Writes go through `oidn_gpu.files.atomic_write`: a temporary file in the
destination folder, renamed over the destination only once complete; any
exception, KeyboardInterrupt included, removes the temporary file, so a
destination is either the old file or the new one, never a partial one.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.errors import InvalidArgumentError, OIDNGPUError, require
from oidn_gpu.files import atomic_write
from oidn_gpu.image.aovs import ALBEDO_LAYER_NAMES as ALBEDO_LAYER_NAMES
from oidn_gpu.image.aovs import COLOR_LAYER_NAMES as COLOR_LAYER_NAMES
from oidn_gpu.image.aovs import NORMAL_LAYER_NAMES as NORMAL_LAYER_NAMES
from oidn_gpu.image.transfer import (
    SRGB_ENCODED_LIMIT,
    SRGB_GAMMA,
    SRGB_LINEAR_LIMIT,
    SRGB_OFFSET,
    SRGB_SLOPE,
)
from oidn_gpu.image.windows import Placement, Window

# Channel-name suffix sets, in the order they are tried; compared case-insensitively.
_COMPONENT_ORDERS: tuple[tuple[str, ...], ...] = (
    ("r", "g", "b"),
    ("x", "y", "z"),
    ("red", "green", "blue"),
    ("u", "v", "w"),
)
_ALPHA_NAMES = ("a", "alpha")
_SINGLE_CHANNEL_NAMES = ("y", "l", "lum", "luminance", "v", "value", "r", "x")

# Formats that can hold only integer pixels, and whose data is therefore sRGB-encoded.
_INTEGER_ONLY_FORMATS = frozenset({"png", "jpeg", "bmp", "gif", "targa", "ico", "webp", "sgi"})
_FLOAT_TYPES = frozenset({"half", "float", "double"})
# 32-bit integer channels (OpenEXR's UINT): object and material IDs, sample counts. They hold
# neither linear light nor sRGB display values, and OpenImageIO reads them as value / (2^32 - 1).
_INTEGER_DATA_TYPES = frozenset({"uint", "int", "uint32", "int32"})
FLATTEN_ADVICE = "flatten it first, for example with 'oiiotool deep.exr --flatten -o flat.exr'"
# Attributes never copied to an output: OpenImageIO bookkeeping and layout facts of the input.
_DROPPED_ATTRIBUTE_PREFIXES = ("oiio:", "tiff:RowsPerStrip", "openexr:chunkCount")
# Formats that hold fewer channel counts than 1 to 4, as OpenImageIO 3.2 writes them (found by
# writing each count): Radiance HDR is RGB only, PFM/PPM/PGM grey or RGB, and a 4-channel JPEG
# would be CMYK.
_WRITABLE_CHANNEL_COUNTS = {
    "hdr": (3,),
    "pnm": (1, 3),
    "jpeg": (1, 3),
    "bmp": (1, 3, 4),
    "webp": (3, 4),
    "gif": (3, 4),
}
_FORMAT_ATTRIBUTE_PREFIXES = ("openexr:", "png:", "jpeg:", "tiff:", "pnm:", "hdr:", "exr:")

SRGB_ENCODING = "srgb"
LINEAR_ENCODING = "linear"


class ImageFileError(OIDNGPUError, OSError):
    """An image file cannot be read, has unexpected content, or cannot be written."""


@dataclass(frozen=True)
class Attribute:
    """One metadata entry of an image file, as OpenImageIO names and types it."""

    name: str
    type_name: str
    value: Any


@dataclass(frozen=True)
class Layer:
    """A group of channels of one file: a multi-layer EXR layer or a part.

    Attributes:
        name: full layer name (``'ViewLayer.Combined'``, ``'albedo'``), ``''`` for the root.
        channels: the file's channel names in this layer, in file order.
        subimage: index of the part (subimage) holding the channels.
    """

    name: str
    channels: tuple[str, ...]
    subimage: int = 0

    @property
    def components(self) -> tuple[str, ...]:
        """Channel names without the layer prefix (``'R'``, ``'X'``)."""
        return tuple(_component(c) for c in self.channels)


@dataclass(frozen=True, eq=False)
class Image:
    """Pixels of one image (or layer) and what is needed to write a similar file.

    Attributes:
        pixels: H x W x C float32, top row first.
        channels: channel names, one per pixel channel.
        pixel_format: the file's pixel type (``'half'``, ``'float'``, ``'uint8'``, ...).
        file_format: OpenImageIO format name (``'openexr'``, ``'png'``).
        attributes: the file's metadata.
        path: where it was read from, if anywhere.
        placement: where the pixels lie in the file's pixel coordinates: its data and
            display windows (`oidn_gpu.image.windows`); None when not read from a file.
    """

    pixels: np.ndarray
    channels: tuple[str, ...]
    pixel_format: str = "float"
    file_format: str = ""
    attributes: tuple[Attribute, ...] = field(default=())
    path: Path | None = None
    placement: Placement | None = None

    @property
    def is_float(self) -> bool:
        """Whether the file stores floating-point pixels (linear data by convention)."""
        return self.pixel_format in _FLOAT_TYPES

    @property
    def encoding(self) -> str:
        """``'linear'`` for float files, ``'srgb'`` for integer files (module doc)."""
        return LINEAR_ENCODING if self.is_float else SRGB_ENCODING

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])


# --- reading ---------------------------------------------------------------------------------


def _oiio() -> Any:
    return require("OpenImageIO", "images")


def _component(channel: str) -> str:
    return channel.rsplit(".", 1)[-1]


def _prefix(channel: str) -> str:
    return channel.rsplit(".", 1)[0] if "." in channel else ""


def library_error(read_error: Callable[[], str], default: str) -> str:
    """OpenImageIO's pending error message (reading it clears it), or ``default``.

    A message about a corrupt file can quote bytes of the file that are not UTF-8, which
    OpenImageIO's Python binding fails to decode; those are shown as ``\\xNN`` escapes.
    Several messages are joined into one line.
    """
    try:
        message = read_error()
    except UnicodeDecodeError as err:
        message = bytes(err.object).decode("utf-8", "backslashreplace")
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return "; ".join(lines) or default


def _open_input(path: str | os.PathLike[str]) -> Any:
    oiio = _oiio()
    path = Path(path)
    if not path.exists():
        raise ImageFileError(f"cannot read '{path}': no such file")
    if path.is_dir():
        raise ImageFileError(f"cannot read '{path}': it is a directory")
    config = oiio.ImageSpec()
    config.attribute("oiio:UnassociatedAlpha", 1)  # keep colour as stored, not premultiplied
    inp = oiio.ImageInput.open(str(path), config)
    if inp is None:
        message = library_error(oiio.geterror, "unknown format or corrupt file")
        raise ImageFileError(f"cannot read '{path}': {message}")
    return inp


def _attributes(spec: Any) -> tuple[Attribute, ...]:
    return tuple(Attribute(a.name, str(a.type), a.value) for a in spec.extra_attribs)


def _read_subimage(inp: Any, path: Path, subimage: int, what: str) -> tuple[Any, np.ndarray]:
    if not inp.seek_subimage(subimage, 0):
        raise ImageFileError(f"cannot read '{path}': it has no part {subimage}")
    spec = inp.spec()
    if spec.deep:
        # a flat read interleaves each pixel's samples across the channels: garbage
        raise ImageFileError(
            f"cannot read {what}'{path}': it is a deep image (several samples per pixel); "
            f"expected a flat image ({FLATTEN_ADVICE})"
        )
    pixels = inp.read_image(subimage, 0, 0, spec.nchannels, "float")
    if pixels is None or inp.has_error:
        message = library_error(inp.geterror, "read failed")
        raise ImageFileError(f"cannot read '{path}': {message}")
    pixels = np.asarray(pixels, dtype=np.float32)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    if pixels.ndim != 3:  # volumetric or otherwise unusual data
        raise ImageFileError(f"cannot read '{path}': unsupported pixel array shape {pixels.shape}")
    return spec, pixels


def read_image(path: str | os.PathLike[str], subimage: int = 0) -> Image:
    """Read every channel of one part of an image file.

    Args:
        path: the file.
        subimage: the part of a multi-part file (0 for ordinary files).

    Returns:
        The image with all its channels as float32.

    Raises:
        ImageFileError: the file is missing, unreadable, corrupt or deep.
        MissingDependencyError: OpenImageIO is not installed.
    """
    image, _ = _read_image(Path(path), subimage, "")
    return image


def _read_image(path: Path, subimage: int, what: str) -> tuple[Image, tuple[str, ...]]:
    """The image of one part and each channel's pixel type; ``what`` (``"layer 'x' of "``)
    starts the file's name in messages."""
    inp = _open_input(path)
    try:
        spec, pixels = _read_subimage(inp, path, subimage, what)
        formats = tuple(str(f) for f in spec.channelformats) or (str(spec.format),) * len(
            spec.channelnames
        )
        image = Image(
            pixels=np.ascontiguousarray(pixels),
            channels=tuple(spec.channelnames),
            pixel_format=str(spec.format),
            file_format=inp.format_name(),
            attributes=_attributes(spec),
            path=path,
            placement=Placement(
                Window(spec.x, spec.y, spec.width, spec.height),
                Window(spec.full_x, spec.full_y, spec.full_width, spec.full_height),
            ),
        )
        return image, formats
    finally:
        inp.close()


def list_layers(path: str | os.PathLike[str]) -> list[Layer]:
    """The layers of a file: channel groups of every part, in file order.

    Raises:
        ImageFileError: the file is missing, unreadable or corrupt.
    """
    path = Path(path)
    inp = _open_input(path)
    try:
        layers: list[Layer] = []
        subimage = 0
        while inp.seek_subimage(subimage, 0):
            spec = inp.spec()
            part = str(spec.getattribute("name") or "") if subimage > 0 or _nparts(inp) > 1 else ""
            groups: dict[str, list[str]] = {}
            for channel in spec.channelnames:
                prefix = _prefix(channel)
                if part and not channel.startswith(part + "."):
                    prefix = f"{part}.{prefix}" if prefix else part
                groups.setdefault(prefix, []).append(channel)
            layers.extend(Layer(name, tuple(chs), subimage) for name, chs in groups.items())
            subimage += 1
        return layers
    finally:
        inp.close()


def _nparts(inp: Any) -> int:
    return int(inp.spec().getattribute("oiio:subimages") or 1)


def match_layer(layers: Sequence[Layer], name: str) -> Layer | None:
    """Exact name, then case-insensitive full name, then case-insensitive last component."""
    for layer in layers:
        if layer.name == name:
            return layer
    folded = name.casefold()
    for layer in layers:
        if layer.name.casefold() == folded:
            return layer
    if folded:
        for layer in layers:
            if layer.name.rsplit(".", 1)[-1].casefold() == folded:
                return layer
    return None


def find_layer(layers: Sequence[Layer], candidates: Iterable[str]) -> Layer | None:
    """The first layer matching one of ``candidates`` (in candidate order) that has pixels
    usable as an image (1 to 3 colour or vector channels), or None."""
    for name in candidates:
        layer = match_layer(layers, name)
        if layer is not None and _select_components(layer) is not None:
            return layer
    return None


def _select_components(layer: Layer) -> tuple[list[int], int | None] | None:
    """Indices (into layer.channels) of the 1-3 value channels and of alpha, or None."""
    folded = [c.casefold() for c in layer.components]
    alpha = next((i for i, c in enumerate(folded) if c in _ALPHA_NAMES), None)
    for order in _COMPONENT_ORDERS:
        if all(c in folded for c in order):
            return [folded.index(c) for c in order], alpha
    values = [i for i, c in enumerate(folded) if c not in _ALPHA_NAMES]
    if len(values) == 1 and folded[values[0]] in _SINGLE_CHANNEL_NAMES:
        return values, alpha
    return None


def read_layer(
    path: str | os.PathLike[str],
    layer_or_channels: str | Layer,
    *,
    with_alpha: bool = False,
) -> Image:
    """Read one layer (R, G, B or X, Y, Z, optionally alpha) or an explicit channel list.

    Args:
        path: the file.
        layer_or_channels: a `Layer`, a layer name (matched exactly, then
            case-insensitively, then by its last component, so ``'Denoising Albedo'``
            finds ``'ViewLayer.Denoising Albedo'``), or a comma-separated list of
            1 to 4 full channel names (``'albedo.R,albedo.G,albedo.B'``).
        with_alpha: append the layer's alpha channel, if it has one, as channel 4.

    Returns:
        The image with 1-3 (or 4 with alpha) channels in R, G, B (or X, Y, Z) order.

    Raises:
        ImageFileError: unreadable file, or no such layer or channels (the message
            lists the layers the file has).
    """
    path = Path(path)
    layers = list_layers(path)
    if isinstance(layer_or_channels, Layer):
        layer: Layer | None = layer_or_channels
        explicit: list[str] | None = None
    elif "," in layer_or_channels:
        layer = None
        explicit = [c.strip() for c in layer_or_channels.split(",") if c.strip()]
    else:
        layer = match_layer(layers, layer_or_channels)
        explicit = None
        if layer is None:
            all_channels = {c for lay in layers for c in lay.channels}
            if layer_or_channels in all_channels:
                explicit = [layer_or_channels]
            else:
                raise ImageFileError(
                    f"'{path}' has no layer '{layer_or_channels}'; its layers are "
                    f"{describe_layers(layers)}"
                )
    if explicit is not None:
        return _read_channels(path, layers, explicit, f"channels {', '.join(explicit)} of ")
    assert layer is not None
    picked = _select_components(layer)
    if picked is None:
        raise ImageFileError(
            f"layer '{layer.name}' of '{path}' has channels {', '.join(layer.components)}; "
            "expected R, G, B or X, Y, Z (or name the channels, comma-separated)"
        )
    indices, alpha = picked
    names = [layer.channels[i] for i in indices]
    if with_alpha and alpha is not None:
        names.append(layer.channels[alpha])
    return _read_channels(path, layers, names, f"layer '{layer.name or '(root)'}' of ")


def _read_channels(
    path: Path, layers: Sequence[Layer], names: Sequence[str], what: str
) -> Image:
    if not 1 <= len(names) <= 4:
        raise ImageFileError(f"expected 1 to 4 channels, got {len(names)}: {', '.join(names)}")
    where = {c: lay.subimage for lay in layers for c in lay.channels}
    missing = [n for n in names if n not in where]
    if missing:
        raise ImageFileError(
            f"'{path}' has no channel '{missing[0]}'; its layers are {describe_layers(layers)}"
        )
    subimages = {where[n] for n in names}
    if len(subimages) != 1:
        raise ImageFileError(f"channels {', '.join(names)} of '{path}' lie in different parts")
    full, formats = _read_image(path, subimages.pop(), what)
    index = {c: i for i, c in enumerate(full.channels)}
    integer = [n for n in names if formats[index[n]] in _INTEGER_DATA_TYPES]
    if integer:
        raise ImageFileError(
            f"cannot read {what}'{path}': channel '{integer[0]}' holds 32-bit integers "
            f"({formats[index[integer[0]]]}), such as object IDs; expected half or float "
            "channels (linear light) or an 8/16-bit image (sRGB)"
        )
    pixels = np.ascontiguousarray(full.pixels[:, :, [index[n] for n in names]])
    return Image(
        pixels=pixels,
        channels=tuple(names),
        pixel_format=full.pixel_format,
        file_format=full.file_format,
        attributes=full.attributes,
        path=path,
        placement=full.placement,
    )


def describe_layers(layers: Sequence[Layer]) -> str:
    """``'(root): R, G, B, A; albedo: R, G, B'`` for messages."""
    parts = [f"{lay.name or '(root)'}: {', '.join(lay.components)}" for lay in layers]
    return "; ".join(parts) if parts else "(none)"


# --- transfer between file conventions -------------------------------------------------------
# IEC 61966-2-1 sRGB, the encoding of 8-bit image files, evaluated in double precision (OIDN's
# float transfer function is image/transfer.py; the constants are the same).


def srgb_encode(linear: np.ndarray) -> np.ndarray:
    """Linear [0, 1] -> sRGB-encoded [0, 1] (input clamped to [0, 1] first)."""
    x = np.clip(np.nan_to_num(linear, nan=0.0), 0.0, 1.0).astype(np.float32)
    high = (1 + SRGB_OFFSET) * np.power(x, 1 / SRGB_GAMMA) - SRGB_OFFSET
    return np.where(x <= SRGB_LINEAR_LIMIT, x * SRGB_SLOPE, high).astype(np.float32)


def srgb_decode(encoded: np.ndarray) -> np.ndarray:
    """sRGB-encoded -> linear (values outside [0, 1] clamped first)."""
    x = np.clip(np.nan_to_num(encoded, nan=0.0), 0.0, 1.0).astype(np.float32)
    high = np.power((x + SRGB_OFFSET) / (1 + SRGB_OFFSET), SRGB_GAMMA)
    return np.where(x <= SRGB_ENCODED_LIMIT, x / SRGB_SLOPE, high).astype(np.float32)


# --- writing ---------------------------------------------------------------------------------


def output_format_name(path: str | os.PathLike[str]) -> str:
    """OpenImageIO's format name for a file name's extension (``'openexr'``, ``'png'``).

    Raises:
        InvalidArgumentError: the extension names no writable format.
    """
    oiio = _oiio()
    ext = Path(path).suffix.lower().lstrip(".")
    if not ext:
        raise InvalidArgumentError(
            f"output '{path}' has no extension; expected one such as .exr, .pfm, .png or .tif"
        )
    out = oiio.ImageOutput.create(f"x.{ext}")
    if out is None:
        library_error(oiio.geterror, "")  # clear it
        raise InvalidArgumentError(
            f"cannot write '.{ext}' files ('{path}'); expected an extension such as "
            ".exr, .pfm, .hdr, .png, .jpg or .tif"
        )
    return str(out.format_name())


def writable_channel_counts(path: str | os.PathLike[str]) -> tuple[int, ...]:
    """The channel counts the format of an output file name can hold (1 to 4 for most).

    Raises:
        InvalidArgumentError: the extension names no writable format.
    """
    return _WRITABLE_CHANNEL_COUNTS.get(output_format_name(path), (1, 2, 3, 4))


def is_integer_format(format_name: str) -> bool:
    """Whether a file format stores only integer (hence sRGB-encoded) pixels."""
    return format_name in _INTEGER_ONLY_FORMATS


def _is_integer_target(path: Path, format_name: str) -> bool:
    """Integer-only formats, and PPM/PGM (OpenImageIO's 'pnm' writer also does float PFM)."""
    pnm_integer = format_name == "pnm" and path.suffix.lower() != ".pfm"
    return is_integer_format(format_name) or pnm_integer


def _pixel_format_for(
    format_name: str, integer: bool, like: Image | None, requested: str | None
) -> str:
    if requested is not None:
        return requested
    if format_name in ("pnm", "hdr") and not integer:
        return "float"  # PFM and Radiance HDR hold float only
    if integer:
        if like is not None and like.pixel_format == "uint16" and format_name == "png":
            return "uint16"
        return "uint8"
    if like is not None:
        if like.is_float or format_name == "tiff":
            return like.pixel_format
        return "half"
    return "half" if format_name == "openexr" else "float"


def _copied_attributes(like: Image | None, format_name: str) -> list[Attribute]:
    if like is None:
        return []
    kept = []
    for attr in like.attributes:
        if attr.name.startswith(_DROPPED_ATTRIBUTE_PREFIXES):
            continue
        same_format = like.file_format == format_name
        if not same_format and (
            attr.name.startswith(_FORMAT_ATTRIBUTE_PREFIXES) or attr.name == "compression"
        ):
            continue  # a compression or layout of another format means nothing here
        kept.append(attr)
    return kept


def write_image_atomic(
    path: str | os.PathLike[str],
    pixels: np.ndarray,
    *,
    channels: Sequence[str] | None = None,
    like: Image | None = None,
    pixel_format: str | None = None,
    encoding: str = LINEAR_ENCODING,
    software: str | None = None,
) -> Path:
    """Write an image so that ``path`` is never left partial or corrupt.

    The image goes to a temporary file in the same folder (`oidn_gpu.files.atomic_write`),
    which then replaces ``path``. On any exception (KeyboardInterrupt included) the
    temporary file is removed and ``path`` is untouched.

    Args:
        path: destination; the extension picks the format.
        pixels: H x W (x C) array; C = 1..4 (4 = alpha last).
        channels: channel names; default R, G, B, A (Y for one channel).
        like: an input image whose metadata is copied where the format allows
            and whose pixel type is followed when the format can hold it.
        pixel_format: force ``'half'``, ``'float'``, ``'uint8'``, ``'uint16'``.
        encoding: ``'linear'`` or ``'srgb'``: what the values are. They are converted
            to the file's convention (module doc) only when that differs.
        software: value for the ``Software`` attribute.

    Returns:
        ``path`` as a Path.

    Raises:
        InvalidArgumentError: bad pixels array, encoding or extension.
        ImageFileError: the file cannot be written.
        OutputFileError: its folder cannot be created or written.
    """
    oiio = _oiio()
    path = Path(path)
    array = np.asarray(pixels, dtype=np.float32)
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3 or not 1 <= array.shape[2] <= 4 or 0 in array.shape:
        raise InvalidArgumentError(
            f"cannot write pixels of shape {np.shape(pixels)}; expected (H, W) or (H, W, 1..4)"
        )
    if encoding not in (LINEAR_ENCODING, SRGB_ENCODING):
        raise InvalidArgumentError(f"unknown encoding {encoding!r}; expected 'linear' or 'srgb'")
    format_name = output_format_name(path)
    height, width, nchannels = array.shape
    if format_name == "jpeg" and nchannels == 4:
        array, nchannels = array[:, :, :3], 3  # JPEG has no alpha
    names = list(channels) if channels is not None else _default_channels(nchannels)
    if len(names) != nchannels:
        names = _default_channels(nchannels)
    integer = _is_integer_target(path, format_name)
    array = _convert_encoding(array, format_name, integer, encoding)

    spec = oiio.ImageSpec(
        width, height, nchannels, _pixel_format_for(format_name, integer, like, pixel_format)
    )
    spec.channelnames = tuple(names)
    if nchannels in (2, 4):
        spec.alpha_channel = nchannels - 1
        spec.attribute("oiio:UnassociatedAlpha", 1)
    for attr in _copied_attributes(like, format_name):
        try:
            spec.attribute(attr.name, oiio.TypeDesc(attr.type_name), attr.value)
        except (TypeError, ValueError, RuntimeError):
            # an attribute OpenImageIO cannot round-trip through Python (a corrupt file's
            # attribute of a mismatched type raises std::bad_cast as RuntimeError)
            continue
    if format_name == "openexr" and not spec.getattribute("compression"):
        spec.attribute("compression", "zip")
    if software:
        spec.attribute("Software", software)

    with atomic_write(path) as tmp:
        tmp.file.close()  # OpenImageIO writes the (empty, exclusively created) file by name
        out = oiio.ImageOutput.create(str(tmp.path))
        try:
            if out is None or not out.open(str(tmp.path), spec):
                raise ImageFileError(f"cannot write '{path}': {_error(oiio, out)}")
            if not out.write_image(np.ascontiguousarray(array)):
                raise ImageFileError(f"cannot write '{path}': {_error(oiio, out)}")
            closing, out = out, None
            if not closing.close():
                raise ImageFileError(f"cannot write '{path}': {_error(oiio, closing)}")
        finally:
            if out is not None:
                # already failing: the original error matters, not one from closing
                with contextlib.suppress(Exception):
                    out.close()
    return path


def _error(oiio: Any, out: Any) -> str:
    message = library_error(out.geterror, "") if out is not None else ""
    return message or library_error(oiio.geterror, "unknown error")


def _default_channels(nchannels: int) -> list[str]:
    return {1: ["Y"], 2: ["Y", "A"], 3: ["R", "G", "B"], 4: ["R", "G", "B", "A"]}[nchannels]


def _convert_encoding(
    array: np.ndarray, format_name: str, integer: bool, encoding: str
) -> np.ndarray:
    """Convert the colour channels (never alpha) to the target format's convention."""
    target = SRGB_ENCODING if integer else LINEAR_ENCODING
    if format_name == "tiff":
        target = encoding  # TIFF can be either; keep what we have
    if target == encoding:
        return array
    colour = array.shape[2] - (1 if array.shape[2] in (2, 4) else 0)
    out = array.copy()
    convert = srgb_encode if target == SRGB_ENCODING else srgb_decode
    out[:, :, :colour] = convert(array[:, :, :colour])
    return out


@dataclass(frozen=True)
class PartInfo:
    """The header of one part of a file, as ``--list-layers`` shows it.

    Attributes:
        window: the data window ``(x, y, width, height)``.
        display: the display window ``(x, y, width, height)``.
        tiles: ``(width, height)`` of the tiles, or None for scanlines.
        compression: the compression name (``'zip'``), or ``''``.
        formats: each channel's pixel type (``'half'``, ``'float'``, ``'uint'``, ...).
        file_format: OpenImageIO's name of the file's format (``'openexr'``).
    """

    window: tuple[int, int, int, int]
    display: tuple[int, int, int, int]
    tiles: tuple[int, int] | None
    compression: str
    formats: dict[str, str]
    file_format: str


def describe_parts(path: str | os.PathLike[str]) -> list[PartInfo]:
    """The header of every part of a file: windows, tiling, compression, pixel types.

    Raises:
        ImageFileError: the file is missing, unreadable or corrupt.
    """
    path = Path(path)
    inp = _open_input(path)
    try:
        parts: list[PartInfo] = []
        subimage = 0
        while inp.seek_subimage(subimage, 0):
            spec = inp.spec()
            formats = spec.channelformats or (spec.format,) * spec.nchannels
            parts.append(
                PartInfo(
                    (spec.x, spec.y, spec.width, spec.height),
                    (spec.full_x, spec.full_y, spec.full_width, spec.full_height),
                    (spec.tile_width, spec.tile_height) if spec.tile_width else None,
                    str(spec.getattribute("compression") or ""),
                    dict(zip(spec.channelnames, (str(f) for f in formats), strict=True)),
                    inp.format_name(),
                )
            )
            subimage += 1
        return parts
    finally:
        inp.close()
