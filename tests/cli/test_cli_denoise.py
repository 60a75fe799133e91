"""End-to-end ``oidn-gpu denoise`` on real files, compared with Intel OIDN 2.5.1.

Inputs are crops of the Mitsuba scene ``textured_checker`` (tests/data/scenes) written to
EXR/PFM/PNG; the CLI output read back from disk must equal what pyoidn computes
on the same crop (relative L2 <= 1e-5 for float files). Runs on the NumPy
reference backend (autouse fixture in conftest.py).
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_support import (
    PARITY_REL_L2,
    leftovers,
    oidn,
    pythonpath_env,
    rel_l2,
    write_exr,
    write_multilayer,
)

from oidn_gpu import fetch
from oidn_gpu.image import io
from tests import datasets
from tests.compare import assert_equal_up_to_summation_order


def _assert_parity(path: Path, expected: np.ndarray) -> None:
    image = io.read_layer(path, "")  # the beauty (an EXR output keeps the other layers too)
    assert image.pixel_format == "float"
    err = rel_l2(image.pixels[:, :, :3], expected)
    assert err <= PARITY_REL_L2, f"relative L2 {err:.3g} > {PARITY_REL_L2:g} for {path}"


def test_exr_with_separate_aux_files_matches_oidn(cli, scene, tmp_path: Path) -> None:
    crop = scene(64)
    color = write_exr(tmp_path / "beauty.exr", crop["color_4spp"])
    albedo = write_exr(tmp_path / "albedo.exr", crop["albedo"])
    normal = write_exr(tmp_path / "normal.exr", crop["normal"])
    out = tmp_path / "out" / "denoised.exr"
    result = cli("denoise", color, "--albedo", albedo, "--normal", normal, "-o", out, "--mkdir")
    assert result.rc == 0, result.err
    assert "1 frame: 1 denoised, 0 skipped, 0 failed" in result.err
    expected = oidn(crop["color_4spp"], crop["albedo"], crop["normal"], hdr=True)
    _assert_parity(out, expected)
    attrs = {a.name: a.value for a in io.read_image(out).attributes}
    assert str(attrs["Software"]).startswith("oidn-gpu")
    assert leftovers(tmp_path) == []


def test_multilayer_exr_finds_its_aovs_and_matches_oidn(cli, scene, tmp_path: Path) -> None:
    crop = scene(64)
    path = write_multilayer(
        tmp_path / "render.exr",
        {"": crop["color_4spp"], "albedo": crop["albedo"], "nn": crop["normal"]},
    )
    out = tmp_path / "render_denoised.exr"
    result = cli("-v", "denoise", path, "-o", out)
    assert result.rc == 0, result.err
    assert "color '(root)', albedo 'albedo', normal 'nn'; hdr" in result.err  # both AOVs used
    expected = oidn(crop["color_4spp"], crop["albedo"], crop["normal"], hdr=True)
    _assert_parity(out, expected)


def test_blender_style_layers_alpha_and_side_by_side(cli, scene, tmp_path: Path) -> None:
    crop = scene(48)
    alpha = np.linspace(0, 1, 48 * 48, dtype=np.float32).reshape(48, 48, 1)
    noisy = np.concatenate([crop["color_4spp"], alpha], axis=2)
    path = write_multilayer(
        tmp_path / "blender.exr",
        {
            "ViewLayer.Combined": np.zeros_like(noisy),  # already denoised by Blender: not used
            "ViewLayer.Noisy Image": noisy,
            "ViewLayer.Denoising Albedo": crop["albedo"],
            "ViewLayer.Denoising Normal": crop["normal"],
        },
    )
    out = tmp_path / "out.exr"
    preview = tmp_path / "cmp.png"
    result = cli("denoise", path, "-o", out, "--side-by-side", preview)
    assert result.rc == 0, result.err
    # The denoised beauty replaces the noisy one; every other layer is kept as it was
    assert {lay.name for lay in io.list_layers(out)} == {lay.name for lay in io.list_layers(path)}
    image = io.read_layer(out, "ViewLayer.Noisy Image", with_alpha=True)
    np.testing.assert_array_equal(image.pixels[:, :, 3], alpha[:, :, 0])
    expected = oidn(crop["color_4spp"], crop["albedo"], crop["normal"], hdr=True)
    assert rel_l2(image.pixels[:, :, :3], expected) <= PARITY_REL_L2
    for kept in ("ViewLayer.Combined", "ViewLayer.Denoising Albedo"):
        np.testing.assert_array_equal(
            io.read_layer(out, kept).pixels, io.read_layer(path, kept).pixels
        )
    side = io.read_image(preview)
    assert side.pixels.shape == (48, 2 * 48 + 4, 3) and side.pixel_format == "uint8"


def test_pfm_in_pfm_out_matches_oidn(cli, scene, tmp_path: Path) -> None:
    crop = scene(48)
    color = io.write_image_atomic(tmp_path / "c.pfm", crop["color_4spp"])
    albedo = io.write_image_atomic(tmp_path / "a.pfm", crop["albedo"])
    out = tmp_path / "o.pfm"
    result = cli("denoise", color, "--albedo", albedo, "-o", out, "--quality", "fast")
    assert result.rc == 0, result.err
    expected = oidn(crop["color_4spp"], crop["albedo"], hdr=True, quality="fast")
    assert rel_l2(io.read_image(out).pixels, expected) <= PARITY_REL_L2


def test_png_is_denoised_as_srgb_ldr_and_written_as_is(cli, scene, tmp_path: Path) -> None:
    crop = scene(48)
    ldr = io.srgb_encode(np.clip(crop["color_4spp"] * 2, 0, 1))  # a display-referred 8-bit image
    png = io.write_image_atomic(tmp_path / "photo.png", ldr, encoding="srgb")
    values = io.read_image(png).pixels  # exactly what the 8-bit file holds, in [0, 1]
    out = tmp_path / "photo_denoised.png"
    result = cli("denoise", png, "-o", out)
    assert result.rc == 0, result.err
    denoised = io.read_image(out)
    assert denoised.pixel_format == "uint8"
    expected = oidn(values, srgb=True)  # OIDN LDR sRGB mode: no transfer function applied
    quantized = np.round(np.clip(expected, 0, 1) * 255) / 255
    assert np.abs(denoised.pixels - quantized).max() <= 1 / 255 + 1e-6  # one-LSB rounding ties


def test_input_scale_and_exr_to_png_conversion(cli, scene, tmp_path: Path) -> None:
    crop = scene(48)
    color = write_exr(tmp_path / "c.exr", crop["color_4spp"])
    out_exr = tmp_path / "o.exr"
    out_png = tmp_path / "o.png"
    assert cli("denoise", color, "-o", out_exr, "--input-scale", "0.5").rc == 0
    assert cli("denoise", color, "-o", out_png, "--input-scale", "0.5").rc == 0
    expected = oidn(crop["color_4spp"], hdr=True, input_scale=0.5)
    _assert_parity(out_exr, expected)
    png = io.read_image(out_png).pixels
    np.testing.assert_allclose(png, io.srgb_encode(expected), atol=0.5 / 255 + 1e-6)


def test_directory_of_multilayer_frames(cli, scene, tmp_path: Path) -> None:
    frames = tmp_path / "frames"
    frames.mkdir()
    crops = [scene(32, offset=8 * i) for i in range(3)]
    for i, crop in enumerate(crops, start=1):
        write_multilayer(
            frames / f"shot.{i:04d}.exr",
            {"": crop["color_4spp"], "albedo": crop["albedo"], "nn": crop["normal"]},
        )
    (frames / "notes.txt").write_text("not an image")
    out = tmp_path / "denoised"
    result = cli("denoise", frames, "-o", out, "--mkdir")
    assert result.rc == 0, result.err
    assert "3 frames: 3 denoised, 0 skipped, 0 failed" in result.err
    assert sorted(p.name for p in out.iterdir()) == [f"shot.{i:04d}.exr" for i in (1, 2, 3)]
    expected = oidn(crops[2]["color_4spp"], crops[2]["albedo"], crops[2]["normal"], hdr=True)
    _assert_parity(out / "shot.0003.exr", expected)
    again = cli("denoise", frames, "-o", out, "--skip-existing")
    assert again.rc == 0 and "3 skipped" in again.err


def test_glob_with_aux_templates(cli, scene, tmp_path: Path) -> None:
    for i in (1, 2):
        crop = scene(32, offset=8 * i)
        write_exr(tmp_path / f"beauty_{i}.exr", crop["color_4spp"])
        write_exr(tmp_path / f"albedo_{i}.exr", crop["albedo"])
        write_exr(tmp_path / f"normal_{i}.exr", crop["normal"])
    result = cli(
        "denoise",
        str(tmp_path / "beauty_*.exr"),
        "-o",
        str(tmp_path / "out" / "{stem}_dn.exr"),
        "--albedo",
        str(tmp_path / "albedo_{frame}.exr"),
        "--normal",
        str(tmp_path / "normal_{frame}.exr"),
        "--mkdir",
    )
    assert result.rc == 0, result.err
    crop = scene(32, offset=16)
    expected = oidn(crop["color_4spp"], crop["albedo"], crop["normal"], hdr=True)
    _assert_parity(tmp_path / "out" / "beauty_2_dn.exr", expected)


def test_corrupt_frame_is_reported_and_the_others_finish(cli, scene, tmp_path: Path) -> None:
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in (1, 3):
        write_exr(frames / f"f{i}.exr", scene(32, offset=4 * i)["color_4spp"])
    good = (frames / "f1.exr").read_bytes()
    (frames / "f2.exr").write_bytes(good[: len(good) // 2])  # truncated mid-file
    (frames / "f4.exr").write_bytes(b"this is not an exr")
    out = tmp_path / "out"
    result = cli("denoise", frames, "-o", out, "--mkdir")
    assert result.rc == 1
    assert "4 frames: 2 denoised, 0 skipped, 2 failed" in result.err
    assert f"error: {frames / 'f2.exr'}: cannot read" in result.err
    assert f"error: {frames / 'f4.exr'}: cannot read" in result.err
    assert "Traceback" not in result.err
    assert sorted(p.name for p in out.iterdir()) == ["f1.exr", "f3.exr"]
    for name in ("f1.exr", "f3.exr"):
        assert io.read_image(out / name).pixels.shape == (32, 32, 3)
    assert leftovers(tmp_path) == []


def test_interrupt_while_writing_leaves_no_partial_output(
    cli, scene, tmp_path: Path, monkeypatch
) -> None:
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    frames = tmp_path / "frames"
    frames.mkdir()
    for i in (1, 2, 3):
        write_exr(frames / f"f{i}.exr", scene(32, offset=4 * i)["color_4spp"])
    real_write = oiio.ImageOutput.write_scanlines  # an EXR is written a band at a time
    calls = []

    def write_then_interrupt(self, *args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C in the middle of writing frame 2
        return real_write(self, *args)

    monkeypatch.setattr(oiio.ImageOutput, "write_scanlines", write_then_interrupt)
    out = tmp_path / "out"
    result = cli("denoise", frames, "-o", out, "--mkdir")
    assert result.rc == 130
    last = result.err.strip().splitlines()[-1]
    assert last.startswith("error: interrupted; 1 of 3 frames finished"), last
    assert "--skip-existing" in last  # how to resume
    assert sorted(p.name for p in out.iterdir()) == ["f1.exr"]
    assert leftovers(tmp_path) == []


# The CLI in a child process whose second output write waits for a signal instead of
# finishing, so the run is always still going (inside a frame, a temporary file open)
# when the test signals it, however loaded the machine is.
HOLD_AT_SECOND_WRITE = """
import signal, sys, time
# Ctrl-C as in a terminal, also when the tests were started with SIGINT ignored (a
# background job of a non-interactive shell)
signal.signal(signal.SIGINT, signal.default_int_handler)
import OpenImageIO as oiio
from oidn_gpu.cli import main

