"""Colour management of ``oidn-gpu denoise``: ``--input-colorspace``, ``--display`` and
``--view`` through OpenColorIO as OpenImageIO exposes it, checked against OpenImageIO's own
``ImageBufAlgo.ociodisplay`` of the denoised OpenEXR."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cli_support import write_exr

from oidn_gpu.image import color, io, preview

OpenImageIO = pytest.importorskip("OpenImageIO")

DISPLAY = "sRGB - Display"
VIEW = "ACES 2.0 - SDR 100 nits (Rec.709)"
ONE_8BIT_STEP = 1.0 / 255.0


@pytest.fixture(autouse=True)
def _builtin_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-in ACES config, whatever the machine's $OCIO."""
    monkeypatch.delenv("OCIO", raising=False)


def _ociodisplay(path: Path, space: str) -> np.ndarray:
    """OpenImageIO's own display transform of a file: the reference."""
    shown = OpenImageIO.ImageBufAlgo.ociodisplay(
        OpenImageIO.ImageBuf(str(path)), DISPLAY, VIEW, space
    )
    assert not shown.has_error, shown.geterror()
    return np.asarray(shown.get_pixels(OpenImageIO.FLOAT))[:, :, :3]


def _colorspace(path: Path) -> str | None:
    inp = OpenImageIO.ImageInput.open(str(path))
    try:
        value = inp.spec().getattribute("oiio:ColorSpace")
    finally:
        inp.close()
    return None if value is None else color.resolve_space(str(value))


def test_acescg_exr_to_png_through_the_aces_view_equals_ociodisplay(
    cli, scene, tmp_path: Path
) -> None:
    crop = scene(48)
    src = write_exr(tmp_path / "acescg.exr", crop["color_4spp"])
    flags = ("--input-colorspace", "ACEScg", "--display", DISPLAY, "--view", VIEW)
    exr_out, png_out = tmp_path / "denoised.exr", tmp_path / "denoised.png"
    assert cli("denoise", src, "-o", exr_out, "--input-colorspace", "ACEScg").rc == 0
    result = cli("denoise", src, "-o", png_out, *flags)
    assert result.rc == 0, result.err

    png = io.read_image(png_out)
    assert png.pixel_format == "uint8"
    expected = _ociodisplay(exr_out, "ACEScg")
    assert np.abs(png.pixels - expected).max() <= ONE_8BIT_STEP + 1e-6
    # the view is not the plain sRGB curve of today's default
    plain = io.srgb_encode(io.read_image(exr_out).pixels)
    assert np.abs(png.pixels - plain).max() > 4 * ONE_8BIT_STEP
    # the EXR output is labelled with the input's colour space
    assert _colorspace(exr_out) == "ACEScg"


def test_the_files_colour_space_is_the_default(cli, scene, tmp_path: Path) -> None:
    crop = scene(48)
    src = io.write_image_atomic(tmp_path / "tagged.exr", crop["color_4spp"], colorspace="ACEScg")
    assert _colorspace(src) == "ACEScg"
    out = tmp_path / "shown.png"
    result = cli("denoise", src, "-o", out, "--display", DISPLAY, "--view", VIEW)
    assert result.rc == 0, result.err
    exr_out = tmp_path / "kept.exr"
    assert cli("denoise", src, "-o", exr_out).rc == 0
    assert _colorspace(exr_out) == "ACEScg"  # the input's metadata kept
    expected = _ociodisplay(exr_out, "ACEScg")
    assert np.abs(io.read_image(out).pixels - expected).max() <= ONE_8BIT_STEP + 1e-6


def test_without_colour_flags_8bit_outputs_keep_the_srgb_curve(cli, scene, tmp_path: Path) -> None:
    crop = scene(48)
    src = write_exr(tmp_path / "c.exr", crop["color_4spp"])
    exr_out, png_out = tmp_path / "o.exr", tmp_path / "o.png"
    assert cli("denoise", src, "-o", exr_out).rc == 0
    assert cli("denoise", src, "-o", png_out).rc == 0
    assert _colorspace(exr_out) is None
    expected = io.srgb_encode(io.read_image(exr_out).pixels)
    assert np.abs(io.read_image(png_out).pixels - expected).max() <= ONE_8BIT_STEP + 1e-6


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (("--input-colorspace", "ACEScgg"), ["unknown colour space 'ACEScgg'", "'ACEScg'"]),
        (("--display", "sRGB"), ["unknown display 'sRGB'", "'sRGB - Display'"]),
        (
            ("--display", DISPLAY, "--view", "ACES"),
            ["unknown view 'ACES'", f"'{VIEW}'", "'Un-tone-mapped'"],
        ),
    ],
)
def test_unknown_names_are_usage_errors_listing_the_valid_ones(
    cli, scene, tmp_path: Path, flags: tuple[str, ...], words: list[str]
) -> None:
    src = write_exr(tmp_path / "c.exr", scene(16)["color_4spp"])
    result = cli("denoise", src, "-o", tmp_path / "new" / "o.png", "--mkdir", *flags)
    assert result.rc == 2
    for word in words:
        assert word in result.err
    assert not (tmp_path / "new").exists()  # refused before any file work


