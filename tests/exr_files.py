"""Small OpenEXR files made by OpenImageIO for the tests: any header, several parts, deep.

The command-line tests and the fuzz suite build their unusual inputs here (data windows,
per-channel pixel types, multi-part and deep files), each a few kilobytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def oiio() -> Any:
    """The OpenImageIO module."""
    import OpenImageIO

    return OpenImageIO


def spec(
    width: int,
    height: int,
    names: Sequence[str],
    pixel_format: str = "half",
    compression: str = "zip",
) -> Any:
    """An ImageSpec with these channel names, pixel type and compression."""
    result = oiio().ImageSpec(width, height, len(names), pixel_format)
    result.channelnames = tuple(names)
    result.attribute("compression", compression)
    return result


def write_parts(path: Path, parts: Sequence[tuple[Any, np.ndarray]]) -> Path:
    """Write each (spec, H x W x C pixels) as one part of ``path``."""
    lib = oiio()
    out = lib.ImageOutput.create(str(path))
    specs = tuple(s for s, _ in parts)
    opened = out.open(str(path), specs) if len(specs) > 1 else out.open(str(path), specs[0])
    assert opened, lib.geterror()
    for index, (part_spec, pixels) in enumerate(parts):
        if index:
            assert out.open(str(path), part_spec, "AppendSubimage"), out.geterror()
        assert out.write_image(np.ascontiguousarray(pixels, dtype=np.float32)), out.geterror()
    assert out.close()
    return path


def write_deep(path: Path, size: int = 16) -> Path:
    """A deep RGBA EXR, ``size`` x ``size``, two samples per pixel."""
    deep = spec(size, size, ("R", "G", "B", "A"), "float", "zips")
    deep.deep = True
    buf = oiio().ImageBuf(deep)
    for y in range(size):
        for x in range(size):
            buf.set_deep_samples(x, y, 0, 2)
            for sample in range(2):
                for c in range(4):
                    buf.set_deep_value(x, y, 0, c, sample, 0.1 * (c + sample + 1))
    assert buf.write(str(path)), buf.geterror()
    return path
