"""`backends.cuda.coverage_kernels`: the coverage fit of `image.coverage` in two Triton
kernels (through Triton's interpreter without a GPU): the NumPy fit's values to float32
rounding, for edge-sized images, an image of many strips of rows (the kernels' running
sums start afresh in each), a float16 albedo and strided tensors, and the fit the cuda
backend's runner gives `alpha="denoise"`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oidn_gpu.backends.cuda import coverage_kernels
from oidn_gpu.backends.runners import CoverageRunner
from oidn_gpu.image.coverage import fit_coverage
from tests.cuda.conftest import HAS_CUDA
from tests.cuda.test_denoiser_tensors import _denoiser

DEVICE = torch.device("cuda" if HAS_CUDA else "cpu")


def _on(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(array).to(DEVICE)


@pytest.mark.parametrize("shape", [(1, 1), (5, 7), (37, 70), (131, 3)], ids=str)
def test_the_kernels_fit_as_numpy(shape, rng) -> None:
    alpha = rng.random(shape, dtype=np.float32)
    alpha[: shape[0] // 2] = 1.0  # a constant part too
    guide = rng.random((*shape, 3), dtype=np.float32)
    fitted = coverage_kernels.fit_coverage(_on(alpha), _on(guide))
    assert fitted.dtype == torch.float32 and tuple(fitted.shape) == shape
    np.testing.assert_allclose(fitted.cpu().numpy(), fit_coverage(alpha, guide), atol=2e-4)


def test_a_float16_strided_albedo(rng) -> None:
    rgba = rng.random((20, 30, 4), dtype=np.float32)
    albedo = rng.random((20, 30, 4), dtype=np.float32).astype(np.float16)
    alpha, guide = _on(rgba)[:, :, 3], _on(albedo)[:, :, :3]  # views: strides of 4
    fitted = coverage_kernels.fit_coverage(alpha, guide).cpu().numpy()
    expected = fit_coverage(rgba[:, :, 3], albedo[:, :, :3].astype(np.float32))
    np.testing.assert_allclose(fitted, expected, atol=2e-4)


def test_the_cuda_runner_fits_with_the_kernels(rng) -> None:
    alpha, guide = rng.random((9, 11), dtype=np.float32), rng.random((9, 11, 3), dtype=np.float32)
    with _denoiser(hdr=True) as den:
        den.denoise(*(rng.random((9, 11, 3), dtype=np.float32) for _ in range(3)))
        (engine,) = den._engines.values()
        runner = engine.runner
        assert isinstance(runner, CoverageRunner)
        fitted = runner.fit_coverage(_on(alpha), _on(guide))
    expected = coverage_kernels.fit_coverage(_on(alpha), _on(guide))
    assert torch.equal(fitted, expected)


def test_clip_clips_the_alpha_read_and_the_fit(rng) -> None:
    alpha = rng.random((21, 34), dtype=np.float32) * 1.6 - 0.3  # outside 0..1 in places
    guide = rng.random((21, 34, 3), dtype=np.float32)
    clipped = coverage_kernels.fit_coverage(_on(alpha), _on(guide), clip=True).cpu().numpy()
    expected = np.clip(fit_coverage(np.clip(alpha, 0.0, 1.0), guide), 0.0, 1.0)
    assert clipped.min() >= 0.0 and clipped.max() <= 1.0
    assert np.abs(fit_coverage(alpha, guide) - expected).max() > 0.1  # the clips matter
    np.testing.assert_allclose(clipped, expected, atol=2e-4)