def test_a_config_that_cannot_load_is_named(
    cli, scene, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OCIO", str(tmp_path / "missing.ocio"))
    src = write_exr(tmp_path / "c.exr", scene(16)["color_4spp"])
    result = cli("denoise", src, "-o", tmp_path / "o.png", "--display", DISPLAY)
    assert result.rc == 2
    assert "missing.ocio" in result.err and "$OCIO" in result.err


def test_side_by_side_through_the_view_is_labelled(cli, scene, tmp_path: Path) -> None:
    crop = scene(48)
    src = write_exr(tmp_path / "c.exr", crop["color_4spp"])
    out, side = tmp_path / "o.exr", tmp_path / "cmp.png"
    flags = ("--input-colorspace", "ACEScg", "--display", DISPLAY, "--view", VIEW)
    result = cli("denoise", src, "-o", out, "--side-by-side", side, *flags)
    assert result.rc == 0, result.err
    shown = io.read_image(side).pixels
    assert shown.shape == (48, 2 * 48 + preview.GUTTER_PX, 3)
    # too small for labels: the halves are exactly the view of the noisy and denoised images
    np.testing.assert_allclose(
        shown[:, :48], _ociodisplay(src, "ACEScg"), atol=ONE_8BIT_STEP + 1e-6
    )
    np.testing.assert_allclose(
        shown[:, -48:], _ociodisplay(out, "ACEScg"), atol=ONE_8BIT_STEP + 1e-6
    )


def test_a_large_preview_is_labelled_with_the_halves_and_the_view(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    noisy = rng.uniform(0.05, 0.2, (96, 128, 3)).astype(np.float32)
    options = color.check_options(color.ColorOptions("ACEScg", DISPLAY, VIEW))
    plain = preview.side_by_side(noisy, noisy, encoding="linear", color=options, space="ACEScg")
    path = preview.write_side_by_side(
        tmp_path / "p.png", noisy, noisy, encoding="linear", color=options, space="ACEScg"
    )
    written = io.read_image(path).pixels
    changed = np.abs(written - plain).max(axis=2) > 2 * ONE_8BIT_STEP
    top, bottom = changed[:24], changed[-24:]
    assert top[:, :128].any() and top[:, -128:].any()  # "noisy", "denoised"
    assert bottom.any()  # the display and view
    assert not changed[36:60].any()  # the pictures themselves are untouched
    assert preview.shown_as(noisy, encoding="linear", color=options) == f"{DISPLAY} / {VIEW}"


@pytest.mark.parametrize("suffix", [".exr", ".png"])
def test_the_untonemapped_srgb_view_of_the_default_spaces_is_the_srgb_curve(
    cli, scene, tmp_path: Path, suffix: str
) -> None:
    """Without metadata a float file is linear Rec.709 and an 8-bit one sRGB: shown on the
    sRGB display without a tone map, each gives today's output within one 8-bit step."""
    src = io.write_image_atomic(tmp_path / f"c{suffix}", scene(32)["color_4spp"])
    plain, shown = tmp_path / "plain.png", tmp_path / "shown.png"
    assert cli("denoise", src, "-o", plain).rc == 0
    result = cli("denoise", src, "-o", shown, "--display", DISPLAY, "--view", "Un-tone-mapped")
    assert result.rc == 0, result.err
    difference = np.abs(io.read_image(shown).pixels - io.read_image(plain).pixels)
    assert difference.max() <= ONE_8BIT_STEP + 1e-6


def test_only_float_outputs_are_labelled_with_the_colour_space(cli, scene, tmp_path: Path) -> None:
    src = io.write_image_atomic(tmp_path / "c.pfm", scene(16)["color_4spp"])
    for name in ("o.exr", "o.png"):
        result = cli("denoise", src, "-o", tmp_path / name, "--input-colorspace", "ACEScg")
        assert result.rc == 0, result.err
    assert _colorspace(tmp_path / "o.exr") == "ACEScg"  # an EXR written from a PFM
    assert _colorspace(tmp_path / "o.png") != "ACEScg"  # sRGB-encoded values


def test_a_display_with_nothing_to_show_is_noted(cli, scene, tmp_path: Path) -> None:
    src = write_exr(tmp_path / "c.exr", scene(16)["color_4spp"])
    result = cli("denoise", src, "-o", tmp_path / "o.exr", "--display", DISPLAY)
    assert result.rc == 0, result.err
    assert f"note: --display '{DISPLAY}' / --view '{VIEW}' apply to 8-bit outputs" in result.err
    result = cli("denoise", src, "-o", tmp_path / "o.png", "--display", DISPLAY)
    assert result.rc == 0 and "note: --display" not in result.err


def test_a_transform_opencolorio_refuses_is_an_error_naming_it() -> None:
    with pytest.raises(color.InvalidArgumentError, match="does not have view 'nope'"):
        color.to_display(np.ones((2, 2, 3), np.float32), "ACEScg", DISPLAY, "nope")
