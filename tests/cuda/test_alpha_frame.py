"""`Denoiser.denoise` of a NumPy RGBA frame with ``alpha="denoise"`` on the cuda backend:
one frame on the device (`AlphaRunner`).

The colour and its alpha go up as one ``H x W x 4`` image, the alpha is fitted and
denoised on the device beside the colour's network, and the four channels come back
together. Without a GPU the backend runs on the CPU (tests/cuda/conftest.py), where the
side stream is the one stream. References: the colour bits of the RGB call, the alpha of
`filter_alpha.denoise_alpha_tensor` on the same tensors (the tensor path's own work), and
the NumPy form of the alpha (`filter_alpha.denoise_alpha`) to float32 rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oidn_gpu.backends.base import AlphaRunner
from oidn_gpu.filter_alpha import denoise_alpha, denoise_alpha_tensor
from tests.cuda.conftest import HAS_CUDA
from tests.cuda.test_denoiser_tensors import TINY_COLOR, _denoiser, _images, _runner

pytestmark = pytest.mark.skipif(
    HAS_CUDA, reason="runs the cuda backend on the CPU; see test_device_tensors.py on a GPU"
)


def _rgba(rng, height=24, width=32):
    color, albedo, normal = (a.astype(np.float32) for a in _images(rng, height, width, None, 4))
    color[:, :, 3] = np.clip(color[:, :, 3] / 4 + rng.normal(0, 0.2, (height, width)), -0.1, 1.1)
    return color, albedo, normal


def test_the_colour_and_its_alpha_are_one_frame_on_the_device(rng):
    rgba, albedo, normal = _rgba(rng)
    with _denoiser(hdr=True) as den:
        result = den.denoise(rgba, albedo, normal, alpha="denoise")
        runner = _runner(den)
        assert isinstance(runner, AlphaRunner)
        uploaded = runner.host_inputs()["main"]  # the colour and its alpha, uploaded once
        assert tuple(uploaded.shape) == rgba.shape
        np.testing.assert_array_equal(uploaded.numpy(), rgba)
        scale = den.info().input_scale
        helper = den._alpha_denoiser()
        tensor_alpha = denoise_alpha_tensor(
            helper, torch.from_numpy(rgba[:, :, 3].copy()), torch.from_numpy(albedo), runner
        ).numpy()
        numpy_alpha = denoise_alpha(helper, rgba[:, :, 3], albedo)
        rgb = den.denoise(np.ascontiguousarray(rgba[:, :, :3]), albedo, normal)
        assert den.info().input_scale == scale  # the colour's autoexposure, as without alpha
    assert result.shape == rgba.shape and result.dtype == np.float32
    np.testing.assert_array_equal(result[:, :, :3], rgb)
    np.testing.assert_allclose(result[:, :, 3], tensor_alpha, atol=1e-6)
    np.testing.assert_allclose(result[:, :, 3], numpy_alpha, atol=1e-4)
    assert np.abs(result[:, :, 3] - rgba[:, :, 3]).max() > 0.05  # the alpha was denoised
    assert result[:, :, 3].min() >= 0.0 and result[:, :, 3].max() <= 1.0


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # a tiny random U-Net
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("given", [False, True], ids=["new result", "output array"])
def test_dtypes_and_output_arrays(dtype, given, rng):
    rgba, albedo, normal = _rgba(rng)
    images = [a.astype(dtype) for a in (rgba, albedo, normal)]
    with _denoiser(hdr=True) as den:
        expected = den.denoise(*[a.astype(np.float32) for a in images], alpha="denoise")
        out = np.full(rgba.shape, -7.0, dtype) if given else None
        result = den.denoise(*images, alpha="denoise", output=out)
        again = den.denoise(*images, alpha="denoise")  # the frame reused (its pooled buffers)
    if given:
        assert result is out
    assert result.dtype == dtype and result.shape == rgba.shape
    np.testing.assert_array_equal(again, result)
    # the same values in, so the float32 result rounded as it is copied out
    np.testing.assert_array_equal(result, expected.astype(dtype))


def test_a_strided_rgba_view(rng):
    rgba, albedo, normal = _rgba(rng)
    wide = np.zeros((24, 32, 6), np.float32)
    wide[:, :, 1:5] = rgba
    with _denoiser(hdr=True) as den:
        expected = den.denoise(rgba, albedo, normal, alpha="denoise")
        result = den.denoise(wide[:, :, 1:5], albedo, normal, alpha="denoise")
    np.testing.assert_array_equal(result, expected)


def test_a_colour_alone_denoises_its_alpha_without_an_albedo(rng):
    rgba, _, _ = _rgba(rng)
    with _denoiser(weights=TINY_COLOR, hdr=True) as den:
        result = den.denoise(rgba, alpha="denoise")
        rgb = den.denoise(np.ascontiguousarray(rgba[:, :, :3]))
        alone = denoise_alpha_tensor(
            den._alpha_denoiser(), torch.from_numpy(rgba[:, :, 3].copy()), None, _runner(den)
        ).numpy()
    np.testing.assert_array_equal(result[:, :, :3], rgb)
    np.testing.assert_allclose(result[:, :, 3], alone, atol=1e-6)
