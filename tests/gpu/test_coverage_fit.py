"""The alpha's coverage fit on the wgpu runner (`GpuDenoiser.fit_coverage_host`, two WGSL
passes): `image.coverage.fit_coverage`'s values to float32 rounding, for random and
silhouette images, one-channel, four-channel and float16 guides, and images as small as
one row, one column or less than a window."""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.backends.base import HostCoverageRunner
from oidn_gpu.backends.wgpu.backend import WgpuBackend
from oidn_gpu.backends.wgpu.executor import WgpuExecutor
from oidn_gpu.errors import InvalidOperationError
from oidn_gpu.image.coverage import fit_coverage

pytestmark = pytest.mark.gpu

ATOL = 1e-4
# A silhouette's windows, where the albedo follows the alpha, are nearly singular: float32
# sums in another order (a driver's compiler may reassociate them, as WGSL allows) move the
# fit by up to 7e-5 there on lavapipe, against 1e-5 on random images, and NumPy's fit is
# itself about 1e-3 from a float64 fit (tests/unit/test_coverage.py).
SILHOUETTE_ATOL = 3e-4


@pytest.fixture(scope="module")
def runner(gpu, tiny_models):
    executor = WgpuExecutor(tiny_models["tiny_base_ic3"], device=gpu, precision="fp32")
    made = WgpuBackend().create_runner(executor)
    yield made
    made.close()
    executor.close()


def _fits_as_numpy(runner, alpha: np.ndarray, guide: np.ndarray, atol: float = ATOL) -> None:
    fitted = runner.fit_coverage_host(alpha, guide)
    assert fitted.dtype == np.float32 and fitted.shape == alpha.shape[:2]
    expected = fit_coverage(alpha.reshape(alpha.shape[:2]), guide.astype(np.float32))
    np.testing.assert_allclose(fitted, expected, atol=atol)


def _disc(size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A soft disc's coverage, noisy as a few samples make it, and an albedo of the object's
    colour times the coverage (with a little noise of its own)."""
    yy, xx = np.mgrid[:size, :size] + 0.5
    coverage = np.clip(size / 3 - np.hypot(yy - size / 2, xx - size / 2) + 0.5, 0, 1)
    alpha = np.clip(coverage + rng.normal(0, 0.15, coverage.shape), 0, 1)
    albedo = coverage[:, :, None] * np.array([0.8, 0.45, 0.2])
    albedo += rng.normal(0, 0.01, albedo.shape)
    return alpha.astype(np.float32), albedo.astype(np.float32)


def test_the_wgpu_runner_fits_coverage_on_its_device(runner) -> None:
    assert isinstance(runner, HostCoverageRunner)


def test_random_alpha_and_albedo(runner, rng) -> None:
    alpha = rng.random((40, 56), dtype=np.float32)
    _fits_as_numpy(runner, alpha, rng.random((40, 56, 3), dtype=np.float32))


def test_a_soft_disc_s_silhouette(runner, rng) -> None:
    alpha, albedo = _disc(64, rng)
    _fits_as_numpy(runner, alpha, albedo, SILHOUETTE_ATOL)
    # an alpha of one channel's shape, and an RGBA view's alpha
    rgba = np.concatenate([albedo, alpha[:, :, None]], axis=2)
    _fits_as_numpy(runner, rgba[:, :, 3:], albedo, SILHOUETTE_ATOL)
    _fits_as_numpy(runner, rgba[:, :, 3], rgba, SILHOUETTE_ATOL)  # the guide's first three channels


@pytest.mark.parametrize("shape", ["H x W", "H x W x 1", "H x W x 2"])
def test_a_one_channel_guide(runner, rng, shape) -> None:
    alpha = _disc(48, rng)[0]
    grey = rng.random((48, 48), dtype=np.float32)
    guide = {
        "H x W": grey,
        "H x W x 1": grey[:, :, None],
        "H x W x 2": np.stack([grey, 1 - grey], axis=2),  # read as its first channel
    }[shape]
    fitted = runner.fit_coverage_host(alpha, guide)
    np.testing.assert_allclose(fitted, fit_coverage(alpha, grey), atol=ATOL)


def test_a_one_channel_guide_of_the_silhouette(runner, rng) -> None:
    """A guide of one channel (repeated to three) makes the 3 x 3 system singular but for
    the ridge, and where the guide follows the alpha its solve by the adjugate cancels most
    digits: the float32 rounding of a sum (which the driver's compiler may reassociate, as
    WGSL allows) moves the fit by up to about 3e-4 there, less than the NumPy fit's own
    distance from a float64 fit (about 1e-3, tests/unit/test_coverage.py)."""
    alpha, albedo = _disc(48, rng)
    grey = albedo.mean(axis=2)
    difference = runner.fit_coverage_host(alpha, grey) - fit_coverage(alpha, grey)
    assert np.abs(difference).max() < 1e-3
    assert np.sqrt(np.mean(difference**2)) < 1e-4


def test_a_float16_guide(runner, rng) -> None:
    alpha, albedo = _disc(40, rng)
    _fits_as_numpy(runner, alpha, albedo.astype(np.float16), SILHOUETTE_ATOL)
    rgba = np.ones((45, 43, 4), np.float16)
    rgba[5:, 3:, :3] = albedo
    _fits_as_numpy(runner, alpha, rgba[5:, 3:, :3], SILHOUETTE_ATOL)  # a strided view
    _fits_as_numpy(runner, alpha[:1, :1], albedo[:1, :1].astype(np.float16))  # half a word


@pytest.mark.parametrize("shape", [(1, 37), (29, 1), (5, 5), (1, 1)], ids=str)
def test_images_smaller_than_a_window(runner, rng, shape) -> None:
    alpha = rng.random(shape, dtype=np.float32)
    _fits_as_numpy(runner, alpha, rng.random((*shape, 3), dtype=np.float32))


def test_a_constant_alpha_comes_back(runner, rng) -> None:
    guide = rng.random((24, 30, 3), dtype=np.float32)
    for value in (0.0, 1.0):
        alpha = np.full((24, 30), value, np.float32)
        np.testing.assert_allclose(runner.fit_coverage_host(alpha, guide), alpha, atol=ATOL)


def test_calls_of_other_sizes_and_the_buffers_released_at_close(gpu, tiny_models, rng) -> None:
    executor = WgpuExecutor(tiny_models["tiny_base_ic3"], device=gpu, precision="fp32")
    own = WgpuBackend().create_runner(executor)
    assert own.resources() == (0, 0)  # nothing made before the first fit
    for shape in ((20, 30), (33, 17), (20, 30)):
        alpha = rng.random(shape, dtype=np.float32)
        _fits_as_numpy(own, alpha, rng.random((*shape, 3), dtype=np.float32))
    assert own.resources()[0] > 0
    own.close()
    executor.close()
    assert own.resources() == (0, 0)
    with pytest.raises(InvalidOperationError):
        own.fit_coverage_host(alpha, alpha)
