"""The wgpu host-array path: mapped upload buffers, parallel copies, results into ``output=``.

Host images reach the GPU through persistent mapped upload buffers filled by
several threads (``OIDN_GPU_UPLOAD=mapped``) or through queue writes
(``queue``); both must give the same image bit for bit, for float16, strided
and non-finite inputs, and across image sizes (the buffers are replaced when the
size changes). Results are copied from the mapped readback straight into the
caller's ``output`` (float16 rounded as ``astype`` rounds).
"""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.backends.wgpu.executor import WgpuExecutor
from oidn_gpu.backends.wgpu.runner import GpuDenoiser
from oidn_gpu.errors import (
    CancelledError,
    InvalidArgumentError,
    InvalidOperationError,
    NonFiniteInputWarning,
)
from oidn_gpu.image import tiling
from oidn_gpu.image.process import Mode
from oidn_gpu.image.transfer import Transfer
from tests import datasets

MODE = Mode(Transfer.PU, True, False, 0.8)


def _images(h: int, w: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    color = (rng.random((h, w, 4)) * 3).astype(np.float32)[:, :, :3]  # strided RGB view
    color[1, 2, 0] = np.nan
    color[3, 1, 2] = -np.inf
    albedo = rng.random((h, w, 3)).astype(np.float16)
    normal = (rng.random((h, w + 5, 3)) * 2 - 1).astype(np.float32)[:, 2 : w + 2]  # a crop
    return [color, albedo, normal]


@pytest.fixture()
def denoiser(gpu, tiny_models):
    executor = WgpuExecutor(tiny_models["tiny_base_ic9"], device=gpu, precision="fp32")
    with GpuDenoiser(executor) as den:
        yield den
    executor.close()


def _run(den: GpuDenoiser, images: list[np.ndarray], **kwargs) -> np.ndarray:
    h, w = images[0].shape[:2]
    plan = tiling.plan_tiles_max_edge(h, w, max_edge=48, overlap=16)
    return den.denoise(*images, mode=MODE, plan=plan, autoexposure=True, **kwargs)


def test_mapped_and_queue_uploads_agree_across_sizes(denoiser: GpuDenoiser) -> None:
    sizes = [(37, 53), (21, 30), (37, 53)]
    results = {}
    for upload in ("queue", "mapped"):
        denoiser.upload_mode = upload
        results[upload] = [_run(denoiser, _images(h, w, seed=h)) for h, w in sizes]
        live = denoiser.resources()
        again = _run(denoiser, _images(*sizes[-1], seed=sizes[-1][0]))
        assert denoiser.resources() == live  # the buffers of one size are reused
        assert np.array_equal(again, results[upload][-1], equal_nan=True)
    for queued, mapped in zip(results["queue"], results["mapped"], strict=True):
        assert queued.dtype == mapped.dtype == np.float32
        assert np.array_equal(queued, mapped, equal_nan=True)
    assert np.array_equal(results["mapped"][0], results["mapped"][2], equal_nan=True)
    assert np.isfinite(results["mapped"][1]).any()


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_results_are_copied_into_strided_output_arrays(denoiser: GpuDenoiser, dtype) -> None:
    images = _images(37, 53, seed=1)
    plain = _run(denoiser, images)
    rgba = np.full((37, 53, 4), 5.0, dtype)
    with np.errstate(over="ignore"):
        returned = _run(denoiser, images, output=rgba[:, :, :3])
        expected = plain.astype(dtype)
    assert np.shares_memory(returned, rgba)
    assert np.array_equal(rgba[:, :, :3], expected, equal_nan=True)
    assert (rgba[:, :, 3] == 5.0).all()


def test_a_cancelled_denoise_leaves_the_output_untouched(denoiser: GpuDenoiser) -> None:
    images = _images(37, 53, seed=2)
    output = np.full((37, 53, 3), 9.0, np.float32)
    with pytest.raises(CancelledError):
        _run(denoiser, images, output=output, progress=lambda fraction: False)
    assert (output == 9.0).all()
    with pytest.raises(InvalidArgumentError, match=r"output has shape \(37, 52, 3\)"):
        _run(denoiser, images, output=np.empty((37, 52, 3), np.float32))
    with pytest.raises(InvalidArgumentError, match="float32 or float16"):
        _run(denoiser, images, output=np.empty((37, 53, 3), np.float64))


def test_views_of_mapped_memory_cannot_outlive_the_mapping(gpu) -> None:
    buffer = gpu.create_upload_buffer("oidn/test/upload", 64)
    kept: list[np.ndarray] = []
    with pytest.raises(InvalidOperationError, match="outlived its mapping"):
        gpu.write_mapped_with(buffer, 64, kept.append)
    kept.clear()  # never read: the memory is unmapped
    assert buffer.map_state == "unmapped"
    gpu.write_mapped_with(buffer, 64, lambda view: view.fill(1))  # mapped again, usable
    assert buffer.map_state == "unmapped"
    buffer.destroy()


def _scene(h: int = 45, w: int = 61) -> list[np.ndarray]:
    crop = datasets.scene_crop("textured_checker", ("color_4spp", "albedo", "normal"))
    return [np.ascontiguousarray(crop[k][:h, :w, :3]) for k in ("color_4spp", "albedo", "normal")]


def test_denoiser_writes_output_in_place_as_a_new_result_would_be() -> None:
    color, albedo, normal = _scene()
    options = {"hdr": True, "backend": "wgpu", "precision": "fp32", "quality": "fast"}
    with oidn_gpu.Denoiser(**options) as den:
        fresh = den.denoise(color, albedo, normal)
        half = den.denoise(color.astype(np.float16), albedo, normal)
        out16 = np.zeros((45, 61, 3), np.float16)
        assert den.denoise(color, albedo, normal, output=out16) is out16
        in_place = color.copy()
        assert den.denoise(in_place, albedo, normal, output=in_place) is in_place
        gray = np.zeros((45, 61), np.float32)
        assert den.denoise(color[:, :, 0], output=gray) is gray
        gray_fresh = den.denoise(np.ascontiguousarray(color[:, :, 0]))
    assert fresh.dtype == np.float32 and half.dtype == np.float16
    assert np.array_equal(out16, fresh.astype(np.float16))
    assert np.array_equal(in_place, fresh)
    assert np.array_equal(gray, gray_fresh) and gray_fresh.shape == (45, 61)


def test_in_place_denoise_with_a_zero_autoexposure_still_counts_the_bad_pixels() -> None:
    color = np.random.default_rng(3).random((16, 16, 3), np.float32) * np.float32(4)
    color[2, 5, 0] = np.inf  # the log-average is infinite: autoexposure 0, as in OIDN
    color[9, 1, :] = np.inf
    options = {"hdr": True, "backend": "wgpu", "precision": "fp32", "quality": "fast"}
    with oidn_gpu.Denoiser(**options) as den:
        with pytest.warns(NonFiniteInputWarning, match="2 pixels of the color are not finite"):
            fresh = den.denoise(color)
        in_place = color.copy()
        with pytest.warns(NonFiniteInputWarning, match="2 pixels of the color are not finite"):
            assert den.denoise(in_place, output=in_place) is in_place
        assert den.info().input_scale == 0.0
    assert np.array_equal(in_place, fresh, equal_nan=True)
