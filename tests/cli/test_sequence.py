"""oidn_gpu.sequence: the frame loop, progress, summary and Denoiser reuse (fake denoiser)."""

from __future__ import annotations

import io as stdio
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from cli_support import write_exr

import oidn_gpu
from oidn_gpu import DenoiserConfig, FilterOptions, sequence
from oidn_gpu.image import io


class FakeDenoiser:
    """Halves the color; reports progress in four tiles; fails on a marked image."""

    created: ClassVar[list[DenoiserConfig]] = []

    def __init__(self, config: DenoiserConfig) -> None:
        FakeDenoiser.created.append(config)
        self.closed = False

    @classmethod
    def from_config(cls, config: DenoiserConfig) -> FakeDenoiser:
        return cls(config)

    def denoise(self, color, albedo=None, normal=None, *, progress=None):
        if float(color[0, 0, 0]) == 42.0:
            raise RuntimeError("boom")
        for i in range(5):
            if progress is not None:
                progress(i / 4)
        return color * 0.5

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> type[FakeDenoiser]:
    FakeDenoiser.created = []
    monkeypatch.setattr(oidn_gpu.filter, "Denoiser", FakeDenoiser)
    return FakeDenoiser


def _options(*, auto_aux: bool, show_progress: bool) -> sequence.SequenceOptions:
    return sequence.SequenceOptions(
        inputs=sequence.InputOptions(auto_aux=auto_aux), show_progress=show_progress
    )


def _jobs(tmp_path: Path, values: list[float]) -> list[sequence.FrameJob]:
    jobs = []
    for i, value in enumerate(values):
        src = write_exr(tmp_path / f"in{i}.exr", np.full((8, 8, 3), value, np.float32))
        jobs.append(sequence.FrameJob(src, tmp_path / "out" / f"o{i}.exr"))
    return jobs


def test_frames_share_one_denoiser_and_progress_counts_frames(fake, tmp_path: Path) -> None:
    stream = stdio.StringIO()
    summary = sequence.run_sequence(
        _jobs(tmp_path, [1.0, 2.0, 3.0]),
        DenoiserConfig(FilterOptions(quality="fast")),
        sequence.SequenceOptions(show_progress=True),
        stream=stream,
    )
    assert summary.count("done") == 3
    assert len(fake.created) == 1
    assert fake.created[0] == DenoiserConfig(FilterOptions(quality="fast", hdr=True, srgb=False))
    assert "3/3 frames" in stream.getvalue()  # tqdm throttles the per-tile redraws
    np.testing.assert_array_equal(io.read_image(tmp_path / "out" / "o2.exr").pixels, 1.5)
    assert summary.line(3).startswith("3 frames: 3 denoised, 0 skipped, 0 failed in ")


def test_an_unexpected_error_fails_only_that_frame(fake, tmp_path: Path) -> None:
    stream = stdio.StringIO()
    summary = sequence.run_sequence(
        _jobs(tmp_path, [1.0, 42.0, 3.0]), DenoiserConfig(), stream=stream
    )
    assert [r.status for r in summary.results] == ["done", "failed", "done"]
    assert "internal error: RuntimeError: boom" in stream.getvalue()
    assert not (tmp_path / "out" / "o1.exr").exists()


def test_mode_follows_the_file_type(tmp_path: Path) -> None:
    png = io.read_image(
        io.write_image_atomic(tmp_path / "x.png", np.zeros((4, 4, 3)), encoding="srgb")
    )
    exr = io.read_image(write_exr(tmp_path / "x.exr", np.zeros((4, 4, 3), np.float32)))
    auto = sequence.InputOptions()
    assert sequence.resolve_mode(auto, png) == (False, True)
    assert sequence.resolve_mode(auto, exr) == (True, False)
    assert sequence.resolve_mode(sequence.InputOptions(mode="ldr"), exr) == (False, False)


def test_without_a_bar_each_frame_gets_one_log_line(fake, tmp_path: Path) -> None:
    stream = stdio.StringIO()
    jobs = _jobs(tmp_path, [1.0, 42.0, 3.0])
    summary = sequence.run_sequence(
        jobs, DenoiserConfig(), _options(auto_aux=False, show_progress=False), stream=stream
    )
    lines = stream.getvalue().splitlines()
    frames = [line for line in lines if line.startswith("frame ")]
    assert len(frames) == 2  # the failed frame gets its error line instead
    assert frames[0].startswith(f"frame 1/3 {jobs[0].color}: color '(root)'; hdr; ")
    assert frames[0].endswith(f" s -> {jobs[0].output}")
    assert frames[1].startswith(f"frame 3/3 {jobs[2].color}: ")
    assert summary.layers_line() == "layers used: color '(root)'; hdr (2 frames)"
    data = summary.as_json(3)
    assert (data["frames"], data["denoised"], data["failed"]) == (3, 2, 1)
    assert [r["status"] for r in data["results"]] == ["done", "failed", "done"]
    assert data["results"][0]["layers"] == {
        "color": "(root)",
        "albedo": None,
        "normal": None,
        "aovs": [],
        "mode": "hdr",
    }
    assert "boom" in data["results"][1]["error"]
    # each frame done says how long its stages took; a failed one has none
    for result in (data["results"][0], data["results"][2]):
        assert set(result["stages_s"]) == set(sequence.frame.STAGES)
        assert all(v >= 0 for v in result["stages_s"].values())
    assert data["results"][1]["stages_s"] is None
    assert summary.results[0].elapsed_s >= sum(summary.results[0].stages.values())


def test_quiet_runs_print_no_frame_lines(fake, tmp_path: Path) -> None:
    stream = stdio.StringIO()
    sequence.run_sequence(
        _jobs(tmp_path, [1.0]),
        DenoiserConfig(),
        sequence.SequenceOptions(quiet=True),
        stream=stream,
    )
    assert stream.getvalue() == ""


def test_the_bar_names_the_frame_being_denoised(monkeypatch, tmp_path: Path) -> None:
    stream = stdio.StringIO()
    seen: list[str] = []

    class Watcher(FakeDenoiser):
        def denoise(self, color, albedo=None, normal=None, *, progress=None):
            # the bar's last drawn line while this frame is denoised, before any progress call
            seen.append(stream.getvalue().rsplit("\r", 1)[-1])
            return super().denoise(color, albedo, normal, progress=progress)

    monkeypatch.setattr(oidn_gpu.filter, "Denoiser", Watcher)
    jobs = _jobs(tmp_path, [1.0, 2.0, 3.0])
    sequence.run_sequence(
        jobs, DenoiserConfig(), _options(auto_aux=False, show_progress=True), stream=stream
    )
    assert [line.split(":")[0] for line in seen] == [job.color.name for job in jobs]
