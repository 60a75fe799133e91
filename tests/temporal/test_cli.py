"""``oidn-gpu denoise frames/ --temporal``: the frames of a Mitsuba sequence folder in
order, the same images as `TemporalDenoiser`, restarts said, bad motion layers refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from oidn_gpu import TemporalDenoiser
from oidn_gpu.cli import main
from oidn_gpu.image import io
from oidn_gpu.image import motion as motion_passes
from oidn_gpu.sequence.temporal_frames import frame_number, read_depth
from tests.temporal.cli_runs import SEQUENCES, copy_frames

SEQUENCE = SEQUENCES / "static"


@pytest.fixture
def frames(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("OIDN_GPU_BACKEND", "reference")
    return copy_frames(tmp_path / "in", "static", (1, 2, 3, 5))  # 4 is missing: a gap


def _expected(folder: Path) -> list[np.ndarray]:
    outputs = []
    with TemporalDenoiser(hdr=True, backend="reference") as td:
        for path in sorted(folder.glob("*.exr")):
            layers = io.list_layers(path)
            color = io.read_layer(path, io.find_layer(layers, io.COLOR_LAYER_NAMES)).pixels
            albedo = io.read_layer(path, io.find_layer(layers, io.ALBEDO_LAYER_NAMES)).pixels
            normal = io.read_layer(path, io.find_layer(layers, io.NORMAL_LAYER_NAMES)).pixels
            motion = motion_passes.read_motion(path)
            vectors = np.where(motion.invalid[..., None], np.nan, motion.backward)
            outputs.append(
                td.denoise(
                    color[..., :3],
                    albedo,
                    normal,
                    motion=vectors,
                    depth=read_depth(path),
                    frame=frame_number(path),
                )
            )
    return outputs


def test_cli_temporal_denoises_in_order_and_says_where_it_restarts(frames, tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["denoise", str(frames), "-o", f"{out}/", "--temporal", "--mkdir", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "frame 5 follows frame 3 (a gap in the numbering)" in err
    expected = _expected(frames)
    for path, want in zip(sorted(out.glob("*.exr")), expected, strict=True):
        layers = io.list_layers(path)
        got = io.read_layer(path, io.find_layer(layers, io.COLOR_LAYER_NAMES)).pixels[..., :3]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)  # EXR half or float
    per_frame = tmp_path / "per_frame"
    assert main(["denoise", str(frames), "-o", f"{per_frame}/", "--mkdir", "--no-progress"]) == 0
    second = sorted(per_frame.glob("*.exr"))[1]
    plain = io.read_layer(
        second, io.find_layer(io.list_layers(second), io.COLOR_LAYER_NAMES)
    ).pixels[..., :3]
    assert not np.allclose(plain, expected[1], rtol=1e-2)  # the history changed frame 2


def test_cli_temporal_names_a_missing_motion_layer(frames, tmp_path, capsys):
    rc = main(
        [
            "denoise",
            str(frames),
            "-o",
            f"{tmp_path / 'out'}/",
            "--temporal",
            "--mkdir",
            "--no-progress",
            "--motion-layer",
            "ViewLayer.Nope",
        ]
    )
    err = capsys.readouterr().err
    assert rc != 0
    assert "ViewLayer.Nope" in err


@pytest.mark.parametrize(
    "args, message",
    [(["--motion-layer", "X"], "add --temporal"), (["--temporal", "--aovs", "A"], "--aovs")],
)
def test_cli_temporal_flags_are_checked(frames, tmp_path, capsys, args, message):
    rc = main(["denoise", str(frames), "-o", f"{tmp_path / 'out'}/", "--mkdir", *args])
    assert rc != 0
    assert message in capsys.readouterr().err
