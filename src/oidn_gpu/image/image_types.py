"""The values of image files that reading and writing share: `Image`, `Layer`,
`Attribute`, `ImageFileError`, the two encodings, and OpenImageIO (imported lazily,
extra ``images``). `oidn_gpu.image.io` re-exports them all."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.errors import OIDNGPUError, require
from oidn_gpu.image.windows import Placement

_FLOAT_TYPES = frozenset({"half", "float", "double"})

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
        return tuple(component(c) for c in self.channels)


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


def oiio() -> Any:
    """The OpenImageIO module (`MissingDependencyError` naming the extra when absent)."""
    return require("OpenImageIO", "images")


def component(channel: str) -> str:
    """A channel name without its layer prefix (``'R'`` of ``'ViewLayer.Combined.R'``)."""
    return channel.rsplit(".", 1)[-1]


def library_name(path: str | os.PathLike[str]) -> str | None:
    """``path`` as OpenImageIO's Python binding takes it (UTF-8 text), or None for a name
    whose bytes are not UTF-8 (Python holds them as surrogate escapes, which the binding
    refuses)."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return text


@contextlib.contextmanager
def readable_name(path: str | os.PathLike[str]) -> Iterator[str]:
    """A name under which OpenImageIO can open the existing file ``path``: the name
    itself, or for a name that is not UTF-8 the file opened here and named by its
    descriptor (``/proc/self/fd/N``), valid inside the block.

    Raises:
        ImageFileError: the name is not UTF-8 and this system cannot name open files.
    """
    name = library_name(path)
    if name is not None:
        yield name
        return
    if not os.path.isdir("/proc/self/fd"):
        raise ImageFileError(
            f"cannot read {shown(os.fspath(path))!r}: its name is not UTF-8; rename it"
        )
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as err:
        reason = (err.strerror or str(err)).lower()
        raise ImageFileError(f"cannot read '{shown(os.fspath(path))}': {reason}") from None
    try:
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def shown(text: str) -> str:
    """``text`` with the bytes of a name that is not UTF-8 (surrogate escapes, as Python
    and OpenImageIO's binding hold them) written as ``\\xNN``, for messages and listings."""
    return os.fsencode(text).decode("utf-8", "backslashreplace") if _has_escapes(text) else text


def _has_escapes(text: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in text)


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


def attributes_of(spec: Any) -> tuple[Attribute, ...]:
    """An OpenImageIO spec's metadata as `Attribute` values."""
    return tuple(Attribute(a.name, str(a.type), a.value) for a in spec.extra_attribs)
