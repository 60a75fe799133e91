"""``oidn-gpu bench --temporal SEQUENCE``: temporal mode's quality report against per-frame
denoising (flicker, per-frame error, revealed pixels' error), per backend."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from oidn_gpu.cli import bench_temporal as bt
from oidn_gpu.cli.main import main
from oidn_gpu.image import io
from oidn_gpu.image import temporal_metric as tm
from tests.bench_scripts import load

SEQUENCES = Path(__file__).resolve().parents[1] / "data" / "sequences"


def _first_frames(tmp_path: Path, name: str, count: int) -> Path:
    """A copy of the first ``count`` frames of a repository sequence (a faster test)."""
    src, dst = SEQUENCES / name, tmp_path / name
    (dst / "reference").mkdir(parents=True)
    for path in sorted(src.glob("*.exr"))[:count]:
        shutil.copy(path, dst / path.name)
        shutil.copy(src / "reference" / path.name, dst / "reference" / path.name)
    return dst


def test_the_json_report_is_the_metric_of_both_methods(tmp_path, capsys):
    sequence = _first_frames(tmp_path, "objects", 4)
    assert main(["bench", "--temporal", str(sequence), "--backend", "reference", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["schema"], report["schema_version"]) == ("oidn-gpu.bench-temporal", 1)
    rows = report["rows"]
    assert [(r["sequence"], r["backend"], r["method"]) for r in rows] == [
        ("objects", "reference", "per-frame"),
        ("objects", "reference", "temporal"),
    ]
    frames = bt.load_sequence(sequence)
    masks = bt.revealed_masks(frames)
    assert all(m.any() for m in masks[1:])  # the moving objects reveal what they covered
    single = bt.per_frame(frames, "reference", {})
    temporal = bt.temporal(frames, "reference", {}, {})
    motions = [f.vectors for f in frames]
    references = [f.reference for f in frames]
    expected = [tm.sequence_metrics(out, references, motions, masks) for out in (single, temporal)]
    for row, metric in zip(rows, expected, strict=True):
        assert row["frames"] == 4
        assert row["flicker"] == pytest.approx(metric.instability, rel=1e-9)
        assert row["psnr_db"] == pytest.approx(metric.mean_psnr_db, rel=1e-9)
        assert row["revealed_psnr_db"] == pytest.approx(metric.disoccluded_psnr_db, rel=1e-9)
        assert row["revealed_pixels"] == sum(metric.disoccluded_pixels)
    per_frame, temporal_row = rows
    assert temporal_row["flicker_lower"] == pytest.approx(
        per_frame["flicker"] / temporal_row["flicker"]
    )
    worst = max(
        tm.relative_l2(t, r) / tm.relative_l2(s, r)
        for t, s, r in zip(temporal, single, references, strict=True)
    )
    assert temporal_row["worst_frame_error_ratio"] == pytest.approx(worst)
    ratio = 10 ** ((per_frame["revealed_psnr_db"] - temporal_row["revealed_psnr_db"]) / 20)
    assert temporal_row["revealed_error_ratio"] == pytest.approx(ratio)
    assert per_frame["meets_bars"] is None and isinstance(temporal_row["meets_bars"], bool)


def test_the_table_names_the_backend_and_the_parameters_change_the_result(tmp_path, capsys):
    sequence = _first_frames(tmp_path, "moving", 3)
    assert main(["bench", "--temporal", str(sequence), "--backend", "reference"]) == 0
    table = capsys.readouterr().out
    lines = [line for line in table.splitlines() if line.startswith("| moving")]
    assert len(lines) == 2 and "| reference | per-frame |" in lines[0]
    assert "| reference | temporal |" in lines[1]
    assert (
        main(
            [
                "bench",
                "--temporal",
                str(sequence),
                "--json",
                "--param",
                "history=1",
                "--param",
                "output_blend=1.0",
                "--param",
                "firefly_ratio=0",
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)["rows"]
    # without history temporal mode is per-frame denoising
    assert rows[1]["flicker"] == pytest.approx(rows[0]["flicker"], rel=1e-6)
    assert rows[1]["psnr_db"] == pytest.approx(rows[0]["psnr_db"], rel=1e-6)


def test_bad_sequences_and_parameters_are_clear_errors(tmp_path, capsys):
    assert main(["bench", "--temporal", str(tmp_path / "missing")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    sequence = _first_frames(tmp_path, "moving", 2)
    (sequence / "reference" / "frame.0002.exr").unlink()
    assert main(["bench", "--temporal", str(sequence)]) == 2
    assert "no reference for" in capsys.readouterr().err
    good = _first_frames(tmp_path / "other", "moving", 2)
    assert main(["bench", "--temporal", str(good), "--param", "histroy=2"]) == 2
    assert "histroy" in capsys.readouterr().err


def _object_ids(path: Path) -> np.ndarray:
    layer = io.match_layer(io.list_layers(path), "IndexOB")
    return np.rint(io.read_layer(path, layer.channels[0]).pixels[..., 0]).astype(int)


@pytest.mark.parametrize("name", ["objects", "objects_pan"])
def test_moving_object_sequences_hold_exact_motion(name):
    """The rendered motion carries each pixel of a moving object to where the previous
    frame's object ID pass shows the same object (off its edges, where the pixel filter
    mixes objects), and the uncovered background is found; with a still camera the
    background's motion is exactly 0."""
    frames = bt.load_sequence(SEQUENCES / name)
    paths = sorted((SEQUENCES / name).glob("*.exr"))
    ids = [_object_ids(p) for p in paths]
    masks = bt.revealed_masks(frames)
    for t in range(1, len(frames)):
        vectors = frames[t].vectors
        height, width = ids[t].shape
        ys, xs = np.mgrid[0:height, 0:width]
        px = np.rint(xs + vectors[..., 0]).astype(int)
        py = np.rint(ys + vectors[..., 1]).astype(int)
        inside = (px >= 0) & (px < width) & (py >= 0) & (py < height)
        for index in (1, 2):
            on = (ids[t] == index) & inside & ~masks[t]
            landed = ids[t - 1][py[on], px[on]] == index
            assert on.sum() > 30 and landed.mean() > 0.97, (t, index, landed.mean())
        if name == "objects":
            assert (vectors[ids[t] == 0] == 0).mean() > 0.99
        assert masks[t].sum() > 50  # the moving objects uncover what they covered


