"""Shared test fixtures: data locations, seeded RNG, the Intel OIDN oracle.

The project's shared data (official weights, Mitsuba test scenes) lives in
``shared/`` beside the checkout (``../shared`` from the repository root), as on
the developers' machines and in CI. ``OIDN_GPU_SHARED`` overrides the location.

GPU test modules (everything under ``tests/gpu/``, and modules that start with
``pytestmark = pytest.mark.gpu``) import the wgpu backend at module level. When
``-m`` deselects the ``gpu`` marker, such modules are not imported at all, so
``pytest -m "not gpu"`` collects and runs on a machine without wgpu. Without
``-m``, they are collected as usual and fail loudly when wgpu is missing.
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import numpy as np
import pytest
from _pytest.mark.expression import Expression

REPO_ROOT = Path(__file__).resolve().parents[1]
GPU_DIRECTORIES = (REPO_ROOT / "tests" / "gpu",)  # their conftest marks every test gpu
_GPU_MODULE_MARK = re.compile(r"^pytestmark = \[?pytest\.mark\.gpu\b", re.MULTILINE)


def _gpu_deselected(config: pytest.Config) -> bool:
    """Whether the ``-m`` expression deselects every test marked ``gpu``, whatever other
    marks it has (``not gpu`` does; ``oracle`` or ``not slow`` do not)."""
    markexpr = config.getoption("markexpr", default="")
    if not markexpr:
        return False
    expression = Expression.compile(markexpr)
    others = sorted(set(re.findall(r"[A-Za-z_]\w*", markexpr)) - {"and", "or", "not", "gpu"})
    for values in itertools.product((False, True), repeat=len(others)):
        marks = {"gpu", *(name for name, on in zip(others, values, strict=True) if on)}
        if expression.evaluate(lambda name, marks=marks, **_: name in marks):
            return False
    return True


def _is_gpu_module(path: Path) -> bool:
    if any(directory in path.parents for directory in GPU_DIRECTORIES):
        return True
    return bool(_GPU_MODULE_MARK.search(path.read_text(encoding="utf-8")))


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Do not import GPU-only test modules when ``-m`` deselects their tests anyway."""
    name = collection_path.name
    if collection_path.suffix != ".py" or not name.startswith("test_"):
        return None
    if _gpu_deselected(config) and _is_gpu_module(collection_path):
        return True
    return None


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
