"""The oidn backend's host images through OIDN buffers in device memory, as on OIDN's GPU
devices (CUDA, HIP, SYCL), run here on OIDN's CPU device (OIDN buffers exist on every
device): the same bits as the CPU device's zero-copy path and as a direct pyoidn call,
buffers kept across frames of one size, and the benchmark's direct pyoidn call through
buffers."""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.backends import probe
from oidn_gpu.backends.oidn import bench, images, runner
from oidn_gpu.errors import CancelledError
from oidn_gpu.image.autoexposure import autoexposure
from tests.oracle import oidn_denoise

pytestmark = pytest.mark.skipif(not probe("oidn").available, reason=probe("oidn").note)


def _images(rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, ...]:
    color = (rng.random((h, w, 3), np.float32) ** 3 * 8).astype(np.float32)
    albedo = rng.random((h, w, 3), np.float32)
    normal = (rng.random((h, w, 3), np.float32) * 2 - 1).astype(np.float32)
    return color, albedo, normal


def _runner(den: oidn_gpu.Denoiser) -> runner.OidnRunner:
    (engine,) = den._engines.values()
    return engine.runner


@pytest.fixture
def device_buffers(monkeypatch):
    """OIDN's CPU device takes the GPU devices' path: host images through OIDN buffers."""
    monkeypatch.setattr(runner, "uses_device_buffers", lambda device: True)


def test_the_cpu_device_reads_host_arrays_where_they_are(rng) -> None:
    rgba = np.concatenate([_images(rng, 24, 32)[0], rng.random((24, 32, 1), np.float32)], 2)
    albedo, normal = _images(rng, 24, 32)[1:]
    with oidn_gpu.Denoiser(backend="oidn", device="cpu", hdr=True) as den:
        den.denoise(rgba, albedo, normal)
        run = _runner(den)
        assert run._buffers is None
        color = run._filter.images["color"]
        assert color.buffer is None and color.address == rgba.ctypes.data  # no copy
        assert (color.pixel_stride, color.row_stride) == (16, 16 * 32)


@pytest.mark.oracle
def test_device_buffers_give_the_bits_of_shared_images_and_of_pyoidn(rng, device_buffers):
    h, w = 40, 56
    rgba = np.concatenate([_images(rng, h, w)[0], rng.random((h, w, 1), np.float32)], 2)
    albedo, normal = _images(rng, h, w)[1:]
    color = np.ascontiguousarray(rgba[:, :, :3])
    expected = oidn_denoise(color, albedo, normal, hdr=True)
    other = _images(rng, 32, 24)
    with oidn_gpu.Denoiser(backend="oidn", device="cpu", hdr=True) as den:
        first = den.denoise(color, albedo, normal)
        run = _runner(den)
        held = dict(run._buffers._buffers)
        assert set(held) == {"color", "albedo", "normal", "output"}
        assert held["color"][0] == h * w * 12
        descs = dict(run._filter.images)
        assert descs["color"].buffer == held["color"][1] and descs["color"].address == 0
        view = den.denoise(rgba, albedo[:, ::1], normal)  # the RGB view of an RGBA image
        assert run._buffers._buffers == held  # the same buffers for a frame of one size
        assert run._filter.images == descs  # the filter's images not set again
        smaller = den.denoise(*other)  # a new size: new buffers
        assert run._buffers._buffers["color"][0] == 32 * 24 * 12
        output = np.full((h, w, 3), 7.0, np.float32)
        assert den.denoise(color, albedo, normal, output=output) is output
        half = den.denoise(color.astype(np.float16), albedo, normal)
        assert run._buffers._buffers["color"][0] == h * w * 6
    np.testing.assert_array_equal(first, expected)
    np.testing.assert_array_equal(view[:, :, :3], expected)
    np.testing.assert_array_equal(view[:, :, 3], rgba[:, :, 3])
    np.testing.assert_array_equal(output, expected)
    np.testing.assert_array_equal(smaller, oidn_denoise(*other, hdr=True))
    assert half.dtype == np.float16
    np.testing.assert_array_equal(
        half, oidn_denoise(color.astype(np.float16), albedo, normal, hdr=True)
    )
    with oidn_gpu.Denoiser(backend="oidn", device="cpu", hdr=True) as den:
        assert den.denoise(color, albedo, normal) is not None
        assert _runner(den)._buffers is not None  # the path forced here, closed cleanly


