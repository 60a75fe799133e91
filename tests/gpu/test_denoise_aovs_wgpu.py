"""`Denoiser.denoise_aovs` on the wgpu backend (lavapipe in CI): the beauty and the passes run
as one `denoise_many` sequence, and the result is the reference rule applied to what
`Denoiser.denoise` gives each image (tiny weights keep it fast)."""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.image.aov_sum import reconcile

from .conftest import DATA

pytestmark = pytest.mark.gpu

WEIGHTS = (DATA / "tiny_base_ic9.tza").read_bytes()  # color + albedo + normal


def test_denoise_aovs_on_wgpu_matches_each_image_denoised_then_reconciled(rng):
    size = (32, 40)
    passes = {name: rng.random((*size, 3), dtype=np.float32) * 2 for name in ("diff", "spec")}
    beauty = passes["diff"] + passes["spec"]
    utility = rng.random((*size, 3), dtype=np.float32)
    albedo = rng.random((*size, 3), dtype=np.float32)
    normal = rng.random((*size, 3), dtype=np.float32) * 2 - 1
    with oidn_gpu.Denoiser(weights=WEIGHTS, backend="wgpu", precision="fp32", hdr=True) as den:
        result = den.denoise_aovs(
            beauty, {**passes, "mask": utility}, albedo, normal, summed=["diff", "spec"]
        )
        alone = {n: den.denoise(v, albedo, normal) for n, v in {**passes, "mask": utility}.items()}
        expected_beauty = den.denoise(beauty, albedo, normal)
    np.testing.assert_allclose(result.beauty, expected_beauty, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.passes["mask"], alone["mask"], rtol=1e-5, atol=1e-6)
    expected = reconcile(expected_beauty, [alone["diff"], alone["spec"]])
    for name, values in zip(("diff", "spec"), expected, strict=True):
        np.testing.assert_allclose(result.passes[name], values, rtol=1e-4, atol=1e-5)
    total = result.passes["diff"].astype(np.float64) + result.passes["spec"]
    assert np.abs(total - result.beauty).max() <= 1e-5 * np.abs(result.beauty).max()
