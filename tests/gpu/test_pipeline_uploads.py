"""Host images reach the wgpu pipeline as they are: float16 and strided views, no conversions.

The input pass and the autoexposure widen float16 on the GPU (exactly), and an
RGBA array's RGB view or a crop is uploaded with its strides, so each must give
the image its dense float32 copy gives, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.backends.wgpu import staging
from oidn_gpu.backends.wgpu.executor import WgpuExecutor
from oidn_gpu.backends.wgpu.runner import GpuDenoiser
from oidn_gpu.image import tiling
from oidn_gpu.image.process import Mode
from oidn_gpu.image.transfer import Transfer
from tests import datasets

pytestmark = pytest.mark.gpu


def test_strided_views_are_uploaded_in_place() -> None:
    rgba = np.zeros((6, 7, 4), np.float16)
    span, pixel_stride, row_stride = staging.element_span(rgba[1:5, 2:6, :3])
    assert np.shares_memory(span, rgba)
    assert (pixel_stride, row_stride) == (4, 28)
    assert span.size == 3 * 28 + 3 * 4 + 3
    reversed_rows = rgba[::-1, :, :3]  # negative strides: copied to a dense array
    span, pixel_stride, row_stride = staging.element_span(reversed_rows)
    assert not np.shares_memory(span, rgba) and (pixel_stride, row_stride) == (3, 21)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_half_and_rgba_inputs_give_the_image_of_their_float32_copy(dtype) -> None:
    crop = datasets.scene_crop("textured_checker", ("color_4spp", "albedo", "normal"))
    h, w = 45, 61  # odd sizes: odd float16 element counts
    color = crop["color_4spp"][:h, :w, :3]
    rgba = np.concatenate([color, np.ones((h, w, 1), np.float32)], axis=2).astype(dtype)
    albedo = crop["albedo"][:h, :w].astype(dtype)
    normal = crop["normal"][:h, :w].astype(dtype)
    options = {"hdr": True, "backend": "wgpu", "precision": "fp32", "quality": "fast"}
    with oidn_gpu.Denoiser(**options) as den:
        ours = den.denoise(rgba, albedo, normal)
        scale = den.info().input_scale
        dense = den.denoise(
            *(np.ascontiguousarray(a, np.float32) for a in (rgba[:, :, :3], albedo, normal))
        )
        assert den.info().input_scale == scale
    assert ours.dtype == dtype and ours.shape == (h, w, 4)
    assert np.array_equal(ours[:, :, 3], rgba[:, :, 3])
    assert np.array_equal(ours[:, :, :3], dense.astype(dtype))


def test_interactive_tiles_read_half_rgba_views_too(gpu, tiny_models) -> None:
    rng = np.random.default_rng(6)
    rgba = (rng.random((37, 53, 4)) * 3).astype(np.float16)
    mode = Mode(Transfer.PU, True, False, 0.8)
    plan = tiling.plan_tiles_max_edge(37, 53, max_edge=48, overlap=16)
    executor = WgpuExecutor(tiny_models["tiny_base_ic3"], device=gpu, precision="fp32")
    with GpuDenoiser(executor) as denoiser:
        tiles = denoiser.denoise_interactive(rgba[:, :, :3], mode=mode, plan=plan)
        whole = denoiser.denoise(
            np.ascontiguousarray(rgba[:, :, :3], np.float32), mode=mode, plan=plan
        )
    executor.close()
    assert np.array_equal(tiles, whole)
