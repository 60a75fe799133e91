"""`Denoiser.denoise(..., alpha="denoise")` on the wgpu backend (lavapipe): the alpha of a
crop of tests/data/aovs/alpha.exr fitted to its albedo on the GPU and denoised with the
fast LDR weights as the reference backend denoises it, the colour as with
``alpha="copy"``."""

from __future__ import annotations

import numpy as np

import oidn_gpu
from tests.unit.test_aov_sum import layer, read_exr


def test_wgpu_denoises_the_alpha_as_the_reference_backend() -> None:
    noisy = read_exr("alpha.exr")
    crop = (slice(16, 48), slice(8, 40))  # 32 x 32 px across the objects' silhouettes
    rgba = np.ascontiguousarray(layer(noisy, "", "RGBA")[crop])
    albedo = np.ascontiguousarray(layer(noisy, "albedo")[crop])
    normal = np.ascontiguousarray(layer(noisy, "N", "XYZ")[crop])
    with oidn_gpu.Denoiser(backend="wgpu", hdr=True, precision="fp32") as den:
        denoised = den.denoise(rgba, albedo, normal, alpha="denoise")
        copied = den.denoise(rgba, albedo, normal)
    with oidn_gpu.Denoiser(backend="reference", hdr=True) as den:
        reference = den.denoise(rgba, albedo, normal, alpha="denoise")
    np.testing.assert_array_equal(denoised[:, :, :3], copied[:, :, :3])
    changed = np.abs(reference[:, :, 3] - rgba[:, :, 3]).max()
    assert changed > 0.05  # the crop's alpha is noisy: denoising moves it
    # wgpu fits the coverage on the GPU (`fit_coverage_host`), the reference backend with
    # NumPy: float32 sums in another order, which windows of a nearly singular albedo
    # amplify: the two fits of this crop differ by up to 1.1e-3, each within 1.7e-3 of a
    # float64 fit.
    np.testing.assert_allclose(denoised[:, :, 3], reference[:, :, 3], atol=3e-3)
    rms = np.sqrt(np.mean((denoised[:, :, 3] - reference[:, :, 3]) ** 2))
    assert rms < 3e-4  # 7.8e-5 measured
