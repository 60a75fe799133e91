"""Fixtures for the command-line tests: the CLI run in-process, small real crops.

Helpers shared by the test modules live in ``cli_support.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from cli_support import CROP_X, CROP_Y

from oidn_gpu.cli import main
from oidn_gpu.image import io


@dataclass(frozen=True)
class CliResult:
    rc: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run ``oidn-gpu ARGS...`` in this process; returns exit code, stdout and stderr."""

    def run(*args: object) -> CliResult:
        capsys.readouterr()
        rc = main([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(rc, captured.out, captured.err)

    return run


@pytest.fixture(autouse=True)
def _reference_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every CLI test on the NumPy reference backend (deterministic, no GPU needed)."""
    monkeypatch.setenv("OIDN_GPU_BACKEND", "reference")


@pytest.fixture(scope="session")
def scene(scenes_dir: Path) -> Callable[[str, int], dict[str, np.ndarray]]:
    """Crops of textured_checker: color, albedo, normal, oidn (the stored OIDN output)."""
    cache: dict[str, np.ndarray] = {}

    def load(name: str) -> np.ndarray:
        if name not in cache:
            cache[name] = io.read_image(scenes_dir / "textured_checker" / f"{name}.exr").pixels
        return cache[name]

    def crop(size: int = 64, offset: int = 0) -> dict[str, np.ndarray]:
        y, x = CROP_Y + offset, CROP_X + offset
        return {
            name: np.ascontiguousarray(load(name)[y : y + size, x : x + size])
            for name in ("color_4spp", "albedo", "normal")
        }

    return crop
