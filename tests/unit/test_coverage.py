"""`image.coverage`: an alpha fitted to the coverage its frame's albedo shows.

On the Mitsuba frame of tests/data/aovs (4 spp alpha, albedo rendered apart at 64 spp) the
fit alone lowers the alpha's error 3x; where the albedo shares the alpha's samples it
returns the alpha; a constant alpha comes back as it is. The NumPy path (fitted by tiles)
and the torch path (the whole image) are the same arithmetic: equal to float32 rounding on
well-conditioned images, and each within float32's reach of a float64 fit on the frame.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oidn_gpu.image.coverage import TILE, fit_coverage, fit_coverage_tensor
from tests.unit.test_aov_sum import alpha_images


@pytest.fixture(scope="module")
def frame() -> dict[str, np.ndarray]:
    return alpha_images()


def _rms(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((a - b) ** 2)))


def _f64(alpha: np.ndarray, guide: np.ndarray) -> np.ndarray:
    fitted = fit_coverage_tensor(torch.from_numpy(alpha).double(), torch.from_numpy(guide).double())
    return fitted.numpy()


def test_the_fit_lowers_the_frame_s_alpha_error_3x(frame) -> None:
    alpha, reference = np.clip(frame["rgba"][:, :, 3], 0, 1), frame["ref"]
    fitted = np.clip(fit_coverage(alpha, frame["albedo"]), 0, 1)
    assert _rms(alpha, reference) / _rms(fitted, reference) >= 3.0  # 3.62x measured


def test_numpy_and_torch_fit_alike(frame) -> None:
    alpha, albedo = np.clip(frame["rgba"][:, :, 3], 0, 1), frame["albedo"]
    exact = _f64(alpha, albedo)
    host = fit_coverage(alpha, albedo)
    device = fit_coverage_tensor(torch.from_numpy(alpha), torch.from_numpy(albedo)).numpy()
    assert host.dtype == device.dtype == np.float32
    # float32's means of products against a 1e-4 ridge: about 2e-3 where the albedo is flat
    np.testing.assert_allclose(host, exact, atol=5e-3)
    np.testing.assert_allclose(device, exact, atol=5e-3)
    assert _rms(host, exact) < 5e-4 and _rms(device, exact) < 5e-4  # 1.1e-4, 1.3e-4


@pytest.mark.parametrize("shape", [(1, 1), (5, 7), (TILE, TILE + 1), (70, 45)], ids=str)
def test_tiles_and_edges_as_the_whole_image(shape, rng) -> None:
    alpha = np.ones(shape, np.float32)
    alpha[: shape[0] // 2, : shape[1] // 3] = rng.random((shape[0] // 2, shape[1] // 3))
    guide = rng.random((*shape, 3), dtype=np.float32)
    host = fit_coverage(alpha, guide)
    np.testing.assert_allclose(host, _f64(alpha, guide), atol=1e-4)
    whole = fit_coverage_tensor(torch.from_numpy(alpha), torch.from_numpy(guide)).numpy()
    np.testing.assert_allclose(host, whole, atol=1e-4)


def test_a_constant_alpha_is_returned_as_it_is(rng) -> None:
    guide = rng.random((40, 90, 3), dtype=np.float32)
    for value in (0.0, 0.3, 1.0):
        alpha = np.full((40, 90), value, np.float32)
        np.testing.assert_array_equal(fit_coverage(alpha, guide), alpha)


def test_one_channel_and_two_dimensional_guides(frame) -> None:
    alpha = np.clip(frame["rgba"][:, :, 3], 0, 1)
    grey = frame["albedo"].mean(axis=2)
    three = fit_coverage(alpha, np.repeat(grey[:, :, None], 3, axis=2))
    np.testing.assert_array_equal(fit_coverage(alpha, grey), three)
    np.testing.assert_array_equal(fit_coverage(alpha, grey[:, :, None]), three)


def test_an_albedo_from_the_alpha_s_own_samples_leaves_the_alpha(frame) -> None:
    """One object over an empty background, the albedo rendered from the alpha's samples:
    the albedo is the object's albedo times the noisy coverage, and the fit returns the
    noisy alpha (there is nothing cleaner to fit it to)."""
    alpha = np.clip(frame["rgba"][:, :, 3], 0, 1)
    albedo = alpha[:, :, None] * np.array([0.8, 0.3, 0.2], np.float32)
    fitted = fit_coverage(alpha, albedo)
    assert np.abs(fitted - alpha).max() < 0.02
    assert _rms(fitted, alpha) < 0.1 * _rms(alpha, frame["ref"])
