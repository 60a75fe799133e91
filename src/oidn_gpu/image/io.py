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

Modules: this one reads (and re-exports the rest), `image_types` holds the values
reading and writing share (`Image`, `Layer`, `ImageFileError`), `writer` writes
(`write_image_atomic`).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.errors import InvalidArgumentError as InvalidArgumentError
from oidn_gpu.image.aovs import ALBEDO_LAYER_NAMES as ALBEDO_LAYER_NAMES
from oidn_gpu.image.aovs import COLOR_LAYER_NAMES as COLOR_LAYER_NAMES
from oidn_gpu.image.aovs import NORMAL_LAYER_NAMES as NORMAL_LAYER_NAMES
from oidn_gpu.image.image_types import LINEAR_ENCODING as LINEAR_ENCODING
from oidn_gpu.image.image_types import SRGB_ENCODING as SRGB_ENCODING
from oidn_gpu.image.image_types import Attribute as Attribute
from oidn_gpu.image.image_types import Image as Image
from oidn_gpu.image.image_types import ImageFileError as ImageFileError
from oidn_gpu.image.image_types import Layer as Layer
from oidn_gpu.image.image_types import attributes_of as _attributes
from oidn_gpu.image.image_types import library_error as library_error
from oidn_gpu.image.image_types import oiio as _oiio
from oidn_gpu.image.image_types import readable_name
from oidn_gpu.image.image_types import shown as shown
from oidn_gpu.image.windows import Placement, Window
from oidn_gpu.image.writer import is_integer_format as is_integer_format
from oidn_gpu.image.writer import output_format_name as output_format_name
from oidn_gpu.image.writer import srgb_decode as srgb_decode
from oidn_gpu.image.writer import srgb_encode as srgb_encode
from oidn_gpu.image.writer import writable_channel_counts as writable_channel_counts
from oidn_gpu.image.writer import write_image_atomic as write_image_atomic

# How the root layer (channels without a dot, named '') is shown and may be named.
ROOT_LAYER = "(root)"
# Channel-name suffix sets, in the order they are tried; compared case-insensitively.
_COMPONENT_ORDERS: tuple[tuple[str, ...], ...] = (
    ("r", "g", "b"),
    ("x", "y", "z"),
    ("red", "green", "blue"),
    ("u", "v", "w"),
)
_ALPHA_NAMES = ("a", "alpha")
_SINGLE_CHANNEL_NAMES = ("y", "l", "lum", "luminance", "v", "value", "r", "x")

# 32-bit integer channels (OpenEXR's UINT): object and material IDs, sample counts. They hold
# neither linear light nor sRGB display values, and OpenImageIO reads them as value / (2^32 - 1).
_INTEGER_DATA_TYPES = frozenset({"uint", "int", "uint32", "int32"})
# A part `one_decode_per_file` keeps decoded (float32 bytes): larger ones (a 4096x4096 frame
# with its AOVs) are read layer by layer, a band of rows at a time, so that reading a frame
# holds little more than the images it returns.
KEEP_PART_BYTES = 256 << 20
BAND_VALUES = 1 << 22  # values decoded at a time by `read_bands`
FLATTEN_ADVICE = "flatten it first, for example with 'oiiotool deep.exr --flatten -o flat.exr'"


# --- reading ---------------------------------------------------------------------------------

# Decoded parts kept by `one_decode_per_file` while it is active (None: nothing kept).
_decoded: contextvars.ContextVar[dict[tuple[Any, ...], Any] | None] = contextvars.ContextVar(
    "oidn_gpu_decoded_parts", default=None
)


@contextlib.contextmanager
def one_decode_per_file() -> Iterator[None]:
    """Within this block, layers read from one file part decode it once.

    An OpenEXR file stores a scanline block's channels together, so reading the beauty,
    the albedo and the normal of one multi-layer file one after another decompresses the
    whole part three times. Inside this block `read_layer` keeps each part it decoded and
    serves the other layers from it (as long as the file's size, modification time and
    inode are unchanged); the kept pixels are dropped when the block ends. Each image
    returned is its own copy, as outside the block. A block inside another one shares
    the outer block's parts.
    """
    outer = _decoded.get()
    token = _decoded.set({} if outer is None else outer)
    try:
        yield
    finally:
        _decoded.reset(token)


def _prefix(channel: str) -> str:
    return channel.rsplit(".", 1)[0] if "." in channel else ""


def _open_input(path: str | os.PathLike[str]) -> Any:
    oiio = _oiio()
    path = Path(path)
    if not path.exists():
        raise ImageFileError(f"cannot read '{path}': no such file")
    if path.is_dir():
        raise ImageFileError(f"cannot read '{path}': it is a directory")
    config = oiio.ImageSpec()
    config.attribute("oiio:UnassociatedAlpha", 1)  # keep colour as stored, not premultiplied
    with readable_name(path) as name:
        inp = oiio.ImageInput.open(name, config)
    if inp is None:
        message = library_error(oiio.geterror, "unknown format or corrupt file")
        raise ImageFileError(f"cannot read '{path}': {message}")
    return inp


