"""`exr.write_file` writes a band of rows at a time, copying the channels left as they are
from the input file: every band boundary (scanlines and tiles, a data window that does not
start at 0, half, float and uint channels) gives the input's bits back, and an input file
changed between `exr.read_file` and `exr.write_file` is an error, not a mixed file."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from oidn_gpu.image import exr, io

oiio = pytest.importorskip("OpenImageIO")

NAMES = ("R", "G", "B", "A", "id")
FORMATS = ("half", "half", "half", "float", "uint")


def _write(path: Path, pixels: np.ndarray, tiles: int) -> None:
    spec = oiio.ImageSpec(pixels.shape[1], pixels.shape[0], len(NAMES), "float")
    spec.channelnames = NAMES
    spec.channelformats = tuple(oiio.TypeDesc(f) for f in FORMATS)
    spec.x, spec.y = 3, 5  # data window inside a larger display window
    spec.full_width, spec.full_height = pixels.shape[1] + 8, pixels.shape[0] + 9
    if tiles:
        spec.tile_width = spec.tile_height = tiles
    out = oiio.ImageOutput.create(str(path))
    assert out.open(str(path), spec), oiio.geterror()
    assert out.write_image(pixels)
    assert out.close()


def _frame(tmp_path: Path, tiles: int) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(11)
    pixels = rng.random((37, 29, len(NAMES))) * 4
    pixels[:, :, :3] = pixels[:, :, :3].astype(np.float16)
    pixels[:, :, 3] = pixels[:, :, 3].astype(np.float32)
    pixels[:, :, 4] = rng.random((37, 29))  # uint codes: value * (2^32 - 1)
    path = tmp_path / "in.exr"
    _write(path, pixels, tiles)
    return path, pixels


@pytest.mark.parametrize("tiles", [0, 8], ids=["scanlines", "tiles"])
@pytest.mark.parametrize("band_values", [29 * 5 * 3, 1 << 22], ids=["bands", "one-band"])
def test_banded_writes_keep_every_channel_and_the_new_values(
    tmp_path: Path, monkeypatch, tiles: int, band_values: int
) -> None:
    monkeypatch.setattr(exr, "BAND_VALUES", band_values)
    source, _ = _frame(tmp_path, tiles)
    contents = exr.read_file(source)
    original = contents.parts[0].pixels  # the whole part, read now
    assert len(np.unique(original[:, :, 4])) > 1000
    new = np.linspace(0, 1, 37 * 29 * 3, dtype=np.float32).reshape(37, 29, 3)
    contents.replace_channels(0, ["R", "G", "B"], new)
    contents.add_channels(0, ["denoised.R"], new[:, :, :1], ["R"])
    out = exr.write_file(tmp_path / "out.exr", contents)
    written = exr.read_file(out).parts[0]
    assert written.channels == (*NAMES, "denoised.R")
    assert (written.spec.x, written.spec.y, written.spec.tile_width) == (3, 5, tiles)
    got = written.pixels
    assert got.dtype == np.float64  # a uint channel: read exactly
    np.testing.assert_array_equal(got[:, :, 3:5], original[:, :, 3:5])
    np.testing.assert_array_equal(got[:, :, :3], new.astype(np.float16))
    np.testing.assert_array_equal(got[:, :, 5], new[:, :, 0].astype(np.float16))


def test_an_input_changed_before_the_write_is_an_error(tmp_path: Path) -> None:
    source, pixels = _frame(tmp_path, 0)
    contents = exr.read_file(source)
    _write(source, pixels[::-1].copy(), 0)
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with pytest.raises(io.ImageFileError, match="changed or went away while it was"):
        exr.write_file(tmp_path / "out.exr", contents)
    assert not (tmp_path / "out.exr").exists()
