"""Large host copies split across threads give exactly NumPy's copy (and float16 rounding)."""

from __future__ import annotations

import os
import select
import signal

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import host_copy


def _source(shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(3)
    values = (rng.standard_normal(shape) * 3e4).astype(np.float32)  # some beyond float16's range
    flat = values.reshape(-1)
    flat[::997] = np.nan
    flat[1::991] = np.inf
    flat[2::983] = -np.inf
    return values


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_parallel_float32_to_float16_rounds_as_astype(threads: int) -> None:
    src = _source((601, 1024, 3))  # 7 MB: split into several slices, one row count odd
    dst = np.empty(src.shape, np.float16)
    with np.errstate(over="ignore"):
        expected = src.astype(np.float16)
        host_copy.parallel_copyto(dst, src, threads=threads)
    assert np.array_equal(dst.view(np.uint16), expected.view(np.uint16))


def test_parallel_copy_into_a_strided_view_leaves_the_rest() -> None:
    src = _source((700, 900, 3))
    rgba = np.full((700, 900, 4), 7.0, np.float32)
    host_copy.parallel_copyto(rgba[:, :, :3], src, threads=4)
    assert np.array_equal(rgba[:, :, :3], src, equal_nan=True)
    assert (rgba[:, :, 3] == 7.0).all()


def test_small_copies_and_bad_shapes() -> None:
    src = _source((4, 5, 3))
    dst = np.empty_like(src)
    host_copy.parallel_copyto(dst, src, threads=4)
    assert np.array_equal(dst, src, equal_nan=True)
    with pytest.raises(InvalidArgumentError, match="shape"):
        host_copy.parallel_copyto(np.empty((4, 5, 2), np.float32), src)


def test_copy_threads_follow_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(host_copy.THREADS_VARIABLE, "3")
    assert host_copy.copy_threads() == 3
    monkeypatch.setenv(host_copy.THREADS_VARIABLE, "zero")
    with pytest.raises(InvalidArgumentError, match="OIDN_GPU_COPY_THREADS='zero'"):
        host_copy.copy_threads()
    monkeypatch.delenv(host_copy.THREADS_VARIABLE)
    assert 1 <= host_copy.copy_threads() <= host_copy.MAX_THREADS


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_copies_with_threads_of_its_own() -> None:
    """The parent's copy threads do not exist in a forked child: it makes its own pool."""
    src = _source((512, 1024, 3))  # 6 MiB: above the threshold, split over 3 threads
    dst = np.empty(src.shape, np.float16)
    host_copy.parallel_copyto(dst, src, threads=3)  # the parent's pool now exists
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: writes 1 when its copy equals the parent's
        try:
            os.close(read)
            again = np.empty(src.shape, np.float16)
            host_copy.parallel_copyto(again, src, threads=3)
            os.write(write, b"1" if np.array_equal(again, dst, equal_nan=True) else b"0")
        finally:
            os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], 60)  # a child waiting on missing threads
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    assert ready and answer == b"1"
