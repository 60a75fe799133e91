"""`Denoiser.denoise` and `oidn_gpu.denoise` on CUDA tensors, on an NVIDIA GPU: nothing comes
back to the host, the answer stays on the tensors' device, and the images are the NumPy
path's bits.

Run on the H200 (``bench/cuda_h200.sh``); CI without a GPU deselects them.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import oidn_gpu
from tests.cuda.conftest import DlpackArray

pytestmark = pytest.mark.cuda_device

SIZE = (96, 160)
DTYPES = (torch.float16, torch.float32, torch.float64, torch.bfloat16, torch.uint8, torch.uint16)


def _host_images(rng, ldr=False):
    height, width = SIZE
    top = 1.0 if ldr else 8.0
    color = (rng.random((height, width, 3)) ** 3 * top).astype(np.float32)
    albedo = rng.random((height, width, 3)).astype(np.float32)
    normal = (rng.random((height, width, 3)) * 2 - 1).astype(np.float32)
    return color, albedo, normal


def _cuda(rng, device="cuda"):
    return [torch.from_numpy(a).to(device) for a in _host_images(rng)]


def _device_to_host_copies(prof):
    names = [event.name for event in prof.events()]
    assert any("GraphLaunch" in name for name in names), "no CUDA graph was launched"
    return [n for n in names if "DtoH" in n or "Device -> Host" in n or "D2H" in n]


def _profile(fn, calls=3):
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=activities) as prof:
        results = [fn() for _ in range(calls)]
        torch.cuda.synchronize()
    return prof, results


def test_denoiser_on_cuda_tensors_copies_nothing_to_the_host(rng):
    images = _cuda(rng)
    with oidn_gpu.Denoiser(hdr=True, backend="cuda", engine="triton") as den:
        den.denoise(*images)  # compiles, captures
        den.denoise(*[t.clone() for t in images])
        prof, results = _profile(lambda: den.denoise(*[t.clone() for t in images]))
        assert not _device_to_host_copies(prof)
        prof, same = _profile(lambda: den.denoise(*images))
        assert not _device_to_host_copies(prof)
        scale = den.info().input_scale  # read here, after the profiled calls
        expected = den.denoise(*[t.cpu().numpy() for t in images])
        assert den.info().input_scale == scale
    for result in results + same:
        assert result.is_cuda and result.device == images[0].device
        np.testing.assert_array_equal(result.cpu().numpy(), expected)


def test_one_call_on_cuda_tensors_copies_nothing_to_the_host(rng):
    images = _cuda(rng)
    out = torch.empty_like(images[0])
    oidn_gpu.denoise(*images, hdr=True, engine="triton", output=out)  # warms the cached denoiser
    prof, results = _profile(
        lambda: oidn_gpu.denoise(*images, hdr=True, engine="triton", output=out)
    )
    assert not _device_to_host_copies(prof)
    assert all(result is out for result in results)
    fresh = oidn_gpu.denoise(*images, hdr=True, engine="triton")
    assert fresh.device == images[0].device and torch.equal(fresh, out)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype_gives_the_numpy_paths_bits_on_the_gpu(dtype, rng):
    ldr = dtype in (torch.uint8, torch.uint16)
    host = _host_images(rng, ldr=ldr)
    if ldr:
        top = 255 if dtype == torch.uint8 else 65535
        host = [np.rint(a * top).astype(np.int32) for a in host[:2]] + [
            np.rint((host[2] + 1) / 2 * top).astype(np.int32)
        ]
    images = [torch.from_numpy(a).to(dtype).cuda() for a in host]
    with oidn_gpu.Denoiser(hdr=not ldr, backend="cuda", engine="triton") as den:
        actual = den.denoise(*images)
        given = [
            t.cpu().float().numpy() if dtype == torch.bfloat16 else t.cpu().numpy() for t in images
        ]
        expected = den.denoise(*given)
    assert actual.is_cuda and actual.dtype == dtype
    if dtype == torch.bfloat16:
        assert torch.equal(actual.cpu(), torch.from_numpy(expected).to(dtype))
    else:
        np.testing.assert_array_equal(actual.cpu().numpy(), expected, strict=True)


def test_side_streams_and_fresh_tensors(rng):
    images = _cuda(rng)
    with oidn_gpu.Denoiser(hdr=True, backend="cuda", engine="triton") as den:
        expected = den.denoise(*images)
        streams = [torch.cuda.Stream(), torch.cuda.Stream()]
        results = []
        for index in range(4):
            with torch.cuda.stream(streams[index % 2]):
                fresh = [t.clone() for t in images]
                results.append(den.denoise(*fresh))
        torch.cuda.synchronize()
    for result in results:
        assert torch.equal(result, expected)


def test_an_alpha_denoised_beside_the_colour_is_the_numpy_path_s(rng):
    """``alpha="denoise"`` on CUDA tensors queues the alpha's fit and network on a side
    stream beside the colour's network: the colour is the RGB call's bits and the alpha the
    NumPy path's (which queues it after the colour), also for fresh tensors dropped at once
    (their memory handed back while the side stream may still read it)."""
    color, albedo, normal = _host_images(rng)
    alpha = rng.random((*SIZE, 1)).astype(np.float32)
    rgba = np.concatenate([color, alpha], axis=2)
    images = [torch.from_numpy(a).cuda() for a in (rgba, albedo, normal)]
    with oidn_gpu.Denoiser(hdr=True, backend="cuda", engine="triton") as den:
        expected = den.denoise(rgba, albedo, normal, alpha="denoise")
        rgb = den.denoise(images[0][:, :, :3].contiguous(), *images[1:]).cpu().numpy()
        results = [den.denoise(*[t.clone() for t in images], alpha="denoise") for _ in range(4)]
        torch.cuda.synchronize()
    np.testing.assert_array_equal(expected[:, :, :3], rgb)
    assert np.abs(expected[:, :, 3] - alpha[:, :, 0]).max() > 0.01  # the alpha was denoised
    for result in results:
        np.testing.assert_array_equal(result[:, :, :3].cpu().numpy(), rgb)
        np.testing.assert_allclose(result[:, :, 3].cpu().numpy(), expected[:, :, 3], atol=1e-6)


class _ArrayInterface:
    """Another library's CUDA array, seen only through ``__cuda_array_interface__``."""

    def __init__(self, tensor):
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__
        self.keep = tensor


