"""Whole-file EXR round trips: every part, channel and header field kept.

`read_file` reads every part of a (multi-part, multi-layer) OpenEXR file with its
OpenImageIO ``ImageSpec``: channel names and per-channel pixel types (half stays
half, float stays float, uint stays uint), data window and display window, tiling,
compression and every other attribute. The pixels stay in the file: `write_file` writes
a band of rows at a time, each band's untouched channels decoded from the input file as
float32, which holds half and float values exactly (float64 in a part with 32-bit
unsigned channels, such as object IDs), so they are written back bit for bit while the
whole file is never held in memory (the input must not change in between: it is checked).

`ExrFile.replace_channels` puts new values into existing channels (the denoised
beauty under the noisy one's names) and `ExrFile.add_channels` adds channels (a new
layer such as ``ViewLayer.Denoised``), keeping the pixel type of the channels they
come from. `write_file` writes the result atomically and checks it (`oidn_gpu.image.encoded`).

Only the full-resolution level of a MIP-mapped file is kept (the coarser levels
would still hold the noisy image); deep files are refused.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.errors import require
from oidn_gpu.image.encoded import PartShape, write_encoded
from oidn_gpu.image.image_types import readable_name
from oidn_gpu.image.io import BAND_VALUES, FLATTEN_ADVICE, ImageFileError, library_error, read_rows
from oidn_gpu.image.writer import created_output, output_error

EXR_FORMAT = "openexr"
_FLOAT_TYPES = frozenset({"half", "float"})
# Attributes that describe the reading, not the file, or summarise pixels that denoising
# changes (OpenImageIO's maketx writes the last three): never written back.
_READ_ONLY_ATTRIBUTES = (
    "oiio:subimages",
    "oiio:UnassociatedAlpha",
    "openexr:chunkCount",
    "oiio:miplevels",
    "oiio:AverageColor",
    "oiio:ConstantColor",
    "oiio:SHA-1",
)
# What makes OpenImageIO write MIP levels; only the full-resolution level is written.
_MIPMAP_ATTRIBUTES = ("textureformat", "openexr:roundingmode")


def _oiio() -> Any:
    return require("OpenImageIO", "images")


@dataclass(frozen=True)
class _Source:
    """Where a part's unchanged channels are read from when the file is written: the input
    file as it was when read (its identity, checked again then)."""

    path: Path
    subimage: int
    data_type: str  # 'float', or 'double' for a part with 32-bit unsigned channels
    identity: tuple[int, int, int, int]  # device, inode, size, modification time (ns)


# One channel of a part: its index in the source part, or new values (H x W).
Column = int | np.ndarray


@dataclass
class ExrPart:
    """One part (subimage) of a file: its header and where each channel's pixels are.

    Channels left as they are stay in the input file until the file is written, which
    copies them a band of rows at a time (`write_file`); replaced and added channels are
    held as arrays.

    Attributes:
        spec: the part's OpenImageIO ImageSpec (a private copy).
        source: the input part the unchanged channels are read from.
        columns: for each channel in ``spec.channelnames`` order, its index in the source
            part or its new H x W values.
    """

    spec: Any
    source: _Source
    columns: list[Column]

    @property
    def channels(self) -> tuple[str, ...]:
        return tuple(self.spec.channelnames)

    @property
    def dtype(self) -> type:
        return np.float64 if self.source.data_type == "double" else np.float32

    @property
    def pixels(self) -> np.ndarray:
        """H x W x C over the data window, channels in ``spec.channelnames`` order; float32,
        or float64 where a channel is a 32-bit unsigned integer (the whole part, read now)."""
        with _open_source(self.source) as inp:
            return _band(self, inp, self.spec.y, self.spec.y + self.spec.height)

    def channel_format(self, index: int) -> Any:
        formats = self.spec.channelformats
        return formats[index] if formats else self.spec.format


@dataclass
class ExrFile:
    """Every part of one OpenEXR file."""

    path: Path
    parts: list[ExrPart]

    def _part(self, subimage: int) -> ExrPart:
        if not 0 <= subimage < len(self.parts):
            raise ImageFileError(f"'{self.path}' has no part {subimage}")
        return self.parts[subimage]

    def replace_channels(self, subimage: int, names: Sequence[str], values: np.ndarray) -> None:
        """Put ``values`` (H x W x len(names)) into the existing channels ``names``."""
        part = self._part(subimage)
        index = {c: i for i, c in enumerate(part.channels)}
        missing = [n for n in names if n not in index]
        if missing:
            raise ImageFileError(f"'{self.path}' has no channel '{missing[0]}'")
        values = _checked_values(part, names, values)
        for k, name in enumerate(names):
            part.columns[index[name]] = values[:, :, k]

    def add_channels(
        self,
        subimage: int,
        names: Sequence[str],
        values: np.ndarray,
        like: Sequence[str],
    ) -> None:
        """Add channels ``names`` with ``values``; each takes the pixel type of the
        matching channel of ``like``. Existing channels of the same names are replaced."""
        part = self._part(subimage)
        index = {c: i for i, c in enumerate(part.channels)}
        values = _checked_values(part, names, values)
        if all(n in index for n in names):
            self.replace_channels(subimage, names, values)
            return
        if any(n in index for n in names):
            raise ImageFileError(
                f"'{self.path}' already has some of the channels {', '.join(names)}"
            )
        oiio = _oiio()
        formats = [part.channel_format(i) for i in range(len(part.channels))]
        new_formats = [part.channel_format(index[c]) for c in like]
        spec = oiio.ImageSpec(part.spec)
        spec.nchannels = len(part.channels) + len(names)
        spec.channelnames = tuple(part.channels) + tuple(names)
        spec.channelformats = tuple(oiio.TypeDesc(str(f)) for f in formats + new_formats)
        part.spec = spec
        part.columns.extend(values[:, :, k] for k in range(len(names)))

    def keep_only(self, subimage: int, names: Sequence[str]) -> None:
        """Drop every part but ``subimage`` and every channel of it but ``names``."""
        oiio = _oiio()
        part = self._part(subimage)
        index = {c: i for i, c in enumerate(part.channels)}
        picked = [index[n] for n in names]
        spec = oiio.ImageSpec(part.spec)
        spec.nchannels = len(names)
        spec.channelnames = tuple(names)
        formats = [oiio.TypeDesc(str(part.channel_format(i))) for i in picked]
        if len({str(f) for f in formats}) == 1:
            # One pixel type left (a half beauty without its float Z): OpenImageIO writes
            # ``spec.format`` when the per-channel formats agree, so it must be that type.
            spec.set_format(formats[0])
        else:
            spec.channelformats = tuple(formats)
        alpha = [k for k, n in enumerate(names) if n.rsplit(".", 1)[-1] in ("A", "a", "alpha")]
        spec.alpha_channel = alpha[0] if alpha else -1
        spec.z_channel = -1
        spec.erase_attribute("oiio:subimages")
        self.parts = [ExrPart(spec, part.source, [part.columns[i] for i in picked])]


def _checked_values(part: ExrPart, names: Sequence[str], values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=part.dtype)
    if values.ndim == 2:
        values = values[:, :, None]
    expected = (part.spec.height, part.spec.width, len(names))
    if values.shape != expected:
        raise ImageFileError(
            f"pixels of shape {values.shape} for {len(names)} channels "
            f"{', '.join(names)}; expected {expected}"
        )
    return values


def is_exr(path: str | os.PathLike[str]) -> bool:
    """Whether a file name names an OpenEXR file (by its extension)."""
    return Path(path).suffix.lower() == ".exr"


def read_file(path: str | os.PathLike[str]) -> ExrFile:
    """Read every part's header of an OpenEXR file; the pixels of the channels left as
    they are stay in the file until `write_file` copies them (band by band), so the file
    must not change in between.

    Raises:
        ImageFileError: the file is missing, unreadable, not OpenEXR, or deep.
    """
    oiio = _oiio()
    path = Path(path)
    with readable_name(path) as name:
        inp = oiio.ImageInput.open(name)
    if inp is None:
        message = library_error(oiio.geterror, "unknown format or corrupt file")
        raise ImageFileError(f"cannot read '{path}': {message}")
    try:
        if inp.format_name() != EXR_FORMAT:
            raise ImageFileError(f"'{path}' is not an OpenEXR file ({inp.format_name()})")
        identity = _identity(path)
        parts: list[ExrPart] = []
        subimage = 0
        while inp.seek_subimage(subimage, 0):
            spec = oiio.ImageSpec(inp.spec())
            if spec.deep:
                raise ImageFileError(
                    f"cannot read part {subimage} of '{path}': it is a deep image (several "
                    f"samples per pixel); expected a flat image ({FLATTEN_ADVICE})"
                )
            formats = spec.channelformats or (spec.format,) * spec.nchannels
            exact = "double" if any(str(f) not in _FLOAT_TYPES for f in formats) else "float"
            mipmapped = inp.seek_subimage(subimage, 1)
            for name in _READ_ONLY_ATTRIBUTES + (_MIPMAP_ATTRIBUTES if mipmapped else ()):
                spec.erase_attribute(name)
            inp.seek_subimage(subimage, 0)
            source = _Source(path, subimage, exact, identity)
            parts.append(ExrPart(spec, source, list(range(spec.nchannels))))
            subimage += 1
        return ExrFile(path, parts)
    finally:
        inp.close()


def _identity(path: Path) -> tuple[int, int, int, int]:
    stat = path.stat()
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


@contextlib.contextmanager
def _open_source(source: _Source) -> Iterator[Any]:
    """The input file of ``source``, open and checked unchanged since `read_file`."""
    oiio = _oiio()
    try:
        unchanged = _identity(source.path) == source.identity
    except OSError:
        unchanged = False
    if not unchanged:
        raise ImageFileError(f"'{source.path}' changed or went away while it was being denoised")
    with readable_name(source.path) as name:
        inp = oiio.ImageInput.open(name)
    if inp is None:
        message = library_error(oiio.geterror, "unknown format or corrupt file")
        raise ImageFileError(f"cannot read '{source.path}': {message}")
    try:
        yield inp
    finally:
        inp.close()


def _band(part: ExrPart, inp: Any, top: int, stop: int) -> np.ndarray:
    """Rows ``top:stop`` (file coordinates) of ``part``, every channel: those left as they
    are decoded from the input file open in ``inp``, the others taken from their arrays."""
    spec = part.spec
    out = np.empty((stop - top, spec.width, len(part.columns)), part.dtype)
    kept = [c for c in part.columns if isinstance(c, int)]
    if kept:
        first, end = min(kept), max(kept) + 1
        source = part.source
        inp_spec = _seek(inp, source)
        band = read_rows(
            inp, source.path, source.subimage, inp_spec, top, stop, first, end, source.data_type
        )
    row = top - spec.y
    for k, column in enumerate(part.columns):
        if isinstance(column, int):
            out[:, :, k] = band[:, :, column - first]
        else:
            out[:, :, k] = column[row : row + stop - top]
    return out


def _seek(inp: Any, source: _Source) -> Any:
    if not inp.seek_subimage(source.subimage, 0):
        raise ImageFileError(f"cannot read '{source.path}': it has no part {source.subimage}")
    return inp.spec()


def _band_rows(spec: Any) -> int:
    """Rows a band of ``spec`` written at a time: about `BAND_VALUES` values, whole tiles."""
    rows = max(1, BAND_VALUES // max(1, spec.width * spec.nchannels))
    if spec.tile_height:
        rows = max(spec.tile_height, rows // spec.tile_height * spec.tile_height)
    return rows


def _write_part(out: Any, part: ExrPart, spec: Any, inp: Any, path: Path) -> None:
    """Every row of ``part`` into ``out`` (opened on this part), a band at a time."""
    rows = _band_rows(spec)
    z0, z1 = spec.z, spec.z + max(1, spec.depth)
    x0, x1 = spec.x, spec.x + spec.width
    for top in range(spec.y, spec.y + spec.height, rows):
        stop = min(spec.y + spec.height, top + rows)
        band = _band(part, inp, top, stop)
        if spec.tile_width:
            done = out.write_tiles(x0, x1, top, stop, z0, z1, band)
        else:
            done = out.write_scanlines(top, stop, spec.z, band)
        if not done:
            raise ImageFileError(f"cannot write '{path}': {output_error(_oiio(), out)}")


def write_file(path: str | os.PathLike[str], exr: ExrFile, *, software: str | None = None) -> Path:
    """Write every part of ``exr`` to ``path`` atomically (never a partial file), a band
    of rows at a time (the unchanged channels copied from the input file).

    Args:
        path: destination (``.exr``).
        exr: the parts and headers to write.
        software: value for the ``Software`` attribute of every part.

    Raises:
        ImageFileError: the file cannot be written, or the input file changed since
            `read_file`.
        OutputFileError: its folder cannot be written.
    """
    oiio = _oiio()
    path = Path(path)
    specs = []
    for part in exr.parts:
        spec = oiio.ImageSpec(part.spec)
        if software:
            spec.attribute("Software", software)
        specs.append(spec)

    def encode(name: str) -> None:
        with created_output(oiio, "openexr", path) as out:
            if len(specs) > 1 and not out.supports("multiimage"):
                raise ImageFileError(f"cannot write '{path}': no multi-part support")
            opened = out.open(name, tuple(specs)) if len(specs) > 1 else out.open(name, specs[0])
            if not opened:
                raise ImageFileError(f"cannot write '{path}': {output_error(oiio, out)}")
            with _open_source(exr.parts[0].source) as inp:
                for index, (part, spec) in enumerate(zip(exr.parts, specs, strict=True)):
                    if index and not out.open(name, spec, "AppendSubimage"):
                        raise ImageFileError(f"cannot write '{path}': {output_error(oiio, out)}")
                    _write_part(out, part, spec, inp, path)

    shapes = [PartShape(spec.width, spec.height, spec.nchannels) for spec in specs]
    write_encoded(path, "openexr", encode, shapes, value_bytes=4)
    return path
