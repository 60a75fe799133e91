"""Shared test fixtures: data locations, seeded RNG, the Intel OIDN oracle.

The project's shared data (official weights, Mitsuba test scenes) lives in
``shared/`` beside the checkout (``../shared`` from the repository root), as on
the developers' machines and in CI. ``OIDN_GPU_SHARED`` overrides the location.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def _shared_dir() -> Path:
    env = os.environ.get("OIDN_GPU_SHARED")
    path = Path(env) if env else REPO_ROOT.parent / "shared"
    if not (path / "weights").is_dir():
        raise RuntimeError(
            f"shared data not found at {path}; set OIDN_GPU_SHARED to the folder holding "
            "weights/ and testdata/"
        )
    return path


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return _shared_dir()


@pytest.fixture(scope="session")
def weights_dir(shared_dir: Path) -> Path:
    """All 23 official weights, the three large ones included."""
    return shared_dir / "weights"


@pytest.fixture(scope="session")
def scenes_dir(shared_dir: Path) -> Path:
    return shared_dir / "testdata" / "scenes"


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)


@pytest.fixture(scope="session")
def gpu():
    """The session's wgpu device (lavapipe in CI). GPU tests never skip: without an
    adapter they fail; deselect them with ``-m 'not gpu'``."""
    try:
        from oidn_gpu.backends.wgpu.device import open_device

        device = open_device()
    except Exception as err:
        pytest.fail(
            f"no wgpu adapter ({err}); install mesa-vulkan-drivers or deselect with -m 'not gpu'",
            pytrace=False,
        )
    yield device
    device.close()
