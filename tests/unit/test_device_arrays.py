"""Device arrays this process cannot read are refused with our errors, not torch's: a
CUDA array where torch sees no CUDA GPU, a torch tensor without data (``meta``)."""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError

torch = pytest.importorskip("torch")


class HostCudaArray:
    """An object that says it is a CUDA array (``__cuda_array_interface__``, as Numba's
    and CuPy's arrays do) over host memory: never read where CUDA is missing."""

    def __init__(self) -> None:
        self.array = np.ones((8, 8, 3), np.float32)

    @property
    def __cuda_array_interface__(self) -> dict:
        info = self.array.__array_interface__
        return {
            "shape": info["shape"],
            "typestr": info["typestr"],
            "data": info["data"],
            "strides": None,
            "version": 3,
        }


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")
@pytest.mark.parametrize("role", ["color", "albedo", "output"])
def test_a_cuda_array_without_cuda_is_our_error(role):
    images = {"color": torch.ones(8, 8, 3), "albedo": torch.ones(8, 8, 3)}
    images[role] = HostCudaArray()
    denoiser = oidn_gpu.Denoiser(hdr=True, backend="reference")
    with (
        denoiser,
        pytest.raises(
            UnsupportedDeviceError,
            match=f"the {role} image is a CUDA array "
            r"\(HostCudaArray\), but this torch .* sees no CUDA GPU",
        ),
    ):
        denoiser.denoise(images["color"], images["albedo"], output=images.get("output"))


def test_a_meta_tensor_is_our_error():
    with oidn_gpu.Denoiser(hdr=True, backend="reference") as denoiser:
        with pytest.raises(InvalidArgumentError, match="torch tensor on device 'meta'"):
            denoiser.denoise(torch.ones(8, 8, 3, device="meta"))
        result = denoiser.denoise(torch.ones(8, 8, 3))  # a CPU tensor still works
    assert isinstance(result, torch.Tensor) and result.shape == (8, 8, 3)
