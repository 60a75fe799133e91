"""``oidn-gpu denoise`` on inputs and outputs a careless or hostile user gives it.

Deep and 32-bit integer images, aux images placed elsewhere in pixel coordinates, outputs
that cannot hold the beauty's alpha, corrupt files whose OpenImageIO error quotes bytes
that are not UTF-8, dangling links at output paths and weights that make non-finite
pixels: each is refused with a message naming the file (exit 1 for a frame, 2 before any
work), or handled as docs/aovs.md says. Tiny weights (tests/data) keep them fast.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from cli_support import leftovers, write_exr

from oidn_gpu.image import io
from oidn_gpu.model import read_tza, write_tza
from tests import exr_files

DATA = Path(__file__).resolve().parents[1] / "data"
COLOR_WEIGHTS = DATA / "tiny_base_ic3.tza"  # color only
ALBEDO_WEIGHTS = DATA / "tiny_large_ic6.tza"  # color + albedo
FLATTEN = "flatten it first, for example with 'oiiotool deep.exr --flatten -o flat.exr'"


def _oiio():
    return exr_files.oiio()


def _write_deep(path: Path) -> Path:
    return exr_files.write_deep(path)


def _write_with_spec(path: Path, pixels: np.ndarray, configure) -> Path:
    """An EXR whose spec ``configure(spec)`` adjusts (windows, channel types)."""
    names = ("R", "G", "B", "A")[: pixels.shape[2]]
    spec = exr_files.spec(pixels.shape[1], pixels.shape[0], names, "float")
    configure(spec)
    return exr_files.write_parts(path, [(spec, pixels)])


def _placed(spec, x: int, y: int, display: int) -> None:
    spec.x, spec.y = x, y
    spec.full_x = spec.full_y = 0
    spec.full_width = spec.full_height = display


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def _frame_fails(result, error: str) -> None:
    """The run exits 1 with this one error line (the frame failed)."""
    assert result.rc == 1, result.err
    assert _errors(result.err) == [error]


def _color(size: int = 32, channels: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((size, size, channels), dtype=np.float32)


@pytest.mark.parametrize("output", ["out.png", "out.exr"])
def test_a_deep_beauty_is_refused_naming_the_file_and_layer(
    cli, tmp_path: Path, output: str
) -> None:
    deep = _write_deep(tmp_path / "deep.exr")
    result = cli("denoise", deep, "-o", tmp_path / output, "--weights", COLOR_WEIGHTS)
    _frame_fails(
        result,
        f"error: {deep}: cannot read layer '(root)' of '{deep}': it is a deep image (several "
        f"samples per pixel); expected a flat image ({FLATTEN})",
    )
    assert not (tmp_path / output).exists() and leftovers(tmp_path) == []


def test_a_deep_albedo_file_is_refused(cli, tmp_path: Path) -> None:
    color = write_exr(tmp_path / "color.exr", _color(16))
    deep = _write_deep(tmp_path / "albedo.exr")
    out = tmp_path / "out.exr"
    result = cli("denoise", color, "--albedo", deep, "-o", out, "--weights", ALBEDO_WEIGHTS)
    _frame_fails(
        result,
        f"error: {color}: cannot read layer '(root)' of '{deep}': it is a deep image (several "
        f"samples per pixel); expected a flat image ({FLATTEN})",
    )
    assert not out.exists()


def test_every_reader_refuses_a_deep_file(tmp_path: Path) -> None:
    from oidn_gpu.image import exr

    deep = _write_deep(tmp_path / "deep.exr")
    name = re.escape(str(deep))
    with pytest.raises(io.ImageFileError, match=f"^cannot read '{name}': it is a deep image"):
        io.read_image(deep)
    with pytest.raises(io.ImageFileError, match=f"^cannot read part 0 of '{name}': it is a deep"):
        exr.read_file(deep)
    with pytest.raises(io.ImageFileError, match=r"^cannot read channels R, G of '"):
        io.read_layer(deep, "R,G")


def test_a_uint32_beauty_is_refused_not_taken_as_srgb(cli, tmp_path: Path) -> None:
    values = np.arange(32 * 32 * 3, dtype=np.float32).reshape(32, 32, 3) % 1000
    color = _write_with_spec(
        tmp_path / "ids.exr", values.astype(np.uint32), lambda s: s.set_format(_oiio().UINT32)
    )
    out = tmp_path / "out.exr"
    result = cli("denoise", color, "-o", out, "--weights", COLOR_WEIGHTS)
    _frame_fails(
        result,
        f"error: {color}: cannot read layer '(root)' of '{color}': channel 'R' holds 32-bit "
        "integers (uint), such as object IDs; expected half or float channels (linear light) "
        "or an 8/16-bit image (sRGB)",
    )
    assert not out.exists()


def test_a_uint32_id_channel_beside_a_half_beauty_is_kept_bit_for_bit(cli, tmp_path: Path) -> None:
    oiio = _oiio()
    pixels = np.concatenate([_color(16), np.full((16, 16, 1), 7.0, np.float32)], axis=2)

    def configure(spec) -> None:
        spec.channelnames = ("R", "G", "B", "id")
        spec.channelformats = (oiio.HALF, oiio.HALF, oiio.HALF, oiio.UINT32)

    color = _write_with_spec(tmp_path / "beauty.exr", pixels, configure)
    out = tmp_path / "out.exr"
    result = cli("denoise", color, "-o", out, "--weights", COLOR_WEIGHTS, "--no-aux")
    assert result.rc == 0, result.err
    from oidn_gpu.image import exr

    written, original = exr.read_file(out).parts[0], exr.read_file(color).parts[0]
    assert [str(written.channel_format(i)) for i in range(4)] == ["half", "half", "half", "uint"]
    np.testing.assert_array_equal(written.pixels[:, :, 3], original.pixels[:, :, 3])


def test_an_aux_file_shifted_by_its_data_window_is_refused(cli, tmp_path: Path) -> None:
    color = write_exr(tmp_path / "color.exr", _color(32))
    albedo = _write_with_spec(
        tmp_path / "albedo.exr", _color(32, seed=1), lambda s: _placed(s, 10, 10, 32)
    )
    out = tmp_path / "out.exr"
    result = cli("denoise", color, "--albedo", albedo, "-o", out, "--weights", ALBEDO_WEIGHTS)
    _frame_fails(
        result,
        f"error: {color}: the albedo '{albedo}' has data window (10, 10)-(41, 41) (32x32) but "
        f"the color '{color}' has (0, 0)-(31, 31) (32x32), and it has no pixels for part of "
        "the color; expected the albedo to cover the color's data window in the same display "
        "window (pixels are matched by their coordinates)",
    )
    assert not out.exists()


def test_a_full_frame_albedo_is_cut_to_a_crop_rendered_beauty(cli, tmp_path: Path) -> None:
    """The crop at (8, 12) of a 48 px frame gets the albedo's pixels at the same coordinates:
    the same bits as denoising with the albedo cut by hand."""
    full_albedo = _color(48, seed=2)
    crop = _color(24, seed=3)
    color = _write_with_spec(tmp_path / "crop.exr", crop, lambda s: _placed(s, 8, 12, 48))
    albedo = write_exr(tmp_path / "albedo.exr", full_albedo)
    cut = write_exr(tmp_path / "cut.exr", full_albedo[12:36, 8:32])
    plain = write_exr(tmp_path / "plain.exr", crop)
    args = ("--weights", ALBEDO_WEIGHTS)
    placed = cli("denoise", color, "--albedo", albedo, "-o", tmp_path / "a.exr", *args)
    assert placed.rc == 0, placed.err
    by_hand = cli("denoise", plain, "--albedo", cut, "-o", tmp_path / "b.exr", *args)
    assert by_hand.rc == 0, by_hand.err
    np.testing.assert_array_equal(
        io.read_image(tmp_path / "a.exr").pixels, io.read_image(tmp_path / "b.exr").pixels
    )


def test_an_albedo_of_another_display_window_is_refused(cli, tmp_path: Path) -> None:
    color = _write_with_spec(tmp_path / "crop.exr", _color(16), lambda s: _placed(s, 0, 0, 32))
    albedo = write_exr(tmp_path / "albedo.exr", _color(64, seed=1))
    result = cli(
        "denoise",
        color,
        "--albedo",
        albedo,
        "-o",
        tmp_path / "o.exr",
        "--weights",
        ALBEDO_WEIGHTS,
    )
    _frame_fails(
        result,
        f"error: {color}: the albedo '{albedo}' has data window (0, 0)-(63, 63) (64x64) but "
        f"the color '{color}' has (0, 0)-(15, 15) (16x16), and it has display window "
        "(0, 0)-(63, 63) (the color's is (0, 0)-(31, 31)); expected the albedo to cover the "
        "color's data window in the same display window (pixels are matched by their "
        "coordinates)",
    )


@pytest.mark.parametrize("suffix", [".pfm", ".hdr", ".ppm", ".jpg"])
def test_rgba_to_a_format_without_alpha_drops_it_with_one_warning(
    cli, tmp_path: Path, suffix: str
) -> None:
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in (1, 2):
        write_exr(frames / f"f{i}.exr", _color(16, channels=4, seed=i))
    out = tmp_path / "out"
    result = cli(
        "denoise",
        frames,
        "-o",
        f"{out}/{{stem}}{suffix}",
        "--mkdir",
        "--no-aux",
        "--weights",
        COLOR_WEIGHTS,
    )
    assert result.rc == 0, result.err
    warned = [line for line in result.err.splitlines() if line.startswith("warning:")]
    warned = [line for line in warned if "were clipped" not in line]  # HDR to 8-bit: its own
    assert warned == [
        f"warning: '{out / ('f1' + suffix)}' cannot hold an alpha channel: writing the "
        f"denoised color of '{frames / 'f1.exr'}' without its alpha; write .exr, .tif or .png "
        "to keep it"
    ]
    for i in (1, 2):
        assert io.read_image(out / f"f{i}{suffix}").pixels.shape == (16, 16, 3)
    if suffix == ".pfm":  # float, lossless: the same colour as an RGBA EXR output
        rgba = cli(
            "denoise",
            frames / "f1.exr",
            "-o",
            tmp_path / "f1.exr",
            "--no-aux",
            "--weights",
            COLOR_WEIGHTS,
        )
        assert rgba.rc == 0, rgba.err
        np.testing.assert_array_equal(
            io.read_image(out / "f1.pfm").pixels, io.read_image(tmp_path / "f1.exr").pixels[..., :3]
        )


def test_a_grey_beauty_to_radiance_hdr_is_refused_before_denoising(cli, tmp_path: Path) -> None:
    grey = _write_with_spec(
        tmp_path / "grey.exr", _color(16, channels=1), lambda s: setattr(s, "channelnames", ("Y",))
    )
    out = tmp_path / "out.hdr"
    result = cli("denoise", grey, "-o", out, "--weights", COLOR_WEIGHTS)
    _frame_fails(
        result,
        f"error: {grey}: '{out}' cannot hold the 1-channel color of '{grey}' (its format holds "
        "3 channels); write .exr, .tif or .png",
    )


def test_a_corrupt_exr_whose_error_is_not_utf8_says_what_is_wrong(cli, tmp_path: Path) -> None:
    good = write_exr(tmp_path / "good.exr", _color(8)).read_bytes()
    assert good.count(b"channels\x00chlist\x00") == 1
    bad = tmp_path / "bad.exr"
    bad.write_bytes(good.replace(b"channels\x00chlist\x00", b"channels\x00ch\xf8ist\x00"))
    result = cli("denoise", bad, "-o", tmp_path / "out.exr", "--weights", COLOR_WEIGHTS)
    assert result.rc == 1, result.err
    errors = _errors(result.err)
    assert len(errors) == 1 and errors[0].startswith(f"error: {bad}: cannot read '{bad}': ")
    assert "Invalid type 'ch\\xf8ist'" in errors[0]
    assert "codec" not in result.err and "Traceback" not in result.err


def test_an_attribute_that_is_not_utf8_is_dropped_from_other_formats(cli, tmp_path: Path) -> None:
    """A corrupt file's string attribute that cannot be written back is left out of a PNG
    or PFM output, not an internal error."""

    def dated(spec) -> None:
        spec.attribute("DateTime", "2026:12:01 10:00:00")

    path = _write_with_spec(tmp_path / "dated.exr", _color(16), dated)
    data = path.read_bytes()
    assert data.count(b"2026:12:01 10:00:00") == 1
    path.write_bytes(data.replace(b"2026:12:01 10:00:00", b"2\xff\xff6:12:01 10:00:00"))
    for output in ("out.png", "out.pfm"):
        result = cli("denoise", path, "-o", tmp_path / output, "--weights", COLOR_WEIGHTS)
        assert result.rc == 0, result.err
        assert io.read_image(tmp_path / output).pixels.shape == (16, 16, 3)


def test_a_dangling_link_at_the_output_is_an_existing_output(cli, tmp_path: Path) -> None:
    color = write_exr(tmp_path / "color.exr", _color(16))
    out = tmp_path / "out.exr"
    out.symlink_to(tmp_path / "missing" / "render.exr")
    result = cli("denoise", color, "-o", out, "--weights", COLOR_WEIGHTS)
    assert result.rc == 2, result.err
    assert result.err.strip().splitlines()[-1] == (
        f"error: output '{out}' exists; pass --overwrite or --skip-existing"
    )
    assert out.is_symlink() and not out.exists()
    replaced = cli("denoise", color, "-o", out, "--weights", COLOR_WEIGHTS, "--overwrite")
    assert replaced.rc == 0, replaced.err
    assert not out.is_symlink() and io.read_image(out).pixels.shape == (16, 16, 3)


def test_frames_with_non_finite_output_pixels_are_warned_about_and_counted(
    cli, tmp_path: Path
) -> None:
    tensors = {name: np.array(t) for name, t in read_tza(COLOR_WEIGHTS).items()}
    for name in tensors:
        if name.endswith(".bias"):
            tensors[name][:] = 0  # a black frame stays black (and finite)
    tensors["dec_conv0.weight"][0] = 6e4  # elsewhere the red output overflows
    weights = tmp_path / "overflow.tza"
    weights.write_bytes(write_tza(tensors))
    frames = tmp_path / "frames"
    frames.mkdir()
    write_exr(frames / "f1.exr", np.zeros((16, 16, 3), np.float32))  # all-zero: stays finite
    write_exr(frames / "f2.exr", _color(16))
    out = tmp_path / "out"
    result = cli(
        "denoise", frames, "-o", out, "--mkdir", "--no-aux", "--weights", weights, "--json"
    )
    assert result.rc == 0, result.err
    warned = [line for line in result.err.splitlines() if line.startswith("warning:")]
    bad = int((~np.isfinite(io.read_image(out / "f2.exr").pixels).all(axis=2)).sum())
    assert bad > 0 and np.isfinite(io.read_image(out / "f1.exr").pixels).all()
    assert warned == [
        f"warning: {frames / 'f2.exr'}: non-finite (NaN or infinite) denoised pixels: {bad} of "
        "256 in the color; check the weights and the input images"
    ]
    assert "2 frames: 2 denoised, 0 skipped, 0 failed in " in result.err
    assert "; 1 with non-finite output pixels" in result.err
    summary = json.loads(result.out)
    assert summary["nonfinite"] == 1
    assert [r["nonfinite_pixels"] for r in summary["results"]] == [0, bad]
