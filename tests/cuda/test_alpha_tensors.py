"""`Denoiser.denoise(..., alpha="denoise")` on tensors of the cuda backend's device.

Without a GPU the cuda backend runs on the CPU (tests/cuda/conftest.py), so CPU torch
tensors take the device path: the alpha is denoised there with the decoded albedo, and
neither denoiser stages a host buffer. The NumPy path of the same
denoiser is the reference (the colour bit for bit, the alpha to float32 rounding of the
channels' mean).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oidn_gpu.image.coverage import fit_coverage
from tests.cuda.conftest import HAS_CUDA
from tests.cuda.test_denoiser_tensors import _as, _denoiser, _host, _images, _stayed_on_device

pytestmark = pytest.mark.skipif(
    HAS_CUDA, reason="CPU tensors are host arrays to a GPU denoiser; see test_device_tensors.py"
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.uint8], ids=str)
def test_the_alpha_is_denoised_on_the_device_as_on_the_numpy_path(dtype, rng):
    hdr = dtype != torch.uint8
    color, albedo, normal = _images(rng, 24, 32, dtype, channels=4)
    inputs = [_as(color, dtype), _as(albedo, dtype), _as(normal, dtype, signed=True)]
    with _denoiser(hdr=hdr) as den:
        actual = den.denoise(*inputs, alpha="denoise")
        copied = den.denoise(*inputs)
        _stayed_on_device(den)
        _stayed_on_device(den._alpha_denoiser())
        expected = den.denoise(*[_host(t) for t in inputs], alpha="denoise")
    assert isinstance(actual, torch.Tensor)
    assert actual.dtype == dtype and actual.shape == inputs[0].shape
    assert torch.equal(actual[:, :, :3], copied[:, :, :3])
    assert not torch.equal(actual[:, :, 3], copied[:, :, 3])  # the alpha changed
    tolerance = 1 if dtype == torch.uint8 else 1e-3 if dtype == torch.float16 else 1e-6
    np.testing.assert_allclose(
        actual[:, :, 3].double().numpy(), expected[:, :, 3].astype(np.float64), atol=tolerance
    )
    np.testing.assert_array_equal(actual[:, :, :3].numpy(), expected[:, :, :3])


def test_numpy_images_share_the_colour_s_device_copies_of_the_aux(rng):
    """NumPy images: the colour's upload of the albedo is what the alpha's denoiser reads
    on the device (it stages no host buffer); the alpha is the one the
    alpha's denoiser gives the host arrays."""
    color, albedo, normal = (a.astype(np.float32) for a in _images(rng, 24, 32, None, 4))
    with _denoiser(hdr=True) as den:
        actual = den.denoise(color, albedo, normal, alpha="denoise")
        helper = den._alpha_denoiser()
        _stayed_on_device(helper)
        (engine,) = den._engines.values()
        shared = engine.runner.host_inputs()
        assert sorted(shared) == ["albedo", "main", "normal"]
        np.testing.assert_array_equal(shared["albedo"].numpy(), albedo)
        fitted = np.clip(fit_coverage(np.clip(color[:, :, 3], 0, 1), albedo), 0, 1)
        expected = helper.denoise(fitted[:, :, None], albedo)
        den.denoise(*(torch.from_numpy(a) for a in (color, albedo, normal)))  # device call:
        assert engine.runner.host_inputs() == {}  # the copies are forgotten
    # the coverage fit on the device (torch) against NumPy's: float32 rounding
    np.testing.assert_allclose(actual[:, :, 3], np.clip(expected[:, :, 0], 0, 1), atol=1e-4)
    assert np.abs(actual[:, :, 3] - color[:, :, 3]).max() > 0.01


def test_a_prefiltered_frame_s_alpha_on_the_device_as_on_the_numpy_path(rng):
    color, albedo, normal = (a.astype(np.float32) for a in _images(rng, 24, 32, None, 4))
    tensors = [torch.from_numpy(a) for a in (color, albedo, normal)]
    with _denoiser(hdr=True, prefilter="accurate") as den:
        actual = den.denoise(*tensors, alpha="denoise")
        _stayed_on_device(den._alpha_denoiser())
        expected = den.denoise(color, albedo, normal, alpha="denoise")
    assert isinstance(actual, torch.Tensor)
    np.testing.assert_allclose(actual[:, :, 3].numpy(), expected[:, :, 3], atol=1e-5)


@pytest.mark.parametrize("alpha", ["copy", "denoise"])
def test_each_rgba_result_is_the_caller_s_own(alpha, rng):
    """A float32 RGBA result is answered without a further copy: it must still be a tensor
    of the call's own, which the next call (other images) leaves as it was."""
    first_images, second_images = (_images(rng, 24, 32, None, 4) for _ in range(2))
    first_tensors = [torch.from_numpy(a.astype(np.float32)) for a in first_images]
    second_tensors = [torch.from_numpy(a.astype(np.float32)) for a in second_images]
    with _denoiser(hdr=True) as den:
        first = den.denoise(*first_tensors, alpha=alpha)
        kept = first.clone()
        second = den.denoise(*second_tensors, alpha=alpha)
        expected = den.denoise(*[t.numpy() for t in second_tensors], alpha=alpha)
    assert first.dtype == torch.float32 and first.shape == (24, 32, 4)
    assert first.data_ptr() != second.data_ptr()
    assert all(first.data_ptr() != t.data_ptr() for t in first_tensors)
    assert torch.equal(first, kept)
    np.testing.assert_array_equal(second[:, :, :3].numpy(), expected[:, :, :3])
    np.testing.assert_allclose(second[:, :, 3].numpy(), expected[:, :, 3], atol=1e-6)
