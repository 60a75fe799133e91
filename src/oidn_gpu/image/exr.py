"""Whole-file EXR round trips: every part, channel and header field kept.

`read_file` reads every part of a (multi-part, multi-layer) OpenEXR file with its
OpenImageIO ``ImageSpec``: channel names and per-channel pixel types (half stays
half, float stays float, uint stays uint), data window and display window, tiling,
compression and every other attribute. Pixels are held as float32, which holds half
and float values exactly (float64 in a part with 32-bit unsigned channels, such as
object IDs), so channels that are not replaced are written back bit for bit.

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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.errors import require
from oidn_gpu.image.encoded import PartShape, write_encoded
from oidn_gpu.image.image_types import readable_name
from oidn_gpu.image.io import FLATTEN_ADVICE, ImageFileError, library_error

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


@dataclass
class ExrPart:
    """One part (subimage) of a file: its header and its pixels.

    Attributes:
        spec: the part's OpenImageIO ImageSpec (a private copy).
        pixels: H x W x C over the data window, channels in ``spec.channelnames`` order;
            float32, or float64 where a channel is a 32-bit unsigned integer.
    """

    spec: Any
    pixels: np.ndarray

    @property
    def channels(self) -> tuple[str, ...]:
        return tuple(self.spec.channelnames)

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
            part.pixels[:, :, index[name]] = values[:, :, k]

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
        part.pixels = np.concatenate([part.pixels, values.astype(part.pixels.dtype)], axis=2)

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
        self.parts = [ExrPart(spec, np.ascontiguousarray(part.pixels[:, :, picked]))]


def _checked_values(part: ExrPart, names: Sequence[str], values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=part.pixels.dtype)
    if values.ndim == 2:
        values = values[:, :, None]
    expected = (part.pixels.shape[0], part.pixels.shape[1], len(names))
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
    """Read every part of an OpenEXR file with its header.

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
            pixels = inp.read_image(subimage, 0, 0, spec.nchannels, exact)
            if pixels is None or inp.has_error:
                message = library_error(inp.geterror, "read failed")
                raise ImageFileError(f"cannot read '{path}': {message}")
            pixels = np.asarray(pixels)
            if pixels.ndim == 2:
                pixels = pixels[:, :, None]
            mipmapped = inp.seek_subimage(subimage, 1)
            for name in _READ_ONLY_ATTRIBUTES + (_MIPMAP_ATTRIBUTES if mipmapped else ()):
                spec.erase_attribute(name)
            inp.seek_subimage(subimage, 0)
            parts.append(ExrPart(spec, np.array(pixels)))
            subimage += 1
        return ExrFile(path, parts)
    finally:
        inp.close()


def write_file(path: str | os.PathLike[str], exr: ExrFile, *, software: str | None = None) -> Path:
    """Write every part of ``exr`` to ``path`` atomically (never a partial file).

    Args:
        path: destination (``.exr``).
        exr: the parts and headers to write.
        software: value for the ``Software`` attribute of every part.

    Raises:
        ImageFileError: the file cannot be written.
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
        out = oiio.ImageOutput.create("openexr")
        try:
            if out is None:
                message = library_error(oiio.geterror, "unknown error")
                raise ImageFileError(f"cannot write '{path}': {message}")
            if len(specs) > 1 and not out.supports("multiimage"):
                raise ImageFileError(f"cannot write '{path}': no multi-part support")
            opened = out.open(name, tuple(specs)) if len(specs) > 1 else out.open(name, specs[0])
            if not opened:
                raise ImageFileError(f"cannot write '{path}': {_error(oiio, out)}")
            for index, (part, spec) in enumerate(zip(exr.parts, specs, strict=True)):
                if index and not out.open(name, spec, "AppendSubimage"):
                    raise ImageFileError(f"cannot write '{path}': {_error(oiio, out)}")
                if not out.write_image(np.ascontiguousarray(part.pixels)):
                    raise ImageFileError(f"cannot write '{path}': {_error(oiio, out)}")
            closing, out = out, None
            if not closing.close():
                raise ImageFileError(f"cannot write '{path}': {_error(oiio, closing)}")
        finally:
            if out is not None:
                with contextlib.suppress(Exception):
                    out.close()

    shapes = [PartShape(spec.width, spec.height, spec.nchannels) for spec in specs]
    write_encoded(path, "openexr", encode, shapes, value_bytes=4)
    return path


def _error(oiio: Any, out: Any) -> str:
    message = library_error(out.geterror, "") if out is not None else ""
    return message or library_error(oiio.geterror, "unknown error")
