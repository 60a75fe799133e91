"""``oidn-gpu denoise frames/ --temporal --skip-existing`` after an interrupted run: the
complete frames before a missing one are denoised again for their history (not
rewritten), so the resumed run writes the uninterrupted run's files, byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from oidn_gpu.cli import main
from tests.temporal.cli_runs import copy_frames


@pytest.fixture
def frames(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("OIDN_GPU_BACKEND", "reference")
    return copy_frames(tmp_path / "in", "static", range(1, 6))


def _denoise(frames: Path, out: Path, *extra: str) -> None:
    args = ["denoise", str(frames), "-o", f"{out}/", "--temporal", "--mkdir", "--no-progress"]
    assert main([*args, *extra]) == 0


@pytest.mark.parametrize("deleted", [(4, 5), (2, 5), (2,)])
def test_resumed_temporal_run_writes_the_uninterrupted_files(frames, tmp_path, capsys, deleted):
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    _denoise(frames, whole)
    shutil.copytree(whole, resumed)
    for number in deleted:  # the outputs an interrupted run had not written
        (resumed / f"frame.{number:04d}.exr").unlink()
    kept = {p.name: p.stat().st_mtime_ns for p in resumed.iterdir()}
    capsys.readouterr()
    _denoise(frames, resumed, "--skip-existing")
    err = capsys.readouterr().err
    history = sum(1 for n in range(1, max(deleted)) if n not in deleted)
    if history:
        assert f"temporal: {history} complete frame(s) before a missing one" in err, err
    assert sorted(p.name for p in resumed.iterdir()) == sorted(p.name for p in whole.iterdir())
    for path in sorted(whole.iterdir()):
        assert (resumed / path.name).read_bytes() == path.read_bytes(), path.name
    for name, mtime in kept.items():  # complete outputs are not written again
        assert (resumed / name).stat().st_mtime_ns == mtime, name