def test_device_buffers_match_the_zero_copy_path_with_options_and_one_channel(
    rng, monkeypatch
) -> None:
    color, albedo, normal = _images(rng, 20, 36)
    gray = np.ascontiguousarray(color[:, :, 0])
    results = []
    for forced in (False, True):
        monkeypatch.setattr(runner, "uses_device_buffers", lambda device, forced=forced: forced)
        with oidn_gpu.Denoiser(
            backend="oidn", device="cpu", hdr=True, input_scale=0.5, quality="balanced"
        ) as den:
            results.append(
                (den.denoise(color, albedo, normal), den.denoise(color, albedo), den.denoise(gray))
            )
            runners = [engine.runner for engine in den._engines.values()]
            assert len(runners) == 3  # one model per set of inputs
            assert all((r._buffers is not None) is forced for r in runners)
    for zero_copy, buffered in zip(*results, strict=True):
        assert buffered.shape == zero_copy.shape
        np.testing.assert_array_equal(buffered, zero_copy)
    assert results[1][2].shape == (20, 36)


def test_cancel_through_device_buffers_leaves_the_output(rng, device_buffers) -> None:
    images_ = _images(rng, 32, 48)
    with oidn_gpu.Denoiser(backend="oidn", device="cpu", hdr=True) as den:
        expected = den.denoise(*images_)
        output = np.full_like(images_[0], 7.0)
        with pytest.raises(CancelledError):
            den.denoise(*images_, output=output, progress=lambda fraction: fraction < 0.5)
        assert (output == 7.0).all()
        np.testing.assert_array_equal(den.denoise(*images_), expected)  # still usable


def test_pixel_bytes_of_oidns_formats() -> None:
    assert [images.pixel_bytes(images.image_format(False, c)) for c in (1, 2, 3)] == [4, 8, 12]
    assert [images.pixel_bytes(images.image_format(True, c)) for c in (1, 2, 3)] == [2, 4, 6]


@pytest.mark.oracle
def test_the_benchmarks_pyoidn_call_through_device_buffers_gives_the_same_image(rng) -> None:
    """The direct pyoidn call of ``oidn-gpu bench --backend oidn`` on a GPU device (OIDN
    buffers in device memory), on the CPU device: the image of its shared arrays."""
    images_ = _images(rng, 24, 40)
    outputs = []
    for device_buffers in (False, True):
        out = np.empty_like(images_[0])
        with bench._pyoidn_filter(images_, "cpu", out, device_buffers) as denoise:
            denoise()
            first = out.copy()
            out[...] = 0
            denoise()  # again: the images written again, the result read again
        np.testing.assert_array_equal(out, first)
        outputs.append(out)
    np.testing.assert_array_equal(outputs[1], outputs[0])
    np.testing.assert_array_equal(outputs[1], oidn_denoise(*images_, hdr=True))


def test_device_buffers_report_the_autoexposure_when_info_reads_it(rng, device_buffers):
    color, albedo, normal = _images(rng, 24, 40)
    with oidn_gpu.Denoiser(backend="oidn", device="cpu", hdr=True) as den:
        assert isinstance(den.denoise(color, albedo, normal), np.ndarray)
        assert den.info().input_scale == autoexposure(color)
        den.denoise(color, albedo, normal)
        scale = den.info().input_scale
        assert scale == autoexposure(color)
        assert den.info().input_scale == scale  # computed once
        dark = (color / 64).astype(np.float32)
        den.denoise(dark, albedo, normal)
        assert den.info().input_scale == autoexposure(dark) != scale