real_write = oiio.ImageOutput.write_scanlines  # an EXR is written a band at a time
writes = []

def write_or_hold(self, *args):
    writes.append(None)
    while len(writes) == 2:
        time.sleep(0.05)  # interrupted by the test's SIGINT/SIGTERM
    return real_write(self, *args)

oiio.ImageOutput.write_scanlines = write_or_hold
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="signals to a child are POSIX-only")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_to_a_running_sequence_leaves_only_complete_outputs(
    scene, tmp_path: Path, signum: int
) -> None:
    frames = tmp_path / "frames"
    frames.mkdir()
    frame_count = 4
    for i in range(frame_count):
        write_exr(frames / f"f{i:02d}.exr", scene(64, offset=i)["color_4spp"])
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOLD_AT_SECOND_WRITE,
            "denoise",
            str(frames),
            "-o",
            str(out),
            "--mkdir",
        ],
        env=pythonpath_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = out / "f00.exr"
    deadline = time.monotonic() + 600  # only bounds a broken run; a working one never waits it
    while not first.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is not None:
        _, err = proc.communicate()
        pytest.fail(f"the run ended (exit {proc.returncode}) before it was interrupted: {err}")
    assert first.exists(), "no output after 600 s"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "error: interrupted" in err
    assert sorted(p.name for p in out.iterdir()) == ["f00.exr"]  # no frame 2, no temporary
    assert io.read_image(first).pixels.shape == (64, 64, 3)
    assert leftovers(tmp_path) == []


