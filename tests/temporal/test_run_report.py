"""What a temporal run says: the log, ``--json`` and ``TemporalDenoiser.info()`` name the
mode, the motion and depth passes and their convention, each history restart and why (a
gap, a size change, a camera cut, a resume's warm-up), and a missing depth pass; unknown
keyword options get the closest valid name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu import TemporalDenoiser
from oidn_gpu.cli import main
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import exr, io
from oidn_gpu.image import motion as motion_passes
from oidn_gpu.sequence.temporal_frames import read_depth
from tests.temporal.cli_runs import SEQUENCES, TINY, copy_frames, run_temporal


def _folder(tmp_path: Path, numbers, *, depth: bool = True, name: str = "in") -> Path:
    if depth:
        return copy_frames(tmp_path / name, "static", numbers)
    folder = tmp_path / name
    folder.mkdir()
    for number in numbers:
        source = SEQUENCES / "static" / f"frame.{number:04d}.exr"
        contents = exr.read_file(source)
        keep = [
            c
            for layer in io.list_layers(source)
            if "Depth" not in layer.name
            for c in layer.channels
        ]
        contents.keep_only(0, keep)
        exr.write_file(folder / source.name, contents)
    return folder


def test_the_log_and_json_name_the_mode_the_passes_and_each_restart(tmp_path, capsys):
    inputs = _folder(tmp_path, (1, 2, 3, 5))  # 4 is missing: a gap
    rc, err, summary = run_temporal(capsys, inputs, tmp_path / "out")
    assert rc == 0, err
    words = "temporal: motion 'ViewLayer.Vector' (cycles), depth 'ViewLayer.Depth'"
    assert err.count(words) == 5  # each frame's line and the summary's layers line
    frame5 = str(inputs / "frame.0005.exr")
    assert (
        "temporal: history restarted at 1 frame (" + frame5 + ": frame 5 follows "
        "frame 3 (a gap in the numbering))"
    ) in err
    assert summary["temporal"] == {
        "mode": "temporal",
        "restarts": [
            {"input": frame5, "reason": "frame 5 follows frame 3 (a gap in the numbering)"}
        ],
        "warmed_up": 0,
        "no_depth": 0,
    }
    frames = [r["layers"]["temporal"] for r in summary["results"]]
    assert [f["history"] for f in frames] == ["started", "continued", "continued", "restarted"]
    assert [f["restart"] for f in frames] == [
        "the first frame",
        None,
        None,
        "frame 5 follows frame 3 (a gap in the numbering)",
    ]
    for f in frames:
        assert (f["mode"], f["motion"], f["motion_convention"], f["depth"]) == (
            "temporal",
            "ViewLayer.Vector",
            "cycles",
            "ViewLayer.Depth",
        )
    assert frames[0]["history_fraction"] == 0.0 < frames[1]["history_fraction"] <= 1.0


def test_a_missing_depth_pass_is_said_once_and_is_optional(tmp_path, capsys):
    inputs = _folder(tmp_path, (1, 2, 3), depth=False)
    rc, err, summary = run_temporal(capsys, inputs, tmp_path / "out")
    assert rc == 0, err
    assert err.count("no depth pass (looked for Depth, Z, depth); depth is optional") == 1
    assert "temporal: motion 'ViewLayer.Vector' (cycles), no depth" in err
    assert "3 frame(s) without a depth pass (depth is optional)" in err
    assert summary["temporal"]["no_depth"] == 3
    assert all(r["layers"]["temporal"]["depth"] is None for r in summary["results"])


def test_a_resume_says_which_frames_warmed_the_history(tmp_path, capsys):
    inputs = _folder(tmp_path, (1, 2, 3, 4, 5))
    out = tmp_path / "out"
    rc, err, _ = run_temporal(capsys, inputs, out)
    assert rc == 0, err
    for number in (4, 5):
        (out / f"frame.{number:04d}.exr").unlink()
    rc, err, summary = run_temporal(capsys, inputs, out, "--skip-existing")
    assert rc == 0, err
    history = [r["layers"]["temporal"]["history"] for r in summary["results"]]
    assert history == ["warm-up started", "warmed up", "warmed up", "continued", "continued"]
    assert [r["status"] for r in summary["results"]] == ["skipped"] * 3 + ["done"] * 2
    assert summary["temporal"]["warmed_up"] == 3 and summary["temporal"]["restarts"] == []
    assert "3 complete frame(s) denoised again for the history" in err
    assert (
        "frame 2/5 " + str(inputs / "frame.0002.exr") + ": complete, denoised again for "
        "the history (warmed up)" in err
    )


def _images(number: int, sequence: str = "static") -> dict:
    path = SEQUENCES / sequence / f"frame.{number:04d}.exr"
    layers = io.list_layers(path)
    return {
        "color": io.read_layer(path, io.find_layer(layers, io.COLOR_LAYER_NAMES)).pixels,
        "albedo": io.read_layer(path, io.find_layer(layers, io.ALBEDO_LAYER_NAMES)).pixels,
        "normal": io.read_layer(path, io.find_layer(layers, io.NORMAL_LAYER_NAMES)).pixels,
        "motion": motion_passes.read_motion(path).backward,
        "depth": read_depth(path),
        "frame": number,
    }


def _cropped(images: dict) -> dict:
    return {k: (v[:32, :32] if isinstance(v, np.ndarray) else v) for k, v in images.items()}


def test_info_names_the_mode_the_history_and_every_restart():
    with TemporalDenoiser(hdr=True, backend="reference", weights=str(TINY), history=4) as td:
        info = td.info()
        assert (info.mode, info.backend, info.session, info.motion_convention) == (
            "temporal",
            "reference",
            "host",
            "pixels",
        )
        assert info.frames == info.history_frames == 0 and info.restarts == ()
        assert info.params["history"] == 4 and info.denoiser is None
        td.denoise(**_images(1))
        td.denoise(**_images(2))
        info = td.info()
        assert (info.frames, info.history_frames, info.guides, info.depth) == (2, 2, "depth", True)
        assert info.history_fraction == td.history_fraction > 0.5
        assert info.denoiser.backend == "reference"
        td.denoise(**_cropped(_images(3)))
        assert td.info().last_restart.reason == "the size changed from 64x64 to 32x32"
        td.denoise(**{**_cropped(_images(4)), "depth": None})
        info = td.info()
        assert (info.guides, info.depth, info.history_frames) == ("albedo and normal", False, 1)
        assert "the images given changed" in info.last_restart.reason
        td.reset("a new shot")
        td.denoise(**_images(5))
        assert [r.reason for r in td.info().restarts][-1] == "a new shot"


def test_info_says_a_camera_cut():
    with TemporalDenoiser(hdr=True, backend="reference", weights=str(TINY)) as td:
        td.denoise(**_images(1))
        second = _images(2)
        td.denoise(**{**second, "depth": second["depth"] * 3})  # everything moved away
        assert "a camera cut" in td.info().last_restart.reason


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: TemporalDenoiser(histroy=4),
            "unknown option 'histroy' of the temporal denoiser (did you mean 'history'?)",
        ),
        (lambda: oidn_gpu.Denoiser(temporal=True, histroy=4), "did you mean 'history'?"),
        (lambda: TemporalDenoiser(qualty="fast"), "did you mean 'quality'?"),
        (lambda: TemporalDenoiser(backend="reference", treads=2), "did you mean 'threads'?"),
        (lambda: TemporalDenoiser(colour=1), "unknown option 'colour'"),
    ],
)
def test_unknown_options_name_the_closest_and_every_valid_one(make, message):
    with pytest.raises(InvalidArgumentError) as raised:
        make()
    text = str(raised.value)
    assert message in text
    for name in ("'history'", "'output_blend'", "'motion_convention'", "'hdr'", "'backend'"):
        assert name in text


def test_list_layers_shows_the_motion_and_depth_a_temporal_run_uses(tmp_path, capsys):
    with_depth = _folder(tmp_path, (1,)) / "frame.0001.exr"
    without = _folder(tmp_path, (1,), depth=False, name="no_depth") / "frame.0001.exr"
    assert main(["denoise", "--list-layers", "--temporal", str(with_depth), str(without)]) == 0
    out = capsys.readouterr().out
    assert out.count("  -> motion: 'ViewLayer.Vector' (cycles)") == 2
    assert "  -> depth: 'ViewLayer.Depth'" in out
    assert "  -> depth: none found (optional)" in out
