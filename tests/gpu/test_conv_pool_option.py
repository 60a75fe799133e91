"""``conv_pool=False`` through `Denoiser`: the pooled encoder convs run unfused (oidn-web's
graph), so ``kernel="spatial"`` and ``"subgroup"`` reach them; the image is the same."""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.errors import InvalidArgumentError

from .conftest import DATA

pytestmark = pytest.mark.gpu

WEIGHTS = (DATA / "tiny_base_ic3.tza").read_bytes()
POOLED = ("enc_conv1", "enc_conv2", "enc_conv3", "enc_conv4")  # each followed by a pool


def _denoise(color: np.ndarray, **options):
    with oidn_gpu.Denoiser(weights=WEIGHTS, backend="wgpu", precision="fp32", **options) as den:
        out = den.denoise(color)
        return out, den.info()


@pytest.mark.parametrize("kernel", ["spatial", "subgroup"])
def test_unfused_pooled_convs_run_the_asked_kernel(kernel, rng):
    color = rng.random((32, 32, 3), dtype=np.float32)
    with pytest.warns(RuntimeWarning, match="no fused pool"):
        _, fused = _denoise(color, kernel=kernel)
    assert all("no fused pool" in fused.kernel_fallbacks.get(f"pool{i}", "") for i in range(1, 5))
    _, unfused = _denoise(color, kernel=kernel, conv_pool=False)
    assert not any("fused pool" in reason for reason in unfused.kernel_fallbacks.values())
    for name in POOLED:
        assert unfused.kernels[name].startswith(f"conv-{kernel}"), unfused.kernels[name]


def test_unfused_pools_give_the_same_image(rng):
    color = rng.random((32, 32, 3), dtype=np.float32)
    fused, _ = _denoise(color, kernel="direct")
    unfused, info = _denoise(color, kernel="direct", conv_pool=False)
    assert "pool1" in info.kernels  # a stand-alone max pool
    np.testing.assert_array_equal(unfused, fused)


def test_conv_pool_must_be_a_bool():
    with pytest.raises(InvalidArgumentError, match="conv_pool must be True or False"):
        oidn_gpu.Denoiser(weights=WEIGHTS, backend="wgpu", conv_pool="no").denoise(
            np.zeros((16, 16, 3), np.float32)
        )
