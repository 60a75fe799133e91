"""Fixtures for the command-line tests: the CLI run in-process, small real crops.

Helpers shared by the test modules live in ``cli_support.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from oidn_gpu.cli import main
from tests import datasets


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
def scene() -> Callable[[int, int], dict[str, np.ndarray]]:
    """Crops of textured_checker (color_4spp, albedo, normal) starting ``offset`` px right
    and down of the scene pixel (CROP_Y, CROP_X): tests/data/scenes/textured_checker_wide."""
    images = datasets.scene_crop("textured_checker_wide")

    def crop(size: int = 64, offset: int = 0) -> dict[str, np.ndarray]:
        window = (slice(offset, offset + size), slice(offset, offset + size))
        return {name: np.array(pixels[window]) for name, pixels in images.items()}

    return crop
