"""``oidn-gpu denoise frames/ --temporal`` reads the next frame while the current one is
denoised and hands it to the session's staging (`TemporalDenoiser.prepare`): the files,
messages, JSON, resume and errors are those of denoising one frame at a time (the run
without the read-ahead), on the reference backend, wgpu (lavapipe here) and cuda (its
`CudaTemporalSession` through Triton's interpreter without a GPU)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from oidn_gpu.backends.cuda.temporal_session import CudaTemporalSession
from oidn_gpu.cli import main
from oidn_gpu.image import exr, io
from oidn_gpu.sequence import frame as sequence_frame
from oidn_gpu.sequence import loop
from tests.temporal.cli_runs import SEQUENCES, TINY, copy_frames

BACKENDS = {
    "reference": ["--backend", "reference"],
    "wgpu": ["--backend", "wgpu"],
    "cuda": ["--backend", "cuda", "--engine", "cudnn"],
}


def _run(args: list[str], capsys, monkeypatch, *, read_ahead: bool) -> tuple[int, str, dict]:
    """The command's exit status, stderr and JSON summary; without ``read_ahead`` each
    frame is read in its turn (one frame at a time, the path without staging)."""
    with monkeypatch.context() as patch:
        if not read_ahead:
            patch.setattr(loop, "_upcoming", lambda *_: None)
        rc = main(
            [
                "denoise",
                *args,
                "--temporal",
                "--json",
                "--no-progress",
                "--mkdir",
                "--weights",
                str(TINY),
            ]
        )
    captured = capsys.readouterr()
    return rc, captured.err, json.loads(captured.out)


def _lines(err: str, folder: str) -> list[str]:
    """The messages but their times (the last line: the run's times)."""
    err = err.replace(f"/{folder}/", "/out/")
    return [re.sub(r"\d+\.\d+ s", "- s", line) for line in err.splitlines()[:-1]]


def _same_files(first: Path, second: Path) -> None:
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def _without_times(summary: dict) -> dict:
    """The JSON summary but its times (and the output folder's name)."""
    results = [
        {
            **{k: v for k, v in frame.items() if k not in ("elapsed_s", "stages_s")},
            "output": Path(frame["output"]).name,
        }
        for frame in summary["results"]
    ]
    return {**{k: v for k, v in summary.items() if k != "elapsed_s"}, "results": results}


def _check_stage_times(summary: dict) -> None:
    """Each frame's stages are its own: its read, and the rest of its time."""
    for frame in summary["results"]:
        if frame["status"] == "done":
            stages = frame["stages_s"]
            assert tuple(stages) == sequence_frame.STAGES
            assert min(stages.values()) >= 0
            assert frame["elapsed_s"] >= stages["read"] - 1e-4


def _staging_calls(monkeypatch) -> list[tuple[str, int]]:
    """Record the cuda session's prefetches and frames, in order (the real methods run)."""
    calls: list[tuple[str, int]] = []
    prefetch, frame = CudaTemporalSession.prefetch, CudaTemporalSession.frame

    def recorded_prefetch(self, temporal_frame):
        calls.append(("prefetch", id(temporal_frame)))
        return prefetch(self, temporal_frame)

    def recorded_frame(self, temporal_frame, *args, **kwargs):
        calls.append(("frame", id(temporal_frame)))
        return frame(self, temporal_frame, *args, **kwargs)

    monkeypatch.setattr(CudaTemporalSession, "prefetch", recorded_prefetch)
    monkeypatch.setattr(CudaTemporalSession, "frame", recorded_frame)
    return calls


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_read_ahead_writes_the_files_of_one_frame_at_a_time(backend, tmp_path, capsys, monkeypatch):
    frames = copy_frames(tmp_path / "in", "orbit", (1, 2, 4))  # 3 is missing: a restart
    calls = _staging_calls(monkeypatch)
    args = [str(frames), *BACKENDS[backend]]
    rc, err, summary = _run(
        [*args, "-o", f"{tmp_path / 'ahead'}/"], capsys, monkeypatch, read_ahead=True
    )
    assert rc == 0, err
    if backend == "cuda":  # frame k+1 handed to the staging before frame k is denoised
        assert [kind for kind, _ in calls] == ["prefetch", "frame"] * 2 + ["frame"]
        staged = [key for kind, key in calls if kind == "prefetch"]
        assert staged == [key for kind, key in calls if kind == "frame"][1:]
    calls.clear()
    rc_one, err_one, one = _run(
        [*args, "-o", f"{tmp_path / 'one'}/"], capsys, monkeypatch, read_ahead=False
    )
    assert rc_one == 0, err_one
    if backend == "cuda":
        assert [kind for kind, _ in calls] == ["frame"] * 3
    _same_files(tmp_path / "ahead", tmp_path / "one")
    assert _lines(err, "ahead") == _lines(err_one, "one")
    assert "frame 4 follows frame 2 (a gap in the numbering)" in err
    assert _without_times(summary) == _without_times(one)
    _check_stage_times(summary)


def _without_motion(source: Path, target: Path) -> None:
    contents = exr.read_file(source)
    layers = io.list_layers(source)
    keep = [c for layer in layers if "Vector" not in layer.name for c in layer.channels]
    contents.keep_only(0, keep)
    exr.write_file(target, contents)


def test_a_bad_frame_read_ahead_fails_in_its_turn(tmp_path, capsys, monkeypatch):
    frames = copy_frames(tmp_path / "in", "moving", (1, 3, 5))
    (frames / "frame.0002.exr").write_bytes(b"not an EXR file")  # unreadable
    _without_motion(SEQUENCES / "moving" / "frame.0004.exr", frames / "frame.0004.exr")
    args = [str(frames), "--backend", "reference"]
    rc, err, summary = _run(
        [*args, "-o", f"{tmp_path / 'ahead'}/"], capsys, monkeypatch, read_ahead=True
    )
    rc_one, err_one, one = _run(
        [*args, "-o", f"{tmp_path / 'one'}/"], capsys, monkeypatch, read_ahead=False
    )
    assert rc == rc_one != 0
    assert [r["status"] for r in summary["results"]] == ["done", "failed", "done", "failed", "done"]
    assert "frame.0002.exr" in summary["results"][1]["error"]
    assert "motion" in summary["results"][3]["error"]
    assert _lines(err, "ahead") == _lines(err_one, "one")
    assert _without_times(summary) == _without_times(one)
    _same_files(tmp_path / "ahead", tmp_path / "one")  # nothing of the failed frames
    assert sorted(p.name for p in (tmp_path / "ahead").iterdir()) == [
        "frame.0001.exr",
        "frame.0003.exr",
        "frame.0005.exr",
    ]


def test_resume_reads_ahead_only_frames_it_denoises(tmp_path, capsys, monkeypatch):
    frames = copy_frames(tmp_path / "in", "static", (1, 2, 3, 4))
    args = [str(frames), "--backend", "reference", "--skip-existing"]
    for name in ("ahead", "one"):
        (tmp_path / name).mkdir()
        for number in (2,):  # done before: the run resumes
            shutil.copy(frames / f"frame.{number:04d}.exr", tmp_path / name)
    read = []
    load_frame = sequence_frame.load_frame
    monkeypatch.setattr(
        "oidn_gpu.sequence.load_frame",
        lambda job, *a, **k: read.append(job.color.name) or load_frame(job, *a, **k),
    )
    rc, err, summary = _run(
        [*args, "-o", f"{tmp_path / 'ahead'}/"], capsys, monkeypatch, read_ahead=True
    )
    assert rc == 0, err
    # 2 is complete: read once, for the history of 3 and 4, and not written
    assert read == ["frame.0001.exr", "frame.0002.exr", "frame.0003.exr", "frame.0004.exr"]
    assert (tmp_path / "ahead" / "frame.0002.exr").read_bytes() == (
        frames / "frame.0002.exr"
    ).read_bytes()
    rc_one, err_one, one = _run(
        [*args, "-o", f"{tmp_path / 'one'}/"], capsys, monkeypatch, read_ahead=False
    )
    assert rc_one == 0, err_one
    assert [r["status"] for r in summary["results"]] == ["done", "skipped", "done", "done"]
    assert _without_times(summary) == _without_times(one)
    _same_files(tmp_path / "ahead", tmp_path / "one")


def test_the_passes_add_no_decode_of_a_frame_file(tmp_path, capsys, monkeypatch):
    """The motion and depth passes come from the decode that gives the images: a
    temporal run decodes each file as often as per-frame denoising does."""
    frames = copy_frames(tmp_path / "in", "moving", (1, 2, 3))
    decoded: list[str] = []
    read_image = io._read_image

    def counted(path, *args):
        decoded.append(Path(path).parent.name + "/" + Path(path).name)
        return read_image(path, *args)

    monkeypatch.setattr(io, "_read_image", counted)
    args = [
        str(frames),
        "--backend",
        "reference",
        "--weights",
        str(TINY),
        "--no-progress",
        "--mkdir",
    ]
    assert main(["denoise", *args, "-o", f"{tmp_path / 'plain'}/"]) == 0
    per_frame, decoded[:] = list(decoded), []
    rc, err, _ = _run(
        [str(frames), "--backend", "reference", "-o", f"{tmp_path / 'out'}/"],
        capsys,
        monkeypatch,
        read_ahead=True,
    )
    assert rc == 0, err
    inputs = sorted(name for name in decoded if name.startswith("in/"))
    assert inputs == sorted(name for name in per_frame if name.startswith("in/"))
    assert inputs.count("in/frame.0002.exr") >= 1
