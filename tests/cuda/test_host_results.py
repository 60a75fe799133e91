"""NumPy results of the cuda backend come from a pool of pinned arrays
(`backends.cuda.host_results`): reused only once nobody holds them, never overwritten
while the caller (or a view of it) still does.

Runs on the CPU too (tests/cuda/conftest.py; the torch engine, a tiny random U-Net).
"""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import torch

import oidn_gpu
from oidn_gpu.backends.cuda.host_results import PinnedResults
from tests.cuda.conftest import HAS_CUDA

TINY_AOV = Path(__file__).resolve().parents[1] / "data" / "tiny_base_ic9.tza"


def _pool(**kwargs) -> PinnedResults:
    return PinnedResults(torch, pinned=HAS_CUDA, **kwargs)


def test_a_dropped_array_is_reused_and_a_held_one_is_not():
    pool = _pool(slots=2)
    _, first = pool.take((4, 5, 3))
    address = first.ctypes.data
    _, second = pool.take((4, 5, 3))
    assert second.ctypes.data != address  # the first is still held
    assert pool.take((4, 5, 3)) is None  # both slots held: the caller allocates
    del first
    gc.collect()
    _, third = pool.take((4, 5, 3))
    assert third.ctypes.data == address
    assert third.dtype == np.float32 and third.shape == (4, 5, 3)


def test_a_view_keeps_its_array_out_of_the_pool():
    pool = _pool(slots=1)
    _, array = pool.take((2, 3, 3))
    view = array[:, :, 0]
    del array
    gc.collect()
    assert pool.take((2, 3, 3)) is None
    del view
    gc.collect()
    assert pool.take((2, 3, 3)) is not None


def test_a_free_slot_changes_size_and_large_results_are_not_pooled():
    pool = _pool(slots=1, max_bytes=4 * 100)
    _, array = pool.take((2, 2, 3))
    del array
    _, other = pool.take((3, 3, 3))
    assert other.shape == (3, 3, 3) and pool.nbytes() == 27 * 4
    assert pool.take((10, 10, 3)) is None  # 1,200 bytes > max_bytes


def test_results_held_by_the_caller_are_never_overwritten():
    rng = np.random.default_rng(3)
    inputs = [rng.random((16, 16, 9), np.float32) for _ in range(4)]

    def images(x):
        return x[:, :, 0:3], x[:, :, 3:6], x[:, :, 6:9]

    with oidn_gpu.Denoiser(backend="cuda", engine="cudnn", weights=TINY_AOV) as denoiser:
        expected = [denoiser.denoise(*images(x)).copy() for x in inputs]
        held = [denoiser.denoise(*images(x)) for x in inputs]  # more than the pool's slots
        view = held[0][:, :, 1]
        assert len({a.ctypes.data for a in held}) == len(held)
        for result, want in zip(held, expected, strict=True):
            np.testing.assert_array_equal(result, want)
        del held
        gc.collect()
        again = [denoiser.denoise(*images(x)) for x in inputs[1:]]
        np.testing.assert_array_equal(view, expected[0][:, :, 1])
        for result, want in zip(again, expected[1:], strict=True):
            np.testing.assert_array_equal(result, want)
        del again, view
        gc.collect()
        # a loop that drops each result reuses the pool's memory
        addresses = set()
        for x in inputs:
            out = denoiser.denoise(*images(x))
            addresses.add(out.ctypes.data)
            del out
        (engine,) = denoiser._engines.values()
        pooled = {t.data_ptr() for t in engine.runner.denoiser._results.tensors()}
        assert addresses <= pooled and len(pooled) == 2
