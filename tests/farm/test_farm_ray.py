"""oidn_gpu.farm on a local Ray instance (two CPUs): exactness, dead workers, retries, skips.

Every output is compared bit for bit with the single-process loop's output of the same
frame: both run `sequence.denoise_frame` on the reference backend with one BLAS thread
(each worker here has one CPU).
"""

from __future__ import annotations

import io as stdio
import logging
import os
import re
import signal
from pathlib import Path

import numpy as np
import pytest
from farm_support import CONFIG, FRAME_COUNT, jobs_for, write_frames
from farm_workers import (
    LoggingWorker,
    UnstartableWorker,
    crashing_worker,
    flaky_worker,
    interrupting_writer,
    leaving_worker,
)

from oidn_gpu import DenoiserConfig, FilterOptions, farm, sequence
from oidn_gpu.cli import main
from oidn_gpu.files import TEMP_PREFIX
from oidn_gpu.image import io

pytestmark = pytest.mark.usefixtures("ray_instance")


def _run(
    jobs,
    *,
    retries: int = farm.DEFAULT_RETRIES,
    worker_class=farm.FrameWorker,
    on_frame=None,
    **options,
) -> tuple[farm.FarmSummary, str]:
    stream = stdio.StringIO()
    options.setdefault("show_progress", False)  # a line per frame
    summary = farm.denoise_sequence(
        jobs,
        CONFIG,
        sequence.SequenceOptions(**options),
        farm.FarmOptions(retries=retries),
        stream=stream,
        worker_class=worker_class,
        on_frame=on_frame,
    )
    return summary, stream.getvalue()


def _assert_outputs_equal(out: Path, names: list[str], single_process: dict) -> None:
    """Every output exists, decodes, and equals the single-process output bit for bit."""
    assert sorted(p.name for p in out.iterdir()) == sorted(names)  # no temporary files left
    for name in names:
        np.testing.assert_array_equal(io.read_image(out / name).pixels, single_process[name])


