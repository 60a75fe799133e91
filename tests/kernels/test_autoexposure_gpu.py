"""GPU autoexposure (kernels.autoexposure) against the host autoexposure (image.autoexposure).

The scales must agree within `tests.autoexposure_tolerance` (1e-6 relative for
geometric means within 2^-8 .. 2^8 of the key, three float32 ULPs of the host's
log2 mean beyond), and be exactly 0 or 1 where the host's is. Images: random
sizes from 1x1 with partial bins at the edges, HDR ranges from 1e-6 to 1e6,
NaN/Inf/negative pixels, float16, 1-3 channels, strided pixels, and the scene
crops.
"""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.image import autoexposure as ae
from oidn_gpu.kernels import autoexposure as gae
from tests import datasets
from tests.autoexposure_tolerance import RTOL, autoexposure_tolerance
from tests.kernels import gpu_runner

pytestmark = pytest.mark.gpu


def gpu_bins(
    color: np.ndarray,
    register_levels: int = gae.BINS_REGISTER_LEVELS,
    *,
    pixel_stride: int | None = None,
    buffer: np.ndarray | None = None,
) -> np.ndarray:
    """The bins kernel's averages ``[bins_h, bins_w]`` of an ``[H, W, C]`` image.

    ``buffer`` (flat) and ``pixel_stride`` describe a strided image in it instead.
    """
    height, width, channels = color.shape
    flat = np.ascontiguousarray(color).reshape(-1) if buffer is None else buffer
    if flat.dtype == np.float16:
        flat = np.concatenate([flat, np.zeros(flat.size % 2, np.float16)]).view(np.uint32)
    bins_h, bins_w = gae.bin_grid(height, width)
    stride = pixel_stride if pixel_stride is not None else channels
    raw = gpu_runner.run(
        gae.generate_bins(gae.AutoexposureSpec(str(color.dtype)), register_levels),
        {"color_image": flat},
        {"bins": 4 * bins_h * bins_w},
        params={
            "color_offset": 0,
            "color_pixel_stride": stride,
            "color_row_stride": stride * width,
            "color_channels": channels,
            "height": height,
            "width": width,
            "bins_h": bins_h,
            "bins_w": bins_w,
        },
        grid_shape=(1, bins_h, bins_w),
    )["bins"]
    return np.frombuffer(raw, np.float32).reshape(bins_h, bins_w)


def gpu_scale(
    color: np.ndarray, *, pixel_stride: int | None = None, buffer: np.ndarray | None = None
) -> tuple[float, float]:
    """(input scale, output scale) the two kernels write for an ``[H, W, C]`` image.

    ``buffer`` (flat) and ``pixel_stride`` describe a strided image in it instead.
    """
    bins = gpu_bins(color, pixel_stride=pixel_stride, buffer=buffer)
    bins_h, bins_w = bins.shape
    frame = gpu_runner.run(
        gae.generate_scale(),
        {"bins": bins.reshape(-1)},
        {"frame": 8},
        params={"bins_h": bins_h, "bins_w": bins_w},
    )["frame"]
    scales = np.frombuffer(frame, np.float32)
    return float(scales[0]), float(scales[1])


def check(color: np.ndarray, **kwargs) -> float:
    """Compare GPU and host scales of ``color``; returns the relative difference."""
    host = ae.autoexposure(color)
    gpu, out = gpu_scale(color, **kwargs)
    if host in (0.0, 1.0):
        assert gpu == host, f"host scale {host}, GPU scale {gpu} for shape {color.shape}"
    else:
        rel = abs(gpu - host) / host
        assert rel <= autoexposure_tolerance(host), (
            f"GPU {gpu} vs host {host}: {rel:.3g} relative, {color.shape}"
        )
    expected_out = 0.0 if gpu == 0.0 else float(np.float32(1) / np.float32(gpu))
    assert out == pytest.approx(expected_out, rel=1e-6)
    return 0.0 if host in (0.0, 1.0) else abs(gpu - host) / host


