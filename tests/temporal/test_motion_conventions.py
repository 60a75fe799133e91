"""Motion passes under any name, in every renderer's convention: ``--motion-layer
NAME:CONVENTION`` / ``--motion-convention`` on the command line and ``motion_convention=``
in the API give the images of the renderer's own pass; bad names are refused once, before
the first frame."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu import TemporalDenoiser
from oidn_gpu.cli import main
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import exr, io
from oidn_gpu.image import motion as motion_passes
from tests.temporal.cli_runs import SEQUENCES, TINY, copy_frames, run_temporal

SEQUENCE = SEQUENCES / "moving"
NUMBERS = (1, 2, 3)


def _layout(backward: np.ndarray, convention: str) -> np.ndarray:
    """Canonical backward motion written as ``convention`` writes its pass (the inverse of
    `oidn_gpu.image.motion.convert` for the backward motion)."""
    conv = motion_passes.CONVENTIONS[convention]
    bx, by = backward[..., 0], backward[..., 1]
    if conv.kind == motion_passes.CYCLES:
        return motion_passes.cycles_vector(backward, -backward)
    if conv.kind == motion_passes.VELOCITY:  # forward = -backward, y up
        return np.stack([-bx, by], axis=-1)
    return np.stack([bx, -by if conv.y_up else by], axis=-1)


def _renamed(folder: Path, convention: str, name: str = "mv") -> Path:
    """The sequence with its Cycles Vector pass replaced by layer ``name`` holding the same
    motion in ``convention``."""
    folder.mkdir()
    for number in NUMBERS:
        source = SEQUENCE / f"frame.{number:04d}.exr"
        backward = motion_passes.read_motion(source).backward
        values = _layout(backward, convention)
        contents = exr.read_file(source)
        keep = [
            c
            for layer in io.list_layers(source)
            if "Vector" not in layer.name
            for c in layer.channels
        ]
        components = "XYZW"[: values.shape[2]]
        like = [f"ViewLayer.Vector.{c}" for c in "XYZW"[: values.shape[2]]]
        contents.add_channels(0, [f"{name}.{c}" for c in components], values, like)
        contents.keep_only(0, keep + [f"{name}.{c}" for c in components])
        exr.write_file(folder / source.name, contents)
    return folder


def _beauties(folder: Path) -> list[np.ndarray]:
    out = []
    for path in sorted(folder.glob("*.exr")):
        layer = io.find_layer(io.list_layers(path), io.COLOR_LAYER_NAMES)
        out.append(io.read_layer(path, layer).pixels)
    return out


@pytest.fixture(scope="module")
def renderer_run(tmp_path_factory) -> list[np.ndarray]:
    """The sequence denoised with its own Cycles Vector pass."""
    root = tmp_path_factory.mktemp("renderer")
    inputs = copy_frames(root / "in", "moving", NUMBERS)
    assert (
        main(
            [
                "denoise",
                str(inputs),
                "-o",
                f"{root / 'out'}/",
                "--temporal",
                "--mkdir",
                "--no-progress",
                "-q",
                "--backend",
                "reference",
                "--weights",
                str(TINY),
            ]
        )
        == 0
    )
    return _beauties(root / "out")


@pytest.mark.parametrize("convention", sorted(motion_passes.CONVENTIONS))
def test_every_convention_is_read_from_a_named_layer_on_the_command_line(
    convention, renderer_run, tmp_path, capsys
):
    inputs = _renamed(tmp_path / "in", convention)
    rc, err, summary = run_temporal(
        capsys, inputs, tmp_path / "out", "--motion-layer", f"mv:{convention}"
    )
    assert rc == 0, err
    for got, want in zip(_beauties(tmp_path / "out"), renderer_run, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    frame = summary["results"][1]["layers"]["temporal"]
    assert (frame["motion"], frame["motion_convention"]) == ("mv", convention)
    assert f"temporal: motion 'mv' ({convention})" in err
    # the same with the convention as its own flag
    rc, err, _ = run_temporal(
        capsys, inputs, tmp_path / "flag", "--motion-layer", "mv", "--motion-convention", convention
    )
    assert rc == 0, err
    for got, want in zip(_beauties(tmp_path / "flag"), renderer_run, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_renderers_layer_name_needs_no_convention_and_can_be_given_one(tmp_path, capsys):
    inputs = copy_frames(tmp_path / "in", "moving", NUMBERS)
    rc, err, summary = run_temporal(capsys, inputs, tmp_path / "out", "--motion-layer", "Vector")
    assert rc == 0, err
    assert summary["results"][0]["layers"]["temporal"]["motion_convention"] == "cycles"
    rc, err, summary = run_temporal(
        capsys, inputs, tmp_path / "conv", "--motion-convention", "cycles"
    )
    assert rc == 0, err


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--motion-layer", "mv"],
            "motion layer 'mv' is not a name a renderer gives its motion pass; name its "
            "convention: 'mv:CONVENTION' (or --motion-convention)",
        ),
        (
            ["--motion-layer", "mv:pixel"],
            "unknown motion convention 'pixel' (did you mean 'pixels'?)",
        ),
        (["--motion-convention", "blender"], "unknown motion convention 'blender'"),
        (
            ["--motion-layer", "mv:cycles", "--motion-convention", "pixels"],
            "names the convention 'cycles' but --motion-convention is 'pixels'",
        ),
        (["--motion-layer", ":pixels"], "names no layer"),
        (["--motion-layer", "Nope:pixels"], "has no layer 'Nope' (motion layer)"),
    ],
)
def test_bad_motion_flags_are_one_usage_error_before_any_frame(flags, message, tmp_path, capsys):
    inputs = _renamed(tmp_path / "in", "pixels")
    rc, err, summary = run_temporal(capsys, inputs, tmp_path / "out", *flags)
    assert rc == 2, err
    assert message in err, err
    assert err.count("error") == 1, err  # once, not per frame
    assert summary["exit_code"] == 2 and message in summary["error"]
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_sequence_without_motion_fails_once_naming_what_it_has(tmp_path, capsys):
    inputs = _renamed(tmp_path / "in", "pixels", name="velocity_not_known")
    rc, err, _ = run_temporal(capsys, inputs, tmp_path / "out")
    assert rc == 2
    assert err.count("has no motion pass") == 1, err
    assert "velocity_not_known" in err and "--motion-layer" in err


def test_motion_flags_need_temporal(tmp_path, capsys):
    inputs = copy_frames(tmp_path / "in", "moving", NUMBERS)
    rc = main(
        ["denoise", str(inputs), "-o", f"{tmp_path}/o/", "--mkdir", "--motion-convention", "pixels"]
    )
    assert rc == 2
    assert "--motion-convention names the motion pass of --temporal" in capsys.readouterr().err


def _frames() -> list[dict]:
    frames = []
    for number in NUMBERS:
        path = SEQUENCE / f"frame.{number:04d}.exr"
        layers = io.list_layers(path)
        frames.append(
            {
                "color": io.read_layer(path, io.find_layer(layers, io.COLOR_LAYER_NAMES)).pixels,
                "albedo": io.read_layer(path, io.find_layer(layers, io.ALBEDO_LAYER_NAMES)).pixels,
                "normal": io.read_layer(path, io.find_layer(layers, io.NORMAL_LAYER_NAMES)).pixels,
                "backward": motion_passes.read_motion(path).backward,
                "frame": number,
            }
        )
    return frames


@pytest.mark.parametrize("convention", sorted(motion_passes.CONVENTIONS))
def test_the_api_reads_every_convention(convention):
    frames = _frames()
    options = {"hdr": True, "backend": "reference", "weights": str(TINY)}
    with (
        TemporalDenoiser(**options) as pixels,
        oidn_gpu.Denoiser(temporal=True, motion_convention=convention, **options) as named,
    ):
        assert named.info().motion_convention == convention
        for f in frames:
            images = (f["color"], f["albedo"], f["normal"])
            want = pixels.denoise(*images, motion=f["backward"], frame=f["frame"])
            got = named.denoise(
                *images, motion=_layout(f["backward"], convention), frame=f["frame"]
            )
            np.testing.assert_array_equal(got, want)


def test_the_api_refuses_an_unknown_convention_and_a_pass_of_another_layout():
    with pytest.raises(
        InvalidArgumentError,
        match=r"unknown motion convention 'cycle' "
        r"\(did you mean 'cycles'\?\); expected 'cycles', 'arnold'",
    ):
        TemporalDenoiser(backend="reference", motion_convention="cycle")
    with pytest.raises(InvalidArgumentError, match="motion_convention is a temporal mode"):
        oidn_gpu.Denoiser(backend="reference", motion_convention="cycles")
    f = _frames()[0]
    cycles = TemporalDenoiser(hdr=True, backend="reference", motion_convention="cycles")
    with (
        cycles as td,
        pytest.raises(
            InvalidArgumentError,
            match=r"motion \(motion_convention='cycles'\) image has shape "
            r"\(64, 64, 2\).*expected a float HxWx4",
        ),
    ):
        td.denoise(f["color"], f["albedo"], f["normal"], motion=f["backward"])


def test_a_later_frame_without_motion_fails_alone_and_the_next_restarts_saying_why(
    tmp_path, capsys
):
    inputs = copy_frames(tmp_path / "in", "moving", NUMBERS)
    shutil.copy(SEQUENCE / "frame.0004.exr", inputs)
    second = inputs / "frame.0002.exr"
    contents = exr.read_file(second)
    keep = [
        c for layer in io.list_layers(second) if "Vector" not in layer.name for c in layer.channels
    ]
    contents.keep_only(0, keep)
    exr.write_file(second, contents)
    rc, err, summary = run_temporal(capsys, inputs, tmp_path / "out")
    assert rc == 1
    assert [r["status"] for r in summary["results"]] == ["done", "failed", "done", "done"]
    assert "has no motion pass" in summary["results"][1]["error"]
    assert err.count("has no motion pass") == 1
    assert summary["temporal"]["restarts"] == [
        {
            "input": str(inputs / "frame.0003.exr"),
            "reason": "the frame before, 'frame.0002.exr', has no usable motion pass and "
            "was not denoised",
        }
    ]