def test_a_sequence_equals_the_single_process_output_and_a_rerun_redoes_only_broken_frames(
    frames: list[Path], single_process: dict, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    reported: list[farm.FarmFrameResult] = []
    summary, log = _run(jobs_for(frames, out), on_frame=reported.append)
    assert summary.count("done") == FRAME_COUNT, summary.failed
    assert sorted(reported, key=lambda r: r.index) == summary.results
    assert {r.worker for r in summary.results} <= set(summary.workers)
    assert 1 <= len(summary.workers) <= 2  # one per CPU; the second may start late
    assert [r.job.color for r in summary.results] == [p.absolute() for p in frames]
    lines = [line for line in log.splitlines() if line.startswith("frame ")]
    assert len(lines) == FRAME_COUNT  # a line per frame off a terminal
    first = summary.results[0]
    assert any(
        line.startswith(f"frame 1/{FRAME_COUNT} {first.job.color}: color")
        and line.endswith(f" -> {first.job.output} on {first.worker}")
        for line in lines
    )
    _assert_outputs_equal(out, [p.name for p in frames], single_process)
    # the workers' stage times reach the driver
    assert all(set(r.stages) == {"read", "denoise", "write"} for r in summary.results)
    assert all(r.stages["denoise"] > 0 for r in summary.results)

    # damage three outputs the way other tools might leave them
    truncated, wrong_size, missing = (out / frames[i].name for i in (3, 17, 38))
    truncated.write_bytes(truncated.read_bytes()[: truncated.stat().st_size // 2])
    io.write_image_atomic(wrong_size, np.zeros((8, 8, 3), np.float32))
    missing.unlink()
    untouched = out / frames[0].name
    stamp = untouched.stat().st_mtime_ns

    rerun, _ = _run(jobs_for(frames, out), skip_existing=True)
    redone = {r.job.output.name for r in rerun.results if r.status == "done"}
    assert redone == {truncated.name, wrong_size.name, missing.name}
    assert rerun.count("skipped") == FRAME_COUNT - 3
    assert untouched.stat().st_mtime_ns == stamp  # skipped frames are not written again
    _assert_outputs_equal(out, [p.name for p in frames], single_process)


def test_a_worker_that_crashes_mid_run_loses_no_frame(
    frames: list[Path], single_process: dict, tmp_path: Path
) -> None:
    subset = frames[:12]
    marker = tmp_path / "crashed"
    out = tmp_path / "out"
    summary, log = _run(jobs_for(subset, out), worker_class=crashing_worker(subset[5].name, marker))
    assert marker.exists()  # a worker process died holding frame 5
    assert summary.worker_deaths >= 1 and summary.lost >= 1
    assert summary.count("done") == len(subset), summary.failed
    assert "died" in log
    crashed = next(r for r in summary.results if r.job.color.name == subset[5].name)
    assert crashed.lost_attempts == 1 and crashed.status == "done"
    _assert_outputs_equal(out, [p.name for p in subset], single_process)


def test_a_worker_that_leaves_for_good_leaves_its_frames_to_the_others(
    frames: list[Path], single_process: dict, tmp_path: Path
) -> None:
    subset = frames[:8]
    marker = tmp_path / "left"
    out = tmp_path / "out"
    summary, _ = _run(jobs_for(subset, out), worker_class=leaving_worker(subset[2].name, marker))
    assert marker.exists()
    assert summary.workers_lost == 1
    assert summary.count("done") == len(subset), summary.failed
    left = marker.read_text()
    late = [r for r in summary.results if r.index > 2]
    assert late and all(left not in r.worker for r in late)  # the rest ran on the other one
    _assert_outputs_equal(out, [p.name for p in subset], single_process)


def test_a_failing_frame_is_retried_on_another_worker_then_reported(
    frames: list[Path], single_process: dict, tmp_path: Path
) -> None:
    inputs = write_frames(tmp_path / "in", 4)
    broken = inputs[1]
    broken.write_bytes(broken.read_bytes()[:100])  # every worker fails to read it
    marker = tmp_path / "flaked"
    summary, log = _run(
        jobs_for(inputs, tmp_path / "out"),
        worker_class=flaky_worker(inputs[2].name, marker),
        retries=2,
    )
    by_name = {r.job.color.name: r for r in summary.results}
    failed = by_name[broken.name]
    assert failed.status == "failed" and failed.failed_attempts == 3  # 1 + 2 retries
    assert broken.name in failed.error
    assert f"error: {broken.absolute()}: " in log
    flaked = by_name[inputs[2].name]
    assert marker.exists()  # (which worker retries it: test_farm_scheduler.py)
    assert flaked.status == "done" and flaked.failed_attempts == 1
    assert summary.count("done") == 3 and summary.retried == 3
    assert not (tmp_path / "out" / broken.name).exists()


def test_workers_that_cannot_start_fail_every_frame_with_the_reason(tmp_path: Path) -> None:
    inputs = write_frames(tmp_path / "in", 3)
    summary, log = _run(
        jobs_for(inputs, tmp_path / "out"), worker_class=UnstartableWorker, show_progress=True
    )
    assert summary.count("failed") == 3 and summary.workers_lost == 2
    assert all("pip install 'oidn-gpu[images]'" in r.error for r in summary.results)
    assert "pip install 'oidn-gpu[images]'" in log
    assert "3/3" in log  # the progress bar reached the end
    assert not (tmp_path / "out").exists()


def test_cli_ray_flag_runs_the_sequence_on_the_farm(
    frames: list[Path], single_process: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subset = frames[:6]
    src = tmp_path / "in"
    src.mkdir()
    for path in subset:
        (src / path.name).write_bytes(path.read_bytes())
    out = tmp_path / "out"
    argv = [
        "denoise",
        str(src),
        "-o",
        str(out),
        "--mkdir",
        "--backend",
        "reference",
        "--no-progress",
    ]
    assert main([*argv, "--ray", "--retries", "1"]) == 0
    err = capsys.readouterr().err
    assert "6 frames: 6 denoised, 0 skipped, 0 failed" in err
    assert re.search(r"on [12] workers?\n", err)  # the second may start after the last frame
    _assert_outputs_equal(out, [p.name for p in subset], single_process)


@pytest.mark.gpu
def test_wgpu_workers_without_ray_gpus_run_on_cpu_slots_like_the_single_process(
    frames: list[Path], tmp_path: Path
) -> None:
    """A cluster without GPU resources still runs the wgpu backend (lavapipe in CI)."""
    subset = frames[:3]
    config = DenoiserConfig.create(FilterOptions(quality="high"), backend="wgpu", precision="fp32")
    single = tmp_path / "single"
    done = sequence.run_sequence(jobs_for(subset, single), config)
    assert done.count("done") == len(subset), done.failed
    out = tmp_path / "out"
    summary = farm.denoise_sequence(
        jobs_for(subset, out),
        config,
        sequence.SequenceOptions(quiet=True),
        farm.FarmOptions(workers=1),
    )
    assert summary.count("done") == len(subset), summary.failed
    assert "CPU" in summary.workers[0]  # a CPU slot: the instance has no GPU resources
    for src in subset:
        np.testing.assert_array_equal(
            io.read_image(out / src.name).pixels, io.read_image(single / src.name).pixels
        )


def test_cli_ray_takes_a_frame_range_and_shows_outputs_through_the_view(
    frames: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--frames`` and ``--display``/``--view`` on the farm: the workers write what the
    single process writes."""
    src = tmp_path / "in"
    src.mkdir()
    for path in frames[:5]:
        (src / path.name).write_bytes(path.read_bytes())
    argv = [
        "denoise",
        str(src / "frame_####.exr"),
        "--frames",
        "0-6x2",
        "--backend",
        "reference",
        "--no-progress",
        "--mkdir",
        "--input-colorspace",
        "ACEScg",
        "--display",
        "sRGB - Display",
        "--view",
        "ACES 2.0 - SDR 100 nits (Rec.709)",
    ]
    assert main([*argv, "-o", str(tmp_path / "one/{stem}.png")]) == 1  # frame 6 is missing
    assert main([*argv, "-o", str(tmp_path / "farm/{stem}.png"), "--ray"]) == 1
    err = capsys.readouterr().err
    assert "1 of 4 frames missing" in err and ": 6" in err
    names = sorted(p.name for p in (tmp_path / "farm").iterdir())
    assert names == ["frame_0000.png", "frame_0002.png", "frame_0004.png"]
    for name in names:
        np.testing.assert_array_equal(
            io.read_image(tmp_path / "farm" / name).pixels,
            io.read_image(tmp_path / "one" / name).pixels,
        )


def test_a_worker_s_log_records_reach_the_driver_naming_worker_and_frame(
    frames: list[Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="oidn_gpu"):
        summary, _ = _run(jobs_for(frames, tmp_path / "out"), worker_class=LoggingWorker)
    assert summary.count("done") == FRAME_COUNT
    seen = [r for r in caplog.records if r.getMessage().startswith("worker saw ")]
    assert len(seen) == FRAME_COUNT
    for record in seen:
        match = re.fullmatch(
            r"worker saw (\S+) in pid (\d+) \[worker \d \((.+)\), frame (\S+)\]",
            record.getMessage(),
        )
        assert match, record.getMessage()
        assert match[1] == match[4]  # the frame named is the frame it logged about
        assert f"pid {match[2]}" in match[3] and int(match[2]) != os.getpid()
        assert record.levelno == logging.WARNING and record.name == "oidn_gpu.sequence"
    assert not [r for r in caplog.records if "below the driver's level" in r.getMessage()]


def test_an_interrupted_run_leaves_no_temporary_file_of_a_worker_killed_mid_write(
    frames: list[Path], tmp_path: Path
) -> None:
    out, marker = tmp_path / "out", tmp_path / "marker"
    worker = interrupting_writer(frames[0].name, marker, os.getpid())
    # Ctrl-C as in a terminal, also where the tests run with SIGINT ignored (a background job)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            _run(jobs_for(frames, out), worker_class=worker)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert marker.exists()  # the worker was inside the write when the driver stopped it
    left = [p.name for p in out.iterdir() if p.name.startswith(TEMP_PREFIX)]
    assert left == []
    for path in out.iterdir():  # whatever was written is whole
        assert sequence.output_is_complete(sequence.FrameJob(frames[0].parent / path.name, path))
