"""What a run says when passes are missing or named in an unknown way: an albedo without a
recognised normal is warned about, an unknown beauty's error lists the file's layers and
every pass still to name in one message, and ``--list-layers`` shows ``--albedo``/``--normal``
files. Real files (crops of the Mitsuba scene textured_checker) through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_support import write_exr, write_multilayer

from oidn_gpu.image import io

SIZE = 24  # px: the reference backend is slow


def _crop(scene) -> dict:
    return scene(SIZE)


def test_an_albedo_with_an_unrecognised_normal_is_warned_about(cli, scene, tmp_path: Path) -> None:
    crop = _crop(scene)
    path = write_multilayer(
        tmp_path / "nuke.exr",
        {"": crop["color_4spp"], "diffuse_albedo": crop["albedo"], "nrm_cam": crop["normal"]},
    )
    result = cli("denoise", path, "-o", tmp_path / "o.exr", "--no-progress", "--json")
    assert result.rc == 0, result.err
    warning = next(line for line in result.err.splitlines() if line.startswith("warning:"))
    assert "has an albedo ('diffuse_albedo') but no layer is named as a normal" in warning
    assert "nrm_cam: R, G, B" in warning  # the file's layers, to pick the normal from
    assert "--normal-layer NAME" in warning and "--normal FILE" in warning
    frame = json.loads(result.out)["results"][0]
    assert frame["layers"]["albedo"] == "diffuse_albedo" and frame["layers"]["normal"] is None

    named = cli("denoise", path, "-o", tmp_path / "o2.exr", "--normal-layer", "nrm_cam")
    assert named.rc == 0, named.err
    assert "warning" not in named.err
    # saying the albedo alone is meant silences the warning
    alone = cli("denoise", path, "-o", tmp_path / "o3.exr", "--albedo-layer", "diffuse_albedo")
    assert alone.rc == 0, alone.err
    assert "warning" not in alone.err


def test_an_unknown_beauty_lists_the_layers_and_every_pass_to_name(
    cli, scene, tmp_path: Path
) -> None:
    crop = _crop(scene)
    layers = {"beauty_rgb": crop["color_4spp"], "alb": crop["albedo"], "nrm": crop["normal"]}
    path = write_multilayer(tmp_path / "custom.exr", layers)
    result = cli("denoise", path, "-o", tmp_path / "o.exr", "--no-progress")
    assert result.rc == 1
    error = next(line for line in result.err.splitlines() if line.startswith("error:"))
    assert f"cannot find the beauty in '{path}'" in error
    assert "alb: R, G, B; beauty_rgb: R, G, B; nrm: R, G, B" in error
    assert (
        "name the beauty with --color-layer NAME and the albedo with --albedo-layer NAME "
        "and the normal with --normal-layer NAME" in error
    )
    # one run with the three names printed there is enough
    flags = ["--color-layer", "beauty_rgb", "--albedo-layer", "alb", "--normal-layer", "nrm"]
    named = cli("denoise", path, "-o", tmp_path / "o.exr", "--no-progress", "--json", *flags)
    assert named.rc == 0, named.err
    frame = json.loads(named.out)["results"][0]
    assert (frame["layers"]["albedo"], frame["layers"]["normal"]) == ("alb", "nrm")


def test_an_unknown_beauty_with_known_aovs_asks_only_for_the_beauty(
    cli, scene, tmp_path: Path
) -> None:
    crop = _crop(scene)
    layers = {"beauty_rgb": crop["color_4spp"], "BaseColor": crop["albedo"]}
    path = write_multilayer(tmp_path / "c.exr", layers)
    result = cli("denoise", path, "-o", tmp_path / "o.exr", "--no-progress")
    assert result.rc == 1
    assert "name the beauty with --color-layer NAME and the normal with" in result.err
    assert "the albedo with" not in result.err


def test_a_color_only_png_asks_for_aux_files(cli, scene, tmp_path: Path) -> None:
    crop = _crop(scene)
    srgb = (crop["color_4spp"].clip(0, 1) * 255).astype("uint8")
    path = io.write_image_atomic(tmp_path / "c.png", srgb)
    result = cli("denoise", path, "-o", tmp_path / "o.png", "--no-progress")
    assert result.rc == 0, result.err
    assert "give the albedo and normal as files with --albedo FILE and --normal FILE" in result.err
    assert "docs/" not in result.err  # not shipped with an installed package
    assert "--albedo-layer" not in result.err  # a PNG has no layers to name


def test_list_layers_shows_aux_files(cli, scene, tmp_path: Path) -> None:
    crop = _crop(scene)
    color = write_exr(tmp_path / "c.exr", crop["color_4spp"])
    albedo = write_exr(tmp_path / "a.exr", crop["albedo"])
    normal = write_exr(tmp_path / "n.exr", crop["normal"])
    result = cli("denoise", "--list-layers", color, "--albedo", albedo, "--normal", normal)
    assert result.rc == 0, result.err
    assert f"-> albedo: file '{albedo}' (--albedo)" in result.out
    assert f"-> normal: file '{normal}' (--normal)" in result.out
    assert "none found" not in result.out
    alone = cli("denoise", "--list-layers", color)
    assert "-> albedo: none found" in alone.out
    assert "(name the albedo and normal with --albedo-layer NAME or --albedo FILE" in alone.out


def test_an_hdr_result_written_to_png_says_what_was_clipped(cli, scene, tmp_path: Path) -> None:
    crop = _crop(scene)
    bright = crop["color_4spp"] * 8.0  # a good share of the pixels above 1
    color = write_exr(tmp_path / "c.exr", bright)
    flags = ["--albedo", write_exr(tmp_path / "a.exr", crop["albedo"]), "--no-progress"]
    result = cli("denoise", color, "-o", tmp_path / "o.png", *flags)
    assert result.rc == 0, result.err
    line = next(line for line in result.err.splitlines() if "clipped" in line)
    assert line.startswith(f"warning: '{tmp_path / 'o.png'}' holds display values in [0, 1]: ")
    clipped = int(line.split(": ")[2].split(" of ")[0])
    written = io.read_image(tmp_path / "o.png").pixels
    assert clipped > 0 and np.count_nonzero((written >= 1.0).any(axis=2)) >= clipped
    assert "write .exr, .pfm or .hdr to keep them" in line
    kept = cli("denoise", color, "-o", tmp_path / "o.exr", *flags)
    assert kept.rc == 0 and "clipped" not in kept.err


def test_a_motion_pass_is_not_denoised_as_a_color(cli, scene, tmp_path: Path) -> None:
    crop = _crop(scene)
    path = write_multilayer(
        tmp_path / "m.exr", {"": crop["color_4spp"], "ViewLayer.Vector": crop["normal"]}
    )
    for flag in ("--aovs", "--aovs-sum"):
        result = cli("denoise", path, "-o", tmp_path / "o.exr", flag, "ViewLayer.Vector")
        assert result.rc == 2
        assert f"error: {flag} ViewLayer.Vector: 'ViewLayer.Vector' is a motion-vector pass" in (
            result.err
        )
    assert not (tmp_path / "o.exr").exists()


def test_a_one_channel_normal_and_a_bright_albedo_are_noted(cli, scene, tmp_path: Path) -> None:
    crop = _crop(scene)
    color = write_exr(tmp_path / "c.exr", crop["color_4spp"])
    depth = io.write_image_atomic(tmp_path / "depth.exr", crop["normal"][:, :, :1] + 5.0)
    albedo = write_exr(tmp_path / "beauty_as_albedo.exr", crop["albedo"] * 5.0)
    result = cli("denoise", color, "--albedo", albedo, "--normal", depth, "-o", tmp_path / "o.exr")
    assert result.rc == 0, result.err
    assert f"warning: the normal '{depth}' of '{color}' has one channel" in result.err
    peak = float(crop["albedo"].max() * 5.0)
    assert f"warning: the albedo '{albedo}' of '{color}' reaches {peak:.3g}" in result.err
    plain = cli(
        "denoise",
        color,
        "--albedo",
        write_exr(tmp_path / "a.exr", crop["albedo"]),
        "-o",
        tmp_path / "o2.exr",
    )
    assert plain.rc == 0 and "warning" not in plain.err


def test_hdr_with_an_8_bit_file_follows_the_api_rule(cli, scene, tmp_path: Path) -> None:
    import oidn_gpu

    srgb = (_crop(scene)["color_4spp"].clip(0, 1) * 255).astype(np.uint8)
    with pytest.raises(oidn_gpu.InvalidOperationError, match="HDR denoising"):
        oidn_gpu.denoise(srgb, hdr=True, backend="reference")
    path = io.write_image_atomic(tmp_path / "c.png", srgb)
    result = cli("denoise", path, "--hdr", "-o", tmp_path / "o.png", "--no-progress")
    assert result.rc == 1
    assert f"--hdr cannot be used with '{path}': its uint8 pixels hold LDR values" in result.err
    assert "as the API refuses integer arrays with hdr=True" in result.err
    assert not (tmp_path / "o.png").exists()
    assert cli("denoise", path, "--srgb", "-o", tmp_path / "o.png").rc == 0