@contextlib.contextmanager
def _opened(path: str | os.PathLike[str]) -> Iterator[Any]:
    """The file open for reading (`_open_input`), closed after the block."""
    inp = _open_input(path)
    try:
        yield inp
    finally:
        inp.close()


def _part_headers(inp: Any) -> Iterator[tuple[int, Any]]:
    """``(index, header)`` of every part of an open file, in file order."""
    subimage = 0
    while inp.seek_subimage(subimage, 0):
        yield subimage, inp.spec()
        subimage += 1


def _flat_part(inp: Any, path: Path, subimage: int, what: str) -> Any:
    """The header of part ``subimage``, sought to; ``what`` (``"layer 'x' of "``) starts the
    file's name in messages.

    Raises:
        ImageFileError: the file has no such part, or it is deep.
    """
    if not inp.seek_subimage(subimage, 0):
        raise ImageFileError(f"cannot read '{path}': it has no part {subimage}")
    spec = inp.spec()
    if spec.deep:
        # a flat read interleaves each pixel's samples across the channels: garbage
        raise ImageFileError(
            f"cannot read {what}'{path}': it is a deep image (several samples per pixel); "
            f"expected a flat image ({FLATTEN_ADVICE})"
        )
    return spec


def _channel_formats(spec: Any) -> tuple[str, ...]:
    """Each channel's pixel type (``'half'``, ``'float'``, ``'uint'``, ...)."""
    formats = tuple(str(f) for f in spec.channelformats)
    return formats or (str(spec.format),) * len(spec.channelnames)


def _part_image(
    inp: Any, spec: Any, path: Path, pixels: np.ndarray, channels: tuple[str, ...]
) -> Image:
    """The `Image` of ``pixels`` (``channels`` of the part with header ``spec``)."""
    return Image(
        pixels=pixels,
        channels=channels,
        pixel_format=str(spec.format),
        file_format=inp.format_name(),
        attributes=_attributes(spec),
        path=path,
        placement=Placement(
            Window(spec.x, spec.y, spec.width, spec.height),
            Window(spec.full_x, spec.full_y, spec.full_width, spec.full_height),
        ),
    )


def _read_subimage(inp: Any, path: Path, subimage: int, what: str) -> tuple[Any, np.ndarray]:
    spec = _flat_part(inp, path, subimage, what)
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


