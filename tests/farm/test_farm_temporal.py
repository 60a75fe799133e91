"""Temporal mode on the farm (a local Ray instance): chunks with warm-up history give the
single-process frames; warm-up frames are not written; one result per frame."""

from __future__ import annotations

import io as stdio
import shutil
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from oidn_gpu import sequence
from oidn_gpu.config import DenoiserConfig, FilterOptions
from oidn_gpu.farm import temporal_chunks as chunks
from oidn_gpu.farm.driver import FarmOptions
from oidn_gpu.farm.temporal import chunk_jobs, denoise_sequence_temporal
from oidn_gpu.image import io
from oidn_gpu.sequence.temporal_frames import TemporalFrames

pytestmark = pytest.mark.usefixtures("ray_instance")

SEQUENCE = Path(__file__).resolve().parents[1] / "data" / "sequences" / "static"
CONFIG = DenoiserConfig.create(FilterOptions(quality="balanced"), backend="reference")


def _jobs(folder: Path, out: Path) -> list[sequence.FrameJob]:
    return [sequence.FrameJob(p, out / p.name) for p in sorted(folder.glob("*.exr"))]


def test_farm_chunks_equal_the_single_process_temporal_output(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for number in range(1, 7):
        shutil.copy(SEQUENCE / f"frame.{number:04d}.exr", folder)
    single, farmed = tmp_path / "single", tmp_path / "farm"
    single.mkdir()
    farmed.mkdir()
    with threadpool_limits(limits=1):  # as each worker of one CPU
        temporal = TemporalFrames()
        summary = sequence.run_sequence(
            _jobs(folder, single), CONFIG, sequence.SequenceOptions(quiet=True), temporal=temporal
        )
        temporal.close()
    assert summary.count("done") == 6, summary.failed
    summary = denoise_sequence_temporal(
        _jobs(folder, farmed),
        CONFIG,
        sequence.SequenceOptions(show_progress=False),
        FarmOptions(workers=2),
        chunks=3,
        warmup=chunks.DEFAULT_WARMUP,
        stream=stdio.StringIO(),
    )
    assert [r.status for r in summary.results] == ["done"] * 6
    assert [r.job.color.name for r in summary.results] == [
        f"frame.{n:04d}.exr" for n in range(1, 7)
    ]
    assert sorted(p.name for p in farmed.iterdir()) == sorted(p.name for p in single.iterdir())
    for path in sorted(single.iterdir()):
        np.testing.assert_array_equal(
            io.read_image(farmed / path.name).pixels, io.read_image(path).pixels
        )


def test_chunks_are_contiguous_with_their_warmup(tmp_path):
    jobs = [
        sequence.FrameJob(tmp_path / f"f.{i:04d}.exr", tmp_path / f"o.{i:04d}.exr")
        for i in range(10)
    ]
    units = chunk_jobs(jobs, 3, 2, {"history": 4}, "Vector")
    assert [[j.color.name for j in u.frames] for u in units] == [
        [f"f.{i:04d}.exr" for i in r] for r in (range(0, 3), range(3, 6), range(6, 10))
    ]
    assert [[j.color.name for j in u.warmup] for u in units] == [
        [],
        ["f.0001.exr", "f.0002.exr"],
        ["f.0004.exr", "f.0005.exr"],
    ]
    assert units[1].color == jobs[3].color.absolute() and units[1].first_index == 3
    assert units[0].params == (("history", 4),) and units[0].motion_layer == "Vector"


def test_farm_temporal_resume_skips_complete_frames_and_writes_the_same_files(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for number in range(1, 7):
        shutil.copy(SEQUENCE / f"frame.{number:04d}.exr", folder)
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    whole.mkdir()

    def farm(out: Path, skip: bool) -> list[str]:
        summary = denoise_sequence_temporal(
            _jobs(folder, out),
            CONFIG,
            sequence.SequenceOptions(show_progress=False, skip_existing=skip),
            FarmOptions(workers=2),
            chunks=2,
            warmup=1,
            stream=stdio.StringIO(),
        )
        return [r.status for r in summary.results]

    assert farm(whole, False) == ["done"] * 6
    shutil.copytree(whole, resumed)
    # interrupted: the first chunk (frames 1-3) lacks frame 3, the second is complete
    (resumed / "frame.0003.exr").unlink()
    kept = {p.name: p.stat().st_mtime_ns for p in resumed.iterdir()}
    assert farm(resumed, True) == ["skipped", "skipped", "done"] + ["skipped"] * 3
    for path in sorted(whole.iterdir()):
        assert (resumed / path.name).read_bytes() == path.read_bytes(), path.name
    for name, mtime in kept.items():
        assert (resumed / name).stat().st_mtime_ns == mtime, name


def test_farm_chunks_carry_summed_passes_with_their_warmup_history(tmp_path):
    """``--aovs-sum`` on the farm: each chunk's warm-up frames carry the light groups'
    history too, so every frame's passes are the single process's."""
    from tests.temporal.test_cli_aovs import with_light_groups

    folder = tmp_path / "in"
    folder.mkdir()
    for number in range(1, 5):
        name = f"frame.{number:04d}.exr"
        with_light_groups(SEQUENCE / name, folder / name)
    options = sequence.SequenceOptions(
        quiet=True, output=sequence.OutputOptions(aovs_sum=("key", "fill"))
    )
    single, farmed = tmp_path / "single", tmp_path / "farm"
    single.mkdir()
    farmed.mkdir()
    with threadpool_limits(limits=1):  # as each worker of one CPU
        temporal = TemporalFrames()
        summary = sequence.run_sequence(_jobs(folder, single), CONFIG, options, temporal=temporal)
        temporal.close()
    assert summary.count("done") == 4, summary.failed
    summary = denoise_sequence_temporal(
        _jobs(folder, farmed),
        CONFIG,
        options,
        FarmOptions(workers=2),
        chunks=2,
        warmup=chunks.DEFAULT_WARMUP,
        stream=stdio.StringIO(),
    )
    assert [r.status for r in summary.results] == ["done"] * 4
    for path in sorted(single.iterdir()):
        for layer in ("ViewLayer.Combined", "ViewLayer.key", "ViewLayer.fill"):
            np.testing.assert_array_equal(
                io.read_layer(farmed / path.name, layer).pixels, io.read_layer(path, layer).pixels
            )
