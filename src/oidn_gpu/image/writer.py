"""Image files written atomically (`write_image_atomic`): the format from the file name's
extension, the pixel type and encoding of the file's convention (`oidn_gpu.image.io`'s
module doc), the metadata of a similar input kept where the format allows it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.encoded import PartShape, write_encoded
from oidn_gpu.image.image_types import (
    LINEAR_ENCODING,
    SRGB_ENCODING,
    Attribute,
    Image,
    ImageFileError,
    library_error,
    library_name,
)
from oidn_gpu.image.image_types import (
    oiio as _oiio,
)
from oidn_gpu.image.transfer import (
    SRGB_ENCODED_LIMIT,
    SRGB_GAMMA,
    SRGB_LINEAR_LIMIT,
    SRGB_OFFSET,
    SRGB_SLOPE,
)

# Formats that can hold only integer pixels, and whose data is therefore sRGB-encoded.
_INTEGER_ONLY_FORMATS = frozenset({"png", "jpeg", "bmp", "gif", "targa", "ico", "webp", "sgi"})
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
    out = oiio.ImageOutput.create(f"x.{ext}") if library_name(ext) is not None else None
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


def is_integer_output(path: str | os.PathLike[str]) -> bool:
    """Whether an output file name's format stores integer (sRGB-encoded) pixels.

    Raises:
        InvalidArgumentError: the extension names no writable format.
    """
    return _is_integer_target(Path(path), output_format_name(path))


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
    colorspace: str | None = None,
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
        colorspace: the colour space the file is labelled with (``oiio:ColorSpace``; an
            OpenEXR's ``colorInteropID``), or None for none.

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
    kind = _pixel_format_for(format_name, integer, like, pixel_format)
    spec = oiio.ImageSpec(width, height, nchannels, kind)
    spec.channelnames = tuple(names)
    _describe(spec, oiio, format_name, _copied_attributes(like, format_name), software)
    if colorspace:
        spec.attribute("oiio:ColorSpace", colorspace)
    _write(oiio, path, spec, array, format_name)
    return path


def _describe(
    spec: Any, oiio: Any, format_name: str, attributes: Sequence[Attribute], software: str | None
) -> None:
    """The output's alpha channel, the input's metadata it keeps, its compression and
    ``Software``."""
    nchannels = spec.nchannels
    if nchannels in (2, 4):
        spec.alpha_channel = nchannels - 1
        spec.attribute("oiio:UnassociatedAlpha", 1)
    for attr in attributes:
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


def _write(oiio: Any, path: Path, spec: Any, array: np.ndarray, format_name: str) -> None:
    """Write ``array`` to a temporary file beside ``path``, check it, then replace ``path``
    with it (`oidn_gpu.image.encoded`)."""

    def encode(name: str) -> None:
        # by format name: ``name`` may have no extension
        with created_output(oiio, format_name, path) as out:
            if not out.open(name, spec):
                raise ImageFileError(f"cannot write '{path}': {output_error(oiio, out)}")
            if not out.write_image(np.ascontiguousarray(array)):
                raise ImageFileError(f"cannot write '{path}': {output_error(oiio, out)}")

    shape = PartShape(spec.width, spec.height, spec.nchannels)
    value_bytes = oiio.TypeDesc(spec.format).size()
    write_encoded(path, format_name, encode, [shape], value_bytes)


def output_error(oiio: Any, out: Any) -> str:
    """Why a write failed: the output's own message, else OpenImageIO's (``out`` may be
    None)."""
    message = library_error(out.geterror, "") if out is not None else ""
    return message or library_error(oiio.geterror, "unknown error")


@contextlib.contextmanager
def created_output(oiio: Any, format_name: str, path: Path) -> Iterator[Any]:
    """An OpenImageIO output of ``format_name`` for the block to open and write (``path``
    names the file in messages), closed after it, a failed close raising `ImageFileError`;
    when the block raises, closed quietly (its error is the one that matters).

    Raises:
        ImageFileError: OpenImageIO has no such output, or closing it failed.
    """
    out = oiio.ImageOutput.create(format_name)
    if out is None:
        raise ImageFileError(f"cannot write '{path}': {output_error(oiio, None)}")
    try:
        yield out
    except BaseException:
        with contextlib.suppress(Exception):
            out.close()
        raise
    if not out.close():
        raise ImageFileError(f"cannot write '{path}': {output_error(oiio, out)}")


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
