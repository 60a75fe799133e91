"""`Denoiser.denoise(..., alpha="denoise")` on the wgpu backend (lavapipe): the alpha of a
crop of tests/data/aovs/alpha.exr fitted to its albedo on the GPU and denoised with the
fast LDR weights as the reference backend denoises it, the colour as with
``alpha="copy"``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

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


def _random_frame(height: int, width: int, dtype: type = np.float32) -> tuple[np.ndarray, ...]:
    """An RGBA frame whose alpha leaves 0..1 at both ends (the clips matter), with an
    albedo whose left half is flat (the fit's windows see both kinds)."""
    rng = np.random.default_rng(7)
    rgba = (rng.random((height, width, 4)) * 3).astype(dtype)
    rgba[:, :, 3] = (rng.random((height, width)) * 1.6 - 0.3).astype(dtype)
    rgba[: height // 3, :, 3] = 1.25  # above 1: clipped before and after the network
    albedo = rng.random((height, width, 3)).astype(np.float32)
    albedo[:, : width // 2] = 0.5
    normal = (rng.random((height, width, 3)) * 2 - 1).astype(np.float32)
    return rgba, albedo, normal


@pytest.mark.parametrize("aux", ["albedo+normal", "albedo", "none"])
def test_an_rgba_frame_is_denoised_with_its_alpha_as_the_reference_backend(aux: str) -> None:
    """The RGBA frame in one upload (colour and alpha), the alpha fitted, denoised and
    clipped on the device: the same alpha as the reference backend's host path within
    float32 sums, the same colour as ``alpha="copy"``, bit for bit."""
    rgba, albedo, normal = _random_frame(40, 56)
    given = {"albedo+normal": (albedo, normal), "albedo": (albedo, None), "none": (None, None)}
    images = given[aux]
    with oidn_gpu.Denoiser(backend="wgpu", hdr=True, precision="fp32") as den:
        denoised = den.denoise(rgba, *images, alpha="denoise")
        copied = den.denoise(rgba, *images)
    with oidn_gpu.Denoiser(backend="reference", hdr=True) as den:
        reference = den.denoise(rgba, *images, alpha="denoise")
    np.testing.assert_array_equal(denoised[:, :, :3], copied[:, :, :3])
    np.testing.assert_array_equal(copied[:, :, 3], rgba[:, :, 3])
    assert denoised[:, :, 3].min() >= 0.0 and denoised[:, :, 3].max() <= 1.0
    assert np.count_nonzero(denoised[:, :, 3] == 1.0) > 100  # about 260: the rows above 1
    np.testing.assert_allclose(denoised[:, :, 3], reference[:, :, 3], atol=2e-5)


def test_an_rgba_frame_in_tiles_into_a_float16_destination() -> None:
    """A float16 RGBA frame in tiles for both networks, the result written into
    the caller's float16 array: as the reference backend's alpha, the colour as with
    ``alpha="copy"``."""
    rgba, albedo, normal = _random_frame(32, 240, np.float16)
    out = np.full((32, 240, 4), -7.0, np.float16)
    # the smallest tiles the networks' overlap allows (208 px): several across
    with oidn_gpu.Denoiser(backend="wgpu", hdr=True, precision="fp32", tile_size=208) as den:
        result = den.denoise(rgba, albedo, normal, alpha="denoise", output=out)
        copied = den.denoise(rgba, albedo, normal)
        assert den.info().tiles > 1
    with oidn_gpu.Denoiser(backend="reference", hdr=True) as den:
        reference = den.denoise(rgba, albedo, normal, alpha="denoise")
    assert result is out
    np.testing.assert_array_equal(out[:, :, :3], copied[:, :, :3].astype(np.float16))
    np.testing.assert_allclose(out[:, :, 3], reference[:, :, 3], atol=1e-3)  # float16 rounding


def test_an_rgba_frame_with_its_alpha_denoised_is_read_back_as_often_as_an_rgb_frame(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/aovs.md: on wgpu the four channels come back in one read back, as an RGB
    frame's do (the alpha's fit and network read no image back of their own)."""
    from oidn_gpu.backends.wgpu.device import WgpuDevice

    reads: list[str] = []
    for name in ("read_buffer", "read_mapped", "read_mapped_with"):
        original = getattr(WgpuDevice, name)

        def counted(self: Any, *args: Any, _original: Any = original, _name: str = name) -> Any:
            reads.append(_name)
            return _original(self, *args)

        monkeypatch.setattr(WgpuDevice, name, counted)
    rgba, albedo, normal = _random_frame(40, 56)
    with oidn_gpu.Denoiser(backend="wgpu", hdr=True, precision="fp32") as den:
        den.denoise(rgba, albedo, normal, alpha="denoise")  # first frame: kernels, weights
        den.denoise(rgba[:, :, :3], albedo, normal)
        reads.clear()
        den.denoise(rgba[:, :, :3], albedo, normal)
        rgb_reads = list(reads)
        reads.clear()
        den.denoise(rgba, albedo, normal, alpha="denoise")
        assert rgb_reads and reads == rgb_reads
