"""Shared test fixtures: data locations, seeded RNG, the Intel OIDN oracle.

The suite runs from a fresh clone: test images are crops in ``tests/data/scenes``,
the weights are the package's own, OIDN's outputs come live from ``pyoidn``
(``tests/datasets.py`` says where each comes from). Tests that need the optional
full-size data set (``OIDN_GPU_SHARED``, or ``shared/`` beside the checkout) are
marked ``shared_data`` and deselected, with one line saying how many, when there
is none; a named but incomplete data set is an error.

GPU test modules (everything under ``tests/gpu/``, and modules that start with
``pytestmark = pytest.mark.gpu``) import the wgpu backend at module level. When
``-m`` deselects the ``gpu`` marker, such modules are not imported at all, so
``pytest -m "not gpu"`` collects and runs on a machine without wgpu. Without
``-m``, they are collected as usual and fail loudly when wgpu is missing.

Where torch sees no CUDA GPU, ``TRITON_INTERPRET=1`` is set before any test module is
imported, so the cuda backend's Triton kernels run on CPU tensors through Triton's
interpreter (the backend contract and ``tests/cuda``); tests marked ``cuda_device``
need a real GPU and are deselected there.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from _pytest.mark.expression import Expression

from oidn_gpu.filter_cache import clear_denoiser_cache
from oidn_gpu.model.weights import bundled_weights_dir
from tests import datasets

_SHARED_DIR = pytest.StashKey[Path | None]()
_NOTES = pytest.StashKey[list[str]]()

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


def _shared_fixtures() -> set[str]:
    """Fixtures that read the full-size data set (``weights_dir`` only while the package
    lacks some official weights)."""
    names = {"shared_dir", "scenes_dir"}
    if not datasets.all_official_bundled():
        names.add("weights_dir")
    return names


def pytest_configure(config: pytest.Config) -> None:
    if not has_cuda():
        os.environ[TRITON_INTERPRET_ENV_VAR] = "1"  # read when Triton's kernels are defined
    try:
        config.stash[_SHARED_DIR] = datasets.locate_shared_dir()
    except datasets.SharedDataError as err:
        raise pytest.UsageError(str(err)) from None


def pytest_report_header(config: pytest.Config) -> str:
    shared = config.stash.get(_SHARED_DIR, None)
    if shared is None:
        return f"full-size data set: none ({datasets.SHARED_ENV_VAR} not set, no ../shared)"
    return f"full-size data set: {shared}"


@pytest.hookimpl(tryfirst=True)  # mark before `-m` selects, so `-m shared_data` works
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    fixtures = _shared_fixtures()
    for item in items:
        if fixtures.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(datasets.SHARED_MARKER)
    notes = []
    if config.stash.get(_SHARED_DIR, None) is None:
        count = _deselect(config, items, datasets.SHARED_MARKER)
        if count:
            notes.append(
                f"{count} extra tests need the full-size data set and are deselected: set "
                f"{datasets.SHARED_ENV_VAR} to a folder holding weights/ and testdata/scenes/"
            )
    if any(item.get_closest_marker(CUDA_DEVICE_MARKER) for item in items) and not has_cuda():
        count = _deselect(config, items, CUDA_DEVICE_MARKER)
        notes.append(
            f"{count} CUDA tests need an NVIDIA GPU and are deselected (the CUDA kernels are "
            "tested here through Triton's interpreter; bench/cuda_h200.sh runs these)"
        )
    config.stash[_NOTES] = notes


CUDA_DEVICE_MARKER = "cuda_device"
TRITON_INTERPRET_ENV_VAR = "TRITON_INTERPRET"


@functools.cache
def has_cuda() -> bool:
    """Whether torch sees a CUDA GPU (torch is not imported where no NVIDIA driver is)."""
    from oidn_gpu.backends.cuda import nvidia_driver_present

    if not nvidia_driver_present():
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _deselect(config: pytest.Config, items: list[pytest.Item], marker: str) -> int:
    deselected = [item for item in items if item.get_closest_marker(marker)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if not item.get_closest_marker(marker)]
    return len(deselected)


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    return config.stash.get(_NOTES, [])


@pytest.fixture(scope="session")
def shared_dir(pytestconfig: pytest.Config) -> Path:
    """The full-size data set (tests using it are deselected where there is none)."""
    shared = pytestconfig.stash.get(_SHARED_DIR, None)
    if shared is None:
        pytest.fail(f"no full-size data set; set {datasets.SHARED_ENV_VAR}", pytrace=False)
    return shared


@pytest.fixture(scope="session")
def weights_dir(request: pytest.FixtureRequest) -> Path:
    """A folder holding all 23 official weights, the three large ones included: the
    package's own once it ships them all, else the full-size data set's."""
    if datasets.all_official_bundled():
        return bundled_weights_dir()
    return request.getfixturevalue("shared_dir") / "weights"


@pytest.fixture(scope="session")
def scenes_dir(shared_dir: Path) -> Path:
    """The full-size Mitsuba scenes with Intel OIDN's stored outputs."""
    return shared_dir / "testdata" / "scenes"


@pytest.fixture(scope="session")
def package_weights_dir() -> Path:
    """The official weights bundled with the package."""
    return bundled_weights_dir()


@pytest.fixture(scope="session")
def official_weights(pytestconfig: pytest.Config) -> Callable[[str], Path]:
    """``name -> path`` of an official weights file: the package's, else the full-size data
    set's (parametrize with `datasets.official_params` so the latter are extra tests)."""

    def find(name: str) -> Path:
        path = bundled_weights_dir() / f"{name}.tza"
        shared = pytestconfig.stash.get(_SHARED_DIR, None)
        if not path.is_file() and shared is not None:
            path = shared / "weights" / f"{name}.tza"
        if not path.is_file():
            pytest.fail(f"{name}.tza is neither bundled nor in a full-size data set")
        return path

    return find


@pytest.fixture(autouse=True)
def _no_cached_denoisers():
    """Each test starts and ends without the one-call API's warm denoisers (their device
    resources belong to the test that made them)."""
    yield
    clear_denoiser_cache()


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