def _kept_part(path: Path, subimage: int, what: str) -> tuple[Image, tuple[str, ...]] | None:
    """`_read_image` served from the decoded parts of `one_decode_per_file` when active and
    the part is at most `KEEP_PART_BYTES` as float32 (the caller copies what it returns);
    None where the part is not kept (no block, or a larger part)."""
    kept = _decoded.get()
    if kept is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        return None  # the part's own read says what is wrong
    key = (str(path.resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, subimage)
    if key not in kept:
        with _opened(path) as inp:
            if not inp.seek_subimage(subimage, 0):
                return None
            spec = inp.spec()
            if spec.width * spec.height * max(1, spec.depth) * spec.nchannels * 4 > (
                KEEP_PART_BYTES
            ):
                return None
        kept[key] = _read_image(path, subimage, what)
    return kept[key]


def _read_image(path: Path, subimage: int, what: str) -> tuple[Image, tuple[str, ...]]:
    """The image of one part and each channel's pixel type; ``what`` (``"layer 'x' of "``)
    starts the file's name in messages."""
    with _opened(path) as inp:
        spec, pixels = _read_subimage(inp, path, subimage, what)
        channels = tuple(spec.channelnames)
        image = _part_image(inp, spec, path, np.ascontiguousarray(pixels), channels)
        return image, _channel_formats(spec)


def list_layers(path: str | os.PathLike[str]) -> list[Layer]:
    """The layers of a file: channel groups of every part, in file order.

    Raises:
        ImageFileError: the file is missing, unreadable or corrupt.
    """
    layers: list[Layer] = []
    with _opened(path) as inp:
        for subimage, spec in _part_headers(inp):
            part = str(spec.getattribute("name") or "") if subimage > 0 or _nparts(inp) > 1 else ""
            groups: dict[str, list[str]] = {}
            for channel in spec.channelnames:
                prefix = _prefix(channel)
                if part and not channel.startswith(part + "."):
                    prefix = f"{part}.{prefix}" if prefix else part
                groups.setdefault(prefix, []).append(channel)
            layers.extend(Layer(name, tuple(chs), subimage) for name, chs in groups.items())
    return layers


def _nparts(inp: Any) -> int:
    return int(inp.spec().getattribute("oiio:subimages") or 1)


def layer_label(layer: Layer) -> str:
    """A layer's name as listings and messages show it: `ROOT_LAYER` for the root's ``''``."""
    return layer.name or ROOT_LAYER


def match_layer(layers: Sequence[Layer], name: str) -> Layer | None:
    """Exact name, then case-insensitive full name, then case-insensitive last component;
    `ROOT_LAYER` (``'(root)'``, as listings show it) names the root layer ``''``."""
    if name.casefold() == ROOT_LAYER and not any(lay.name == name for lay in layers):
        name = ""
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
    return _read_channels(path, layers, names, f"layer '{layer_label(layer)}' of ")


def _read_channels(path: Path, layers: Sequence[Layer], names: Sequence[str], what: str) -> Image:
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
    subimage = subimages.pop()
    kept = _kept_part(path, subimage, what)
    if kept is None:
        return _read_picked(path, subimage, names, what)
    full, formats = kept
    index = {c: i for i, c in enumerate(full.channels)}
    _refuse_integers(path, what, names, [formats[index[n]] for n in names])
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


def _refuse_integers(path: Path, what: str, names: Sequence[str], formats: Sequence[str]) -> None:
    for name, fmt in zip(names, formats, strict=True):
        if fmt in _INTEGER_DATA_TYPES:
            raise ImageFileError(
                f"cannot read {what}'{path}': channel '{name}' holds 32-bit integers "
                f"({fmt}), such as object IDs; expected half or float "
                "channels (linear light) or an 8/16-bit image (sRGB)"
            )


def _read_picked(path: Path, subimage: int, names: Sequence[str], what: str) -> Image:
    """Only the channels ``names`` of one part, decoded a band of rows at a time straight
    into the image returned (the rest of the part is never held as float32)."""
    with _opened(path) as inp:
        spec = _flat_part(inp, path, subimage, what)
        channels = tuple(spec.channelnames)
        formats = _channel_formats(spec)
        index = [channels.index(n) for n in names]
        _refuse_integers(path, what, names, [formats[i] for i in index])
        first, end = min(index), max(index) + 1
        pixels = np.empty((spec.height, spec.width, len(names)), np.float32)
        for top, band in read_bands(inp, path, subimage, first, end):
            pixels[top : top + band.shape[0]] = band[:, :, [i - first for i in index]]
        return _part_image(inp, spec, path, pixels, tuple(names))


def read_bands(
    inp: Any, path: Path, subimage: int, first: int, end: int
) -> Iterator[tuple[int, np.ndarray]]:
    """The channels ``first:end`` of part ``subimage`` of ``path``, open in ``inp`` (sought to
    that part), as float32, a band of about `BAND_VALUES` values at a time (whole tiles of a
    tiled part): ``(first row of the band in the data window, rows x width x channels)``.

    Raises:
        ImageFileError: a band does not decode.
    """
    spec = inp.spec()
    rows = max(1, BAND_VALUES // max(1, spec.width * (end - first)))
    if spec.tile_height:
        rows = max(spec.tile_height, rows // spec.tile_height * spec.tile_height)
    top, bottom = spec.y, spec.y + spec.height
    for y in range(top, bottom, rows):
        stop = min(bottom, y + rows)
        yield y - top, read_rows(inp, path, subimage, spec, y, stop, first, end)


def read_rows(
    inp: Any,
    path: Path,
    subimage: int,
    spec: Any,
    top: int,
    stop: int,
    first: int,
    end: int,
    data_type: str = "float",
) -> np.ndarray:
    """Rows ``top:stop`` (file coordinates; whole tiles of a tiled part, or up to its last
    row) of the channels ``first:end`` of an open part with header ``spec``:
    ``rows x width x channels`` of ``data_type`` ('float' or 'double').

    Raises:
        ImageFileError: the rows do not decode.
    """
    if spec.tile_width:
        z0, z1 = spec.z, spec.z + max(1, spec.depth)
        x0, x1 = spec.x, spec.x + spec.width
        band = inp.read_tiles(subimage, 0, x0, x1, top, stop, z0, z1, first, end, data_type)
    else:
        band = inp.read_scanlines(subimage, 0, top, stop, spec.z, first, end, data_type)
    if band is None or inp.has_error:
        message = library_error(inp.geterror, "read failed")
        raise ImageFileError(f"cannot read '{path}': {message}")
    return np.asarray(band).reshape(stop - top, spec.width, end - first)


def describe_layers(layers: Sequence[Layer]) -> str:
    """``'(root): R, G, B, A; albedo: R, G, B'`` for messages."""
    parts = [shown(f"{layer_label(lay)}: {', '.join(lay.components)}") for lay in layers]
    return "; ".join(parts) if parts else "(none)"


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
    with _opened(path) as inp:
        return [
            PartInfo(
                (spec.x, spec.y, spec.width, spec.height),
                (spec.full_x, spec.full_y, spec.full_width, spec.full_height),
                (spec.tile_width, spec.tile_height) if spec.tile_width else None,
                str(spec.getattribute("compression") or ""),
                dict(zip(spec.channelnames, _channel_formats(spec), strict=True)),
                inp.format_name(),
            )
            for _, spec in _part_headers(inp)
        ]
