"""CUDA tensors in, CUDA tensors out of `oidn_gpu.denoise` (copied through the host)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import oidn_gpu

pytestmark = pytest.mark.cuda_device


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.uint8])
def test_cuda_tensor_comes_back_on_its_device_with_its_dtype(dtype) -> None:
    rng = np.random.default_rng(0)
    host = torch.from_numpy((rng.random((24, 20, 3)) * 255).astype(np.uint8))
    if dtype.is_floating_point:
        host = (host.float() / 255).to(dtype)
    cuda = host.to("cuda")
    result = oidn_gpu.denoise(cuda, backend="reference")
    assert result.device == cuda.device and result.dtype == dtype and result.shape == cuda.shape
    assert torch.equal(result.cpu(), oidn_gpu.denoise(host, backend="reference"))
    out = torch.zeros(24, 20, 3, dtype=torch.float64, device="cuda")
    assert oidn_gpu.denoise(cuda, output=out, backend="reference") is out
    expected = oidn_gpu.denoise(
        host.float() / 255 if dtype == torch.uint8 else host.float(), backend="reference"
    )
    assert torch.equal(out.cpu(), expected.double())