def test_the_tolerance_is_1e_6_for_geometric_means_within_2_to_the_8() -> None:
    assert autoexposure_tolerance(float(ae.KEY) / 2.0**7.9) == RTOL
    assert autoexposure_tolerance(float(ae.KEY) * 2.0**7.9) == RTOL
    assert autoexposure_tolerance(float(ae.KEY) / 2.0**13) < 2.1e-6


def test_random_sizes_with_partial_bins_match_the_host() -> None:
    rng = np.random.default_rng(11)
    sizes = [(1, 1), (1, 17), (17, 1), (15, 16), (16, 16), (33, 47), (100, 70), (70, 100)]
    sizes += [tuple(int(v) for v in rng.integers(1, 101, 2)) for _ in range(6)]
    for h, w in sizes:
        color = rng.random((h, w, 3), dtype=np.float32) * np.float32(rng.uniform(0.1, 10))
        check(color)


@pytest.mark.parametrize("low,high", [(1e-6, 1e-3), (1e-3, 1e3), (1e-6, 1e6), (1e3, 1e6)])
def test_hdr_ranges_match_the_host(low: float, high: float) -> None:
    rng = np.random.default_rng(int(np.log10(high)) + 7)
    for h, w in [(64, 64), (37, 91), (100, 70)]:
        exponent = rng.uniform(np.log10(low), np.log10(high), (h, w, 3))
        check((10.0**exponent).astype(np.float32))


def test_constant_bright_and_dim_images_match_the_host() -> None:
    # Every bin equal: the bins' rounding errors do not average out here.
    for value in (3e-7, 0.37, 1.0, 2.0**20 + 1, 6e5):
        check(np.full((48, 80, 3), value, np.float32))


def test_nan_inf_and_negative_pixels_follow_the_host() -> None:
    rng = np.random.default_rng(5)
    color = rng.random((64, 80, 3), dtype=np.float32) * np.float32(4)
    color[rng.random((64, 80)) < 0.05] = np.nan
    color[rng.random((64, 80)) < 0.05, 1] = -np.inf
    color[rng.random((64, 80)) < 0.05, 2] = -3.0
    check(color)
    color[3, 5] = np.inf  # +Inf -> FLT_MAX: its bin's sum overflows, the scale is 0
    color[3, 6] = np.inf
    assert ae.autoexposure(color) == 0.0
    check(color)


def test_black_and_tiny_images_give_one() -> None:
    check(np.zeros((20, 30, 3), np.float32))
    check(np.full((20, 30, 3), 1e-9, np.float32))


def test_float16_and_fewer_channels_match_the_host() -> None:
    rng = np.random.default_rng(3)
    for shape in [(31, 45, 3), (30, 45, 1), (29, 17, 2), (1, 1, 3), (1, 1, 1)]:
        color = (rng.random(shape) * 50).astype(np.float16)
        check(color)
        check(color.astype(np.float32))


def test_subnormal_float16_pixels_are_widened_exactly() -> None:
    rng = np.random.default_rng(12)
    dim = (rng.random((33, 40, 3)) * 6e-5).astype(np.float16)  # below 2^-14: subnormal halves
    assert np.count_nonzero(dim < np.float16(2.0**-14)) > dim.size // 2
    check(dim)


def test_strided_pixels_are_read_in_place() -> None:
    rng = np.random.default_rng(8)
    rgba = rng.random((40, 50, 4), dtype=np.float32)
    check(rgba[:, :, :3], pixel_stride=4, buffer=rgba.reshape(-1))
    half = rgba.astype(np.float16)
    check(half[:, :, :3], pixel_stride=4, buffer=half.reshape(-1))


@pytest.mark.parametrize("crop", datasets.SCENES)
def test_scene_crops_match_the_host(crop: str) -> None:
    color = datasets.scene_crop(crop, ("color_4spp",))["color_4spp"]
    check(np.ascontiguousarray(color[:, :, :3], np.float32))
    check(np.ascontiguousarray(color[:, :, :3] * np.float32(1e5), np.float32))
