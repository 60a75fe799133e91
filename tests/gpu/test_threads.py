"""Threads on the wgpu backend (lavapipe in CI): shared and separate denoisers.

A `Denoiser` shared by threads serializes its calls; denoisers sharing one wgpu
device take turns on its queue; denoisers with their own devices run
concurrently. Each result must equal the sequential result bit for bit (same
weights, same inputs, same kernels). The tiny test network keeps it fast. Device
opens from several threads restore stderr.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from oidn_gpu import Denoiser
from oidn_gpu.backends.wgpu import device as dev
from tests.gpu.conftest import DATA

THREADS = 4
CALLS = 3
SIZES = ((32, 48), (48, 32), (64, 64), (16, 40))
WEIGHTS = DATA / "tiny_base_ic3.tza"


def _images(count: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        (rng.random((*SIZES[i % len(SIZES)], 3), dtype=np.float32) * 4).astype(np.float32)
        for i in range(count)
    ]


def _run_threads(work: Callable[[int], list[np.ndarray]], threads: int) -> list[list[np.ndarray]]:
    barrier = threading.Barrier(threads)

    def start(index: int) -> list[np.ndarray]:
        barrier.wait()
        return work(index)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(start, range(threads)))


def _denoiser(**options) -> Denoiser:
    return Denoiser(hdr=True, backend="wgpu", precision="fp32", weights=WEIGHTS, **options)


def test_shared_wgpu_denoiser_equals_sequential_calls(gpu) -> None:
    images = _images(THREADS * CALLS)
    with _denoiser(device=gpu) as den:
        sequential = [den.denoise(image) for image in images]

        def work(thread: int) -> list[np.ndarray]:
            return [den.denoise(images[thread * CALLS + call]) for call in range(CALLS)]

        concurrent = [out for outs in _run_threads(work, THREADS) for out in outs]
    assert all(np.isfinite(out).all() for out in sequential)
    for index, (got, expected) in enumerate(zip(concurrent, sequential, strict=True)):
        np.testing.assert_array_equal(got, expected, err_msg=f"call {index}")


def test_denoisers_sharing_one_device_in_threads(gpu) -> None:
    """Separate denoisers on the same wgpu device (one queue, one pipeline cache)."""
    images = [_images(CALLS, seed=d) for d in range(THREADS)]
    with _denoiser(device=gpu) as den:
        expected = [[den.denoise(image) for image in imgs] for imgs in images]
    denoisers = [_denoiser(device=gpu.device) for _ in range(THREADS)]
    try:
        results = _run_threads(
            lambda d: [denoisers[d].denoise(image) for image in images[d]], THREADS
        )
    finally:
        for den in denoisers:
            den.close()
    for d, (got, want) in enumerate(zip(results, expected, strict=True)):
        for c, (a, b) in enumerate(zip(got, want, strict=True)):
            np.testing.assert_array_equal(a, b, err_msg=f"denoiser {d}, call {c}")


def test_denoisers_with_their_own_devices_in_threads(gpu) -> None:
    """Each denoiser opens its own device (device=None), concurrently."""
    images = [_images(2, seed=10 + d) for d in range(2)]
    with _denoiser(device=gpu) as den:
        expected = [[den.denoise(image) for image in imgs] for imgs in images]

    def work(d: int) -> list[np.ndarray]:
        with _denoiser() as own:
            return [own.denoise(image) for image in images[d]]

    results = _run_threads(work, 2)
    for d, (got, want) in enumerate(zip(results, expected, strict=True)):
        for c, (a, b) in enumerate(zip(got, want, strict=True)):
            np.testing.assert_array_equal(a, b, err_msg=f"denoiser {d}, call {c}")


def test_stderr_silencing_in_two_threads_restores_stderr() -> None:
    """Device opens silence fd 2; a second thread must wait, not save the silenced fd."""
    before = os.fstat(2)
    inside, release = threading.Event(), threading.Event()

    def first() -> None:
        with dev._native_stderr_silenced():
            inside.set()
            release.wait()

    def second() -> None:
        with dev._native_stderr_silenced():
            pass

    one = threading.Thread(target=first)
    one.start()
    inside.wait()
    two = threading.Thread(target=second)
    two.start()
    two.join(timeout=0.5)
    # The second thread cannot enter while the first holds fd 2 (however loaded the
    # machine is, it can only still be waiting here).
    waiting = two.is_alive()
    release.set()
    one.join()
    two.join()
    after = os.fstat(2)
    assert waiting
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
