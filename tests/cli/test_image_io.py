"""oidn_gpu.image.io and image.preview: formats, layers, encodings, atomic writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cli_support import leftovers, write_multilayer

from oidn_gpu.image import io
from oidn_gpu.image.preview import exposure_for, side_by_side, write_side_by_side


@pytest.fixture
def pixels(rng: np.random.Generator) -> np.ndarray:
    return (rng.random((20, 30, 3), dtype=np.float32) * 4).astype(np.float32)


@pytest.mark.parametrize("ext", [".exr", ".pfm", ".tif"])
def test_float_formats_round_trip_exactly(tmp_path: Path, pixels: np.ndarray, ext: str) -> None:
    path = io.write_image_atomic(tmp_path / f"x{ext}", pixels, pixel_format="float")
    image = io.read_image(path)
    assert image.is_float and image.encoding == "linear"
    np.testing.assert_array_equal(image.pixels, pixels)
    assert leftovers(tmp_path) == []


def test_half_exr_keeps_half_and_rounds_to_nearest(tmp_path: Path, pixels: np.ndarray) -> None:
    path = io.write_image_atomic(tmp_path / "h.exr", pixels, pixel_format="half")
    image = io.read_image(path)
    assert image.pixel_format == "half"
    np.testing.assert_array_equal(image.pixels, pixels.astype(np.float16).astype(np.float32))
    # A half input written "like" itself stays half
    again = io.write_image_atomic(tmp_path / "h2.exr", image.pixels, like=image)
    assert io.read_image(again).pixel_format == "half"


def test_png_holds_srgb_values_as_is(tmp_path: Path) -> None:
    values = np.linspace(0, 1, 256, dtype=np.float32).reshape(16, 16, 1).repeat(3, axis=2)
    path = io.write_image_atomic(tmp_path / "x.png", values, encoding="srgb")
    image = io.read_image(path)
    assert image.pixel_format == "uint8" and not image.is_float and image.encoding == "srgb"
    np.testing.assert_allclose(image.pixels, values, atol=0.5 / 255)


def test_linear_data_is_srgb_encoded_into_png_and_decoded_back(tmp_path: Path) -> None:
    linear = np.full((4, 4, 3), 0.2140, dtype=np.float32)  # sRGB(0.214) ~= 0.5
    png = io.read_image(io.write_image_atomic(tmp_path / "x.png", linear, encoding="linear"))
    assert png.pixels[0, 0, 0] == pytest.approx(128 / 255, abs=1 / 255)
    exr = io.read_image(io.write_image_atomic(tmp_path / "y.exr", png.pixels, encoding="srgb"))
    np.testing.assert_allclose(exr.pixels, linear, atol=3e-3)


def test_srgb_transfer_round_trips() -> None:
    x = np.linspace(0, 1, 1001, dtype=np.float32)
    np.testing.assert_allclose(io.srgb_decode(io.srgb_encode(x)), x, atol=2e-6)


def test_alpha_is_kept_unassociated_in_png(tmp_path: Path) -> None:
    rgba = np.zeros((8, 8, 4), dtype=np.float32)
    rgba[..., :3] = 200 / 255
    rgba[..., 3] = 64 / 255
    image = io.read_image(io.write_image_atomic(tmp_path / "a.png", rgba, encoding="srgb"))
    assert image.channels == ("R", "G", "B", "A")
    np.testing.assert_allclose(image.pixels, rgba, atol=0.5 / 255)


def test_metadata_of_the_input_is_kept(tmp_path: Path, pixels: np.ndarray) -> None:
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    spec = oiio.ImageSpec(30, 20, 3, "float")
    spec.attribute("Artist", "mitsuba user")
    spec.attribute("compression", "piz")
    out = oiio.ImageOutput.create(str(tmp_path / "in.exr"))
    out.open(str(tmp_path / "in.exr"), spec)
    out.write_image(pixels)
    out.close()
    source = io.read_image(tmp_path / "in.exr")
    result = io.read_image(
        io.write_image_atomic(tmp_path / "out.exr", pixels, like=source, software="oidn-gpu")
    )
    attrs = {a.name: a.value for a in result.attributes}
    assert attrs["Artist"] == "mitsuba user"
    assert attrs["compression"] == "piz"
    assert attrs["Software"] == "oidn-gpu"
    png = io.read_image(io.write_image_atomic(tmp_path / "out.png", pixels, like=source))
    assert {a.name: a.value for a in png.attributes}.get("Artist") == "mitsuba user"


def test_layers_of_a_multilayer_exr_are_grouped_and_found(tmp_path: Path) -> None:
    h = w = 6
    layers = {
        "ViewLayer.Combined": np.full((h, w, 4), 1.0, np.float32),
        "ViewLayer.Noisy Image": np.full((h, w, 4), 2.0, np.float32),
        "ViewLayer.Denoising Albedo": np.full((h, w, 3), 0.5, np.float32),
        "ViewLayer.Denoising Normal": np.full((h, w, 3), -0.25, np.float32),
    }
    path = write_multilayer(tmp_path / "blender.exr", layers)
    found = io.list_layers(path)
    assert {lay.name for lay in found} == set(layers)
    color = io.find_layer(found, io.COLOR_LAYER_NAMES)
    assert color is not None and color.name == "ViewLayer.Noisy Image"  # undenoised beauty
    albedo = io.find_layer(found, io.ALBEDO_LAYER_NAMES)
    normal = io.find_layer(found, io.NORMAL_LAYER_NAMES)
    assert albedo is not None and albedo.name == "ViewLayer.Denoising Albedo"
    assert normal is not None and normal.name == "ViewLayer.Denoising Normal"
    beauty = io.read_layer(path, color, with_alpha=True)
    assert beauty.pixels.shape == (h, w, 4) and beauty.channels[-1].endswith(".A")
    nrm = io.read_layer(path, "denoising normal")  # case-insensitive, last component
    assert nrm.channels == tuple(f"ViewLayer.Denoising Normal.{c}" for c in "XYZ")
    np.testing.assert_array_equal(nrm.pixels, -0.25)


def test_mitsuba_and_arnold_aov_names_are_found(tmp_path: Path) -> None:
    ones = np.ones((4, 4, 3), np.float32)
    mitsuba = write_multilayer(tmp_path / "m.exr", {"": ones, "albedo": ones, "nn": ones})
    arnold = write_multilayer(tmp_path / "a.exr", {"": ones, "diffuse_albedo": ones, "N": ones})
    for path, albedo, normal in ((mitsuba, "albedo", "nn"), (arnold, "diffuse_albedo", "N")):
        found = io.list_layers(path)
        assert io.find_layer(found, io.COLOR_LAYER_NAMES).name == ""
        assert io.find_layer(found, io.ALBEDO_LAYER_NAMES).name == albedo
        assert io.find_layer(found, io.NORMAL_LAYER_NAMES).name == normal


def test_explicit_channel_list_and_missing_layer_message(tmp_path: Path) -> None:
    data = np.arange(4 * 4 * 3, dtype=np.float32).reshape(4, 4, 3)
    path = write_multilayer(tmp_path / "m.exr", {"": data, "albedo": data + 100})
    image = io.read_layer(path, "albedo.B,albedo.G,albedo.R")
    np.testing.assert_array_equal(image.pixels, (data + 100)[:, :, ::-1])
    with pytest.raises(io.ImageFileError, match=r"has no layer 'diffuse'; its layers are"):
        io.read_layer(path, "diffuse")


def test_corrupt_and_missing_files_raise_image_file_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.exr"
    bad.write_bytes(b"\x76\x2f\x31\x01" + b"\0" * 40)  # EXR magic, then garbage
    with pytest.raises(io.ImageFileError, match="cannot read"):
        io.read_image(bad)
    with pytest.raises(io.ImageFileError, match="no such file"):
        io.read_image(tmp_path / "missing.exr")


def test_truncated_exr_is_an_error_not_garbage(tmp_path: Path, pixels: np.ndarray) -> None:
    good = io.write_image_atomic(tmp_path / "good.exr", pixels)
    data = good.read_bytes()
    cut = tmp_path / "cut.exr"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(io.ImageFileError):
        io.read_image(cut)


def test_interrupted_write_leaves_no_file(
    tmp_path: Path, pixels: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    target = tmp_path / "out.exr"
    target.write_bytes(b"previous content")

    def interrupted(self: object, *args: object) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(oiio.ImageOutput, "write_image", interrupted)
    with pytest.raises(KeyboardInterrupt):
        io.write_image_atomic(target, pixels)
    assert target.read_bytes() == b"previous content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.exr"]


def test_unknown_extension_is_invalid_argument(tmp_path: Path, pixels: np.ndarray) -> None:
    with pytest.raises(io.InvalidArgumentError, match=r"cannot write '\.xyz' files"):
        io.write_image_atomic(tmp_path / "out.xyz", pixels)
    assert list(tmp_path.iterdir()) == []


def test_side_by_side_is_twice_as_wide_and_uses_one_exposure(tmp_path: Path) -> None:
    noisy = np.full((10, 12, 3), 0.09, np.float32)
    assert exposure_for(noisy) == 2.0  # 0.18 / 0.09 = 2
    image = side_by_side(noisy, noisy * 0, encoding="linear")
    assert image.shape == (10, 2 * 12 + 4, 3)
    expected = (0.18 / 1.18) ** (1 / 2.2)
    assert image[0, 0, 0] == pytest.approx(expected, rel=1e-5)
    assert image[0, -1, 0] == 0.0
    path = write_side_by_side(tmp_path / "cmp.png", noisy, noisy, encoding="linear")
    assert io.read_image(path).pixels.shape == (10, 28, 3)


def test_parts_of_a_multipart_exr_are_layers(tmp_path: Path) -> None:
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    specs = []
    for name, names in (("beauty", "RGB"), ("normal", "XYZ"), ("albedo", "RGB")):
        spec = oiio.ImageSpec(4, 4, 3, "half")
        spec.channelnames = tuple(names)
        spec.attribute("name", name)
        specs.append(spec)
    path = str(tmp_path / "parts.exr")
    out = oiio.ImageOutput.create(path)
    assert out.open(path, specs)
    for index, (spec, value) in enumerate(zip(specs, (1.0, -1.0, 0.5), strict=True)):
        if index:
            assert out.open(path, spec, "AppendSubimage")
        out.write_image(np.full((4, 4, 3), value, np.float32))
    out.close()
    found = io.list_layers(path)
    assert [(lay.name, lay.subimage) for lay in found] == [
        ("beauty", 0),
        ("normal", 1),
        ("albedo", 2),
    ]
    assert io.find_layer(found, io.COLOR_LAYER_NAMES).name == "beauty"
    np.testing.assert_array_equal(io.read_layer(path, "normal").pixels, -1.0)
    np.testing.assert_array_equal(io.read_layer(path, "albedo").pixels, 0.5)
