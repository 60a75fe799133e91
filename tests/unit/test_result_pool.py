"""Results with alpha written into reused arrays (`oidn_gpu.image.result_pool`): the
runner writes the colour channels, the alpha goes to the last one, and an array comes
back only once the caller and every view of it let go."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.image.result_pool import ResultPool


def test_an_array_comes_back_only_when_every_view_is_dropped():
    pool = ResultPool(slots=1)
    first = pool.take((4, 5, 4), np.float32)
    view = first[:, :, :3]
    address = first.__array_interface__["data"][0]
    del first
    gc.collect()
    second = pool.take((4, 5, 4), np.float32)  # the view still holds the slot
    assert second.__array_interface__["data"][0] != address
    assert not np.shares_memory(second, view)
    del view, second
    gc.collect()
    third = pool.take((4, 5, 4), np.float32)
    assert third.__array_interface__["data"][0] == address  # reused
    assert third.flags.writeable and third.dtype == np.float32


def test_large_or_empty_shapes_are_not_pooled():
    pool = ResultPool(max_bytes=64)
    big = pool.take((4, 5, 4), np.float32)
    empty = pool.take((0, 5, 4), np.float16)
    assert big.shape == (4, 5, 4) and empty.shape == (0, 5, 4) and empty.dtype == np.float16
    assert pool.nbytes() == 0


@pytest.mark.parametrize("backend", ["reference", "oidn"])
def test_rgba_results_keep_the_colour_and_alpha_of_each_call(backend):
    rng = np.random.default_rng(7)
    height, width = 24, 32
    colour = (rng.random((height, width, 3)) * 4).astype(np.float32)
    alpha = rng.random((height, width, 1)).astype(np.float32)
    albedo = rng.random((height, width, 3)).astype(np.float32)
    with oidn_gpu.Denoiser(hdr=True, backend=backend) as den:
        rgb = den.denoise(colour, albedo)
        first = den.denoise(np.concatenate([colour, alpha], axis=2), albedo)
        kept = first.copy()
        second = den.denoise(np.concatenate([colour * 0.5, alpha * 0.5], axis=2), albedo)
        third = den.denoise(np.concatenate([colour, alpha], axis=2).astype(np.float16), albedo)
    assert np.array_equal(first[:, :, :3], rgb)
    assert np.array_equal(first[:, :, 3], alpha[:, :, 0])
    assert np.array_equal(first, kept)  # the later calls wrote elsewhere
    assert not np.shares_memory(first, second)
    assert np.array_equal(second[:, :, 3], alpha[:, :, 0] * 0.5)
    assert third.dtype == np.float16 and third.shape == (height, width, 4)