def test_prefilter_accurate_matches_oidns_documented_workflow(
    cli, scene, tmp_path: Path, weights_dir: Path
) -> None:
    noisy = datasets.scene_crop("textured_checker_wide", ("albedo_1spp", "normal_1spp"))
    crop = scene(48)
    albedo = np.ascontiguousarray(noisy["albedo_1spp"][:48, :48])
    normal = np.ascontiguousarray(noisy["normal_1spp"][:48, :48])
    path = write_multilayer(
        tmp_path / "r.exr", {"": crop["color_4spp"], "albedo": albedo, "nn": normal}
    )
    out = tmp_path / "o.exr"
    result = cli(
        "denoise", path, "-o", out, "--prefilter", "accurate", "--weights-dir", weights_dir
    )
    assert result.rc == 0, result.err
    clean_albedo = oidn(None, albedo)
    clean_normal = oidn(None, None, normal)
    expected = oidn(crop["color_4spp"], clean_albedo, clean_normal, hdr=True, clean_aux=True)
    _assert_parity(out, expected)

    fast = tmp_path / "fast.exr"
    result = cli("denoise", path, "-o", fast, "--prefilter", "fast", "--quality", "balanced")
    assert result.rc == 0, result.err
    expected = oidn(
        crop["color_4spp"], albedo, normal, hdr=True, clean_aux=True, quality="balanced"
    )
    _assert_parity(fast, expected)


