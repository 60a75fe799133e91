"""``oidn-gpu denoise --frames RANGE``: exactly the named frames of a frame pattern, glob
or folder, and a report of the frames no file holds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_support import write_exr

from oidn_gpu.cli.frames import compact, parse_frames
from oidn_gpu.cli.usage import UsageError

PRESENT = [f for f in range(1001, 1013) if f not in (1003, 1008)]


@pytest.fixture
def shot(tmp_path: Path) -> Path:
    """``shot.1001.exr`` to ``shot.1012.exr`` but 1003 and 1008 (16 px), and an out/ folder."""
    rng = np.random.default_rng(5)
    folder = tmp_path / "frames"
    folder.mkdir()
    for frame in PRESENT:
        write_exr(folder / f"shot.{frame}.exr", rng.uniform(0, 1, (16, 16, 3)).astype("f4"))
    (tmp_path / "out").mkdir()
    return folder


def _written(tmp_path: Path) -> list[int]:
    return sorted(int(p.name.split(".")[1]) for p in (tmp_path / "out").iterdir())


@pytest.mark.parametrize(
    ("text", "frames"),
    [
        ("1001-1005", (1001, 1002, 1003, 1004, 1005)),
        ("1001-1010x3", (1001, 1004, 1007, 1010)),
        ("1001,1005,1010-1012", (1001, 1005, 1010, 1011, 1012)),
        (" 7 ", (7,)),
    ],
)
def test_ranges_parse_to_their_frames(text: str, frames: tuple[int, ...]) -> None:
    assert parse_frames(text) == frames


@pytest.mark.parametrize("text", ["", "abc", "1001-1100x0", "1.5", "1-99999999"])
def test_bad_ranges_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="--frames"):
        parse_frames(text)


def test_compact_ranges() -> None:
    assert compact([1009, 1003, 1007, 1008]) == "1003,1007-1009"


def test_pattern_gives_exactly_the_named_frames(cli, shot: Path, tmp_path: Path) -> None:
    pattern = str(shot / "shot.####.exr")
    result = cli(
        "denoise", pattern, "--frames", "1001,1005,1010-1012", "-o", tmp_path / "out/", "-q"
    )
    assert result.rc == 0, result.err
    assert _written(tmp_path) == [1001, 1005, 1010, 1011, 1012]
    assert "missing" not in result.err


def test_missing_frames_are_reported_and_fail_the_run(cli, shot: Path, tmp_path: Path) -> None:
    pattern = str(shot / "shot.%04d.exr")
    out = tmp_path / "out" / "d.####.exr"
    result = cli("denoise", pattern, "--frames", "1001-1009", "-o", out, "--json", "-q")
    assert result.rc == 1
    assert _written(tmp_path) == [1001, 1002, 1004, 1005, 1006, 1007, 1009]
    assert f"2 of 9 frames missing from '{pattern}': 1003,1008" in result.err
    document = json.loads(result.out)
    assert document["missing_frames"] == {pattern: [1003, 1008]}
    assert document["denoised"] == 7


def test_a_glob_and_a_folder_take_the_range_with_a_step(cli, shot: Path, tmp_path: Path) -> None:
    glob = str(shot / "shot.*.exr")
    result = cli("denoise", glob, "--frames", "1001-1012x2", "-o", tmp_path / "out/", "-q")
    assert result.rc == 1
    assert _written(tmp_path) == [1001, 1005, 1007, 1009, 1011]
    assert "1 of 6 frames missing" in result.err and ": 1003" in result.err
    for path in (tmp_path / "out").iterdir():
        path.unlink()
    result = cli("denoise", shot, "--frames", "1010-1012", "-o", tmp_path / "out/", "-q")
    assert result.rc == 0, result.err
    assert _written(tmp_path) == [1010, 1011, 1012]


def test_no_frame_of_the_range_is_a_usage_error(cli, shot: Path, tmp_path: Path) -> None:
    pattern = str(shot / "shot.####.exr")
    result = cli("denoise", pattern, "--frames", "2001-2010", "-o", tmp_path / "out/")
    assert result.rc == 2
    assert "no input file holds a frame of --frames 2001-2010" in result.err
