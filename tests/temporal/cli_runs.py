"""What the tests of ``oidn-gpu denoise FRAMES/ --temporal`` share: the sequences of
tests/data, the tiny weights, a folder of copied frames and one run of the command."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from oidn_gpu.cli import main

SEQUENCES = Path(__file__).resolve().parents[1] / "data" / "sequences"
TINY = Path(__file__).resolve().parents[1] / "data" / "tiny_base_ic9.tza"
REFERENCE = ("--backend", "reference")


def copy_frames(folder: Path, sequence: str, numbers: Iterable[int]) -> Path:
    """``folder`` (made here) holding the frames ``numbers`` of a sequence of tests/data."""
    folder.mkdir()
    for number in numbers:
        shutil.copy(SEQUENCES / sequence / f"frame.{number:04d}.exr", folder)
    return folder


def run_temporal(
    capsys: Any, inputs: Path, out: Path, *flags: str, backend: Sequence[str] = REFERENCE
) -> tuple[int, str, dict | None]:
    """``oidn-gpu denoise INPUTS -o OUT/ --temporal --json`` with the tiny weights on
    ``backend`` (its flags) and ``flags``: the exit status, stderr, and the JSON summary
    (None when the run printed none)."""
    rc = main(
        [
            "denoise",
            str(inputs),
            "-o",
            f"{out}/",
            "--temporal",
            "--mkdir",
            "--no-progress",
            "--json",
            *backend,
            "--weights",
            str(TINY),
            *flags,
        ]
    )
    captured = capsys.readouterr()
    return rc, captured.err, json.loads(captured.out) if captured.out.strip() else None