@pytest.mark.parametrize("name", ["objects", "objects_pan"])
def test_a_one_frame_firefly_does_not_become_a_blob(name):
    """A sample of radiance 200 in one frame (where its surroundings hold about 0.2):
    per-frame denoising spreads it into a blob; temporal mode limits it by the history
    before the network (accumulated input on the still camera, the previous output under
    the pan, where nothing accumulates)."""
    frames = bt.load_sequence(SEQUENCES / name)[:6]
    t, y, x = 5, 40, 30
    color = frames[t].color.copy()
    color[y, x] = 200.0
    hit = [*frames[:t], dataclasses.replace(frames[t], color=color)]

    def blob(method, *args):
        clean, fired = method(frames, "reference", *args), method(hit, "reference", *args)
        return np.abs(fired[t] - clean[t]).mean(axis=2)

    single = blob(bt.per_frame, {})
    temporal = blob(bt.temporal, {}, {})
    assert (single > 0.05).sum() >= 8  # a blob per frame
    assert temporal.sum() < 0.1 * single.sum()
    assert temporal.max() < 0.05


@pytest.mark.parametrize(("name", "lower"), [("objects", 1.5), ("objects_pan", 1.2)])
def test_temporal_mode_on_moving_objects(name, lower):
    """docs/benchmarks.md's table on the moving-object sequences (reference backend): less
    flicker (measured 1.62x and 1.34x lower: the flicker bar of 2x is not met there), a
    higher mean PSNR, no frame's error above per-frame denoising's (the glass sphere's
    silhouette over the floor under the pan made frame 9 4.8% worse before the normals
    decided the output history there), and the revealed pixels within 10% of per-frame
    denoising's error (measured 1.1% higher and 1.2% lower)."""
    per_frame, temporal = bt.measure(name, bt.load_sequence(SEQUENCES / name), "reference", {}, {})
    assert temporal.flicker_lower >= lower
    assert temporal.psnr_db >= per_frame.psnr_db
    assert temporal.worst_frame_error_ratio <= bt.FRAME_ERROR_SLACK
    assert temporal.revealed_error_ratio <= 1.05


@pytest.mark.parametrize(("name", "floor"), [("objects", 2.6), ("objects_pan", 2.1)])
def test_a_stable_output_without_the_detail_of_what_moves_flickers_by_the_metric(name, floor):
    """docs/benchmarks.md: the converged reference blurred by 0.7 px, noise-free and
    perfectly stable in time, scores only 2.50x and 2.03x lower flicker than per-frame
    denoising on the moving-object sequences (7.58x on the still ``static``): the metric
    counts detail lost on what moves as flicker (``bench/temporal_mode.py --sources``)."""
    sources = load("temporal_mode")
    frames = bt.load_sequence(SEQUENCES / name)
    references = [f.reference for f in frames]
    motions = [f.vectors for f in frames]
    base = tm.temporal_instability(bt.per_frame(frames, "reference", {}), references, motions)
    stable = [sources.blurred(r, 0.7) for r in references]
    assert 1.5 < base / tm.temporal_instability(stable, references, motions) < floor
    assert tm.temporal_instability(references, references, motions) == 0.0