@pytest.mark.parametrize("wrap", [_ArrayInterface, DlpackArray])
def test_cuda_arrays_of_other_libraries(wrap, rng):
    images = _cuda(rng)
    with oidn_gpu.Denoiser(hdr=True, backend="cuda", engine="triton") as den:
        expected = den.denoise(*images)
        result = den.denoise(*[wrap(t) for t in images])
    assert isinstance(result, torch.Tensor) and torch.equal(result, expected)


def test_cupy_arrays_come_back_as_cupy(rng):
    cupy = pytest.importorskip("cupy")
    images = _cuda(rng)
    with oidn_gpu.Denoiser(hdr=True, backend="cuda", engine="triton") as den:
        expected = den.denoise(*images)
        result = den.denoise(*[cupy.from_dlpack(t) for t in images])
    assert isinstance(result, cupy.ndarray)
    assert torch.equal(torch.from_dlpack(result), expected)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_a_tensor_on_another_gpu_is_an_error_or_served_there(rng):
    images = _cuda(rng, "cuda:1")
    with (
        oidn_gpu.Denoiser(hdr=True, backend="cuda", device=0) as den,
        pytest.raises(
            oidn_gpu.InvalidArgumentError, match="on cuda:1 but the denoiser runs on cuda:0"
        ),
    ):
        den.denoise(*images)
    result = oidn_gpu.denoise(*images, hdr=True)  # the one-call form runs where they are
    assert result.device == images[0].device