def test_prefilter_accurate_needs_no_network(
    cli, scene, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 23 weights come with the package: with every socket refused and an empty
    user weights folder, ``--prefilter accurate`` (three large networks) still runs."""

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(fetch, "download", no_network)
    monkeypatch.setenv("OIDN_GPU_WEIGHTS", str(tmp_path / "empty"))
    crop = scene(32)
    path = write_multilayer(
        tmp_path / "r.exr", {"": crop["color_4spp"], "albedo": crop["albedo"], "nn": crop["normal"]}
    )
    out = tmp_path / "o.exr"
    result = cli("denoise", path, "--prefilter", "accurate", "-o", out)
    assert result.rc == 0, result.err
    clean_albedo = oidn(None, crop["albedo"])
    clean_normal = oidn(None, None, crop["normal"])
    expected = oidn(crop["color_4spp"], clean_albedo, clean_normal, hdr=True, clean_aux=True)
    _assert_parity(out, expected)


def test_lightmap_matches_oidn(cli, scene, tmp_path: Path) -> None:
    crop = scene(48)
    color = write_exr(tmp_path / "lm.exr", crop["color_4spp"])
    out = tmp_path / "lm_out.exr"
    result = cli("denoise", color, "-o", out, "--lightmap")
    assert result.rc == 0, result.err
    _assert_parity(out, oidn(crop["color_4spp"], filter_type="RTLightmap"))


def test_tile_size_changes_the_result_only_by_rounding(cli, scene, tmp_path: Path) -> None:
    # Not bit for bit: a pixel sits elsewhere in the BLAS calls of a tile than in those
    # of the whole image, and some BLAS kernels round by position (tests/compare.py).
    wide = scene(224)["color_4spp"][:48]  # 224 x 48: two tiles of at most 208 px
    color = write_exr(tmp_path / "c.exr", wide)
    whole, tiled = tmp_path / "whole.exr", tmp_path / "tiled.exr"
    assert cli("denoise", color, "-o", whole, "--quality", "fast").rc == 0
    result = cli("denoise", color, "-o", tiled, "--quality", "fast", "--tile-size", "208")
    assert result.rc == 0, result.err
    assert_equal_up_to_summation_order(
        io.read_image(tiled).pixels, io.read_image(whole).pixels, label="tiled vs whole"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["cornell_diffuse", "cornell_glossy", "textured_checker", "dim_indirect"]
)
def test_full_shared_scene_equals_stored_oidn_output(
    cli, scenes_dir: Path, tmp_path: Path, name: str
) -> None:
    """The stored ``oidn_4spp_aux.exr`` is OIDN 2.5.1's output (RT, hdr, albedo + normal)."""
    folder = scenes_dir / name
    out = tmp_path / f"{name}.exr"
    result = cli(
        "denoise",
        folder / "color_4spp.exr",
        "--albedo",
        folder / "albedo.exr",
        "--normal",
        folder / "normal.exr",
        "-o",
        out,
    )
    assert result.rc == 0, result.err
    _assert_parity(out, io.read_image(folder / "oidn_4spp_aux.exr").pixels)


def _readme_first_command() -> list[str]:
    """The arguments of ``oidn-gpu denoise`` in the README's first command."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    line = next(line for line in readme.splitlines() if 'oidn-gpu denoise "$(' in line)
    words = shlex.split(line.split("oidn-gpu denoise ", 1)[1])
    assert words[0] == "$(.venv/bin/oidn-gpu example)", words
    return words[1:]


def test_example_main_job_command(cli, tmp_path: Path, monkeypatch) -> None:
    """The README's first command: denoise the bundled example, write a preview, say what
    it wrote; run again, it does the same (it replaces its own outputs)."""
    monkeypatch.chdir(tmp_path)
    example = Path(cli("example").out.strip())
    args = _readme_first_command()
    out, preview = tmp_path / "out" / "denoised.exr", tmp_path / "out" / "side_by_side.png"
    for _ in range(2):
        result = cli("denoise", example, *args)
        assert result.rc == 0, result.err
        assert result.err.splitlines()[-1] == "wrote out/denoised.exr and out/side_by_side.png"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing in the checkout's root
    gitignore = (Path(__file__).resolve().parents[2] / ".gitignore").read_text().split()
    assert "/out/" in gitignore  # and its folder is not left untracked there
    assert io.read_layer(out, "").pixels.shape == (256, 256, 3)
    assert [lay.name for lay in io.list_layers(out)] == ["", "albedo", "nn"]
    assert io.read_image(preview).pixels.shape == (256, 2 * 256 + 4, 3)
    assert os.path.getsize(preview) > 10_000
    assert leftovers(tmp_path) == []


def test_infinite_pixels_that_blacken_a_frame_are_warned_about(cli, scene, tmp_path: Path) -> None:
    frames = tmp_path / "frames"
    frames.mkdir()
    good = scene(32)["color_4spp"]
    bad = good.copy()
    bad[3, 4, 1] = np.inf
    bad[7, 7, :] = np.inf
    write_exr(frames / "f1.exr", good)
    write_exr(frames / "f2.exr", bad)
    result = cli("denoise", frames, "-o", tmp_path / "out", "--mkdir", "--no-aux")
    assert result.rc == 0, result.err
    warned = [line for line in result.err.splitlines() if line.startswith("warning:")]
    assert warned == [
        f"warning: {frames / 'f2.exr'}: 2 infinite pixels of 1,024 in the color: denoised as "
        "Intel OIDN does (NaN as 0, infinities clamped to the input range); fix them in the "
        "render",
        f"warning: {frames / 'f2.exr'}: autoexposure is 0 because 2 pixels of the color are "
        "not finite (Inf or NaN): the output is black; set input_scale (--input-scale on the "
        "command line) or replace those pixels",
    ]
    black = io.read_image(tmp_path / "out" / "f2.exr").pixels
    expected = oidn(bad, hdr=True)  # OIDN gives the same black image
    assert not expected.any()
    np.testing.assert_array_equal(black, expected)
    _assert_parity(tmp_path / "out" / "f1.exr", oidn(good, hdr=True))
