"""`io.one_decode_per_file`: the layers of one multi-layer EXR decode the file once (the
sequence loop reads a frame's beauty, albedo and normal inside it), with the same pixels
as reads outside it."""

from __future__ import annotations

import os

import numpy as np
import pytest

from oidn_gpu.image import io

oiio = pytest.importorskip("OpenImageIO")

NAMES = ["R", "G", "B", "albedo.R", "albedo.G", "albedo.B", "N.X", "N.Y", "N.Z"]


def _write(path, pixels):
    spec = oiio.ImageSpec(pixels.shape[1], pixels.shape[0], pixels.shape[2], "half")
    spec.channelnames = tuple(NAMES)
    spec.attribute("compression", "zip")
    out = oiio.ImageOutput.create(str(path))
    assert out.open(str(path), spec)
    assert out.write_image(np.ascontiguousarray(pixels))
    out.close()


@pytest.fixture
def frame(tmp_path):
    pixels = np.random.default_rng(5).random((12, 20, 9)).astype(np.float16)
    path = tmp_path / "frame.exr"
    _write(path, pixels.astype(np.float32))
    return path, pixels.astype(np.float32)


@pytest.fixture
def decodes(monkeypatch):
    """The decodes of a file: a whole part (kept in the block) or the channels of one read."""
    count = []
    for name in ("_read_image", "_read_picked"):
        real = getattr(io, name)

        def counting(*args, _real=real, _name=name, **kwargs):
            count.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(io, name, counting)
    return count


def _three(path):
    return [io.read_layer(path, name).pixels for name in ("R,G,B", "albedo", "N")]


def test_three_layers_decode_the_file_once_with_the_same_pixels(frame, decodes):
    path, pixels = frame
    apart = _three(path)
    assert decodes == ["_read_picked"] * 3  # outside the block: each layer's channels alone
    with io.one_decode_per_file():
        together = _three(path)
    assert decodes[3:] == ["_read_image"]
    for i, (a, b) in enumerate(zip(apart, together, strict=True)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(b, pixels[:, :, 3 * i : 3 * i + 3])


def test_each_image_is_its_own_copy_and_nothing_is_kept_after(frame, decodes):
    path, pixels = frame
    with io.one_decode_per_file():
        first = io.read_layer(path, "albedo").pixels
        first[...] = -1
        again = io.read_layer(path, "albedo").pixels
    np.testing.assert_array_equal(again, pixels[:, :, 3:6])
    io.read_layer(path, "albedo")
    assert len(decodes) == 2  # one in the block, one after it


def test_a_file_rewritten_inside_the_block_is_read_again(frame, decodes):
    path, pixels = frame
    with io.one_decode_per_file():
        io.read_layer(path, "N")
        changed = pixels[::-1].copy()
        _write(path, changed)
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        np.testing.assert_array_equal(io.read_layer(path, "N").pixels, changed[:, :, 6:9])
    assert len(decodes) == 2


def test_a_part_larger_than_the_kept_size_is_read_layer_by_layer_in_bands(
    frame, decodes, monkeypatch
):
    """A part over `io.KEEP_PART_BYTES` (a 4096x4096 frame with its AOVs) is not kept: each
    layer is decoded alone, a band of rows at a time, into the image returned."""
    path, pixels = frame
    monkeypatch.setattr(io, "KEEP_PART_BYTES", 12 * 20 * 9 * 4 - 1)
    monkeypatch.setattr(io, "BAND_VALUES", 20 * 3 * 5)  # 5 rows of a layer at a time
    with io.one_decode_per_file():
        together = _three(path)
    assert decodes == ["_read_picked"] * 3
    for i, image in enumerate(together):
        np.testing.assert_array_equal(image, pixels[:, :, 3 * i : 3 * i + 3])
    picked = io.read_layer(path, "B,albedo.R,R").pixels  # channels apart, in this order
    np.testing.assert_array_equal(picked, pixels[:, :, [2, 3, 0]])
