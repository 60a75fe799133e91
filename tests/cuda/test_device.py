"""CUDA backend checks that need an NVIDIA GPU: graphs, the profiler, full-size networks.

Run on the H200 (``bench/cuda_h200.sh``); CI without a GPU deselects them
(``-m 'not cuda_device'``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.runner import CudaDenoiser
from oidn_gpu.backends.reference import ReferenceExecutor
from oidn_gpu.image import process
from oidn_gpu.model.unet import load_model
from tests.cuda.conftest import rel_l2

pytestmark = pytest.mark.cuda_device


@pytest.fixture(scope="module")
def model(weights_dir):
    return load_model(weights_dir / "rt_hdr_alb_nrm.tza")


def _inputs(rng, height, width):
    color = torch.from_numpy((rng.random((height, width, 3)) ** 3 * 8).astype(np.float32)).cuda()
    albedo = torch.from_numpy(rng.random((height, width, 3)).astype(np.float32)).cuda()
    normal = torch.from_numpy((rng.random((height, width, 3)) * 2 - 1).astype(np.float32)).cuda()
    return color, albedo, normal


@pytest.mark.parametrize("tune", [False, True])
def test_full_network_matches_reference(model, rng, tune):
    x = rng.random((9, 192, 256), dtype=np.float32)
    expected = ReferenceExecutor(model).run(x)
    with CudaExecutor(model, tune=tune, engine="triton") as executor:
        actual = executor.run(x)
    assert np.isfinite(actual).all()
    assert rel_l2(actual, expected) <= 2e-3


def test_graph_replay_equals_eager(model, rng):
    color, albedo, normal = _inputs(rng, 200, 300)
    mode = process.mode_for("RT", hdr=True)
    executor = CudaExecutor(model, tune=False, engine="triton")
    with CudaDenoiser(executor) as graphed, CudaDenoiser(executor, use_graphs=False) as eager:
        a = graphed.denoise_tensors(color, albedo, normal, mode=mode, autoexposure=True)
        b = graphed.denoise_tensors(color, albedo, normal, mode=mode, autoexposure=True)
        c = eager.denoise_tensors(color, albedo, normal, mode=mode, autoexposure=True)
        torch.cuda.synchronize()
    assert torch.isfinite(a).all()
    assert torch.equal(a, b) and torch.equal(a, c)


def test_tensor_round_trip_makes_no_device_to_host_copy(model, rng):
    color, albedo, normal = _inputs(rng, 256, 384)
    mode = process.mode_for("RT", hdr=True)
    out = torch.empty_like(color)
    with CudaDenoiser(CudaExecutor(model, tune=False, engine="triton")) as denoiser:
        denoiser.denoise_tensors(color, albedo, normal, mode=mode, out=out, autoexposure=True)
        torch.cuda.synchronize()
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(3):
                result = denoiser.denoise_tensors(
                    color, albedo, normal, mode=mode, out=out, autoexposure=True
                )
            torch.cuda.synchronize()
    names = [event.name for event in prof.events()]
    assert any("GraphLaunch" in name for name in names), "no CUDA graph was launched"
    copies = [n for n in names if "DtoH" in n or "Device -> Host" in n or "D2H" in n]
    assert not copies, copies
    assert result is out and result.is_cuda and torch.isfinite(result).all()


def test_numpy_round_trip_matches_tensors(model, rng):
    color, albedo, normal = _inputs(rng, 120, 200)
    mode = process.mode_for("RT", hdr=False, input_scale=1.0)
    with CudaDenoiser(CudaExecutor(model, tune=False, engine="triton")) as denoiser:
        on_device = denoiser.denoise_tensors(color.clamp(max=1), albedo, normal, mode=mode)
        on_host = denoiser.denoise(
            color.clamp(max=1).cpu().numpy(),
            albedo.cpu().numpy(),
            normal.cpu().numpy(),
            mode=mode,
        )
    np.testing.assert_array_equal(on_host, on_device.cpu().numpy())


def test_cudnn_fallback_on_the_gpu(model, rng):
    x = rng.random((9, 96, 128), dtype=np.float32)
    expected = ReferenceExecutor(model).run(x)
    with CudaExecutor(model, engine="cudnn") as executor:
        assert executor.engine == "cudnn"
        assert rel_l2(executor.run(x), expected) <= 2e-3
