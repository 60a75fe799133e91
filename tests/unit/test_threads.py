"""Threads and filter reuse on the reference backend.

A `Denoiser` shared by threads serializes its calls, and every result is bit for bit
the sequential one on the main thread: every gemm runs on one BLAS thread whichever
Python thread started the call (threadpoolctl lets only the main thread change
OpenBLAS's thread count; a call from another thread used to sum its gemms over all
BLAS threads, about 5e-6 off). Separate denoisers run concurrently. The filter-reuse
cases mirror Intel OIDN's own oidnTest ("multiple filters" with interleaved sizes,
"filter update" across size and input changes, "multiple devices") at small sizes,
against OIDN 2.5.1 itself through pyoidn.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from oidn_gpu import Denoiser, InvalidOperationError
from tests.compare import assert_close

THREADS = 4
CALLS = 5
# The reference backend against OIDN's CPU device: float rounding only (as the parity tests).
PARITY = 1e-5
# Sizes <= 64 px, different per call: every call re-plans the executor's scratch buffers.
SIZES = ((32, 48), (48, 32), (64, 64), (40, 56), (16, 80))


def _hdr(h: int, w: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random((h, w, 3), dtype=np.float32) * 4).astype(np.float32)


def _ldr(h: int, w: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((h, w, 3), dtype=np.float32)


def _inputs(count: int) -> list[np.ndarray]:
    return [_hdr(*SIZES[i % len(SIZES)], seed=100 + i) for i in range(count)]


def _run_threads(work: Callable[[int], list[np.ndarray]], threads: int) -> list[list[np.ndarray]]:
    """Run ``work(thread_index)`` in ``threads`` threads released together by a barrier."""
    barrier = threading.Barrier(threads)

    def start(index: int) -> list[np.ndarray]:
        barrier.wait()
        return work(index)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(start, range(threads)))


def test_shared_denoiser_equals_sequential_calls() -> None:
    images = _inputs(THREADS * CALLS)
    with Denoiser(hdr=True, quality="fast", backend="reference") as den:
        sequential = [den.denoise(image) for image in images]

        def work(thread: int) -> list[np.ndarray]:
            return [den.denoise(images[thread * CALLS + call]) for call in range(CALLS)]

        concurrent = [out for outs in _run_threads(work, THREADS) for out in outs]
    for index, (got, expected) in enumerate(zip(concurrent, sequential, strict=True)):
        np.testing.assert_array_equal(got, expected, err_msg=f"call {index}")


def test_eight_threads_sharing_a_denoiser_match_main_thread_calls_bit_for_bit() -> None:
    """After the main thread has denoised (and so set BLAS's thread count through
    threadpoolctl), calls from 8 other threads still run every gemm on one BLAS thread."""
    threads = 8
    images = [_hdr(32, 32, seed=300 + i) for i in range(threads)]
    with Denoiser(hdr=True, quality="high", backend="reference") as den:
        sequential = [den.denoise(image) for image in images]
        concurrent = _run_threads(lambda thread: [den.denoise(images[thread])], threads)
    for index, (got, expected) in enumerate(zip(concurrent, sequential, strict=True)):
        np.testing.assert_array_equal(got[0], expected, err_msg=f"thread {index}")


def test_shared_denoiser_with_output_arrays_and_tiles() -> None:
    """In-place outputs and several tiles per call, from several threads at once."""
    # 16 x 256 px in tiles of 224 px (the smallest edge above twice the 96 px overlap).
    images = [_hdr(16, 256, seed=200 + i) for i in range(THREADS * 2)]
    with Denoiser(hdr=True, quality="fast", tile_size=224, backend="reference") as den:
        sequential = [den.denoise(image) for image in images]
        assert den.info() is not None and den.info().tiles > 1

        def work(thread: int) -> list[np.ndarray]:
            outs = []
            for call in range(2):
                buffer = images[thread * 2 + call].copy()
                outs.append(den.denoise(buffer, output=buffer))
            return outs

        concurrent = [out for outs in _run_threads(work, THREADS) for out in outs]
    for index, (got, expected) in enumerate(zip(concurrent, sequential, strict=True)):
        np.testing.assert_array_equal(got, expected, err_msg=f"call {index}")


def test_separate_denoisers_run_concurrently_and_match_their_sequential_results() -> None:
    options = [
        {"hdr": True, "quality": "fast"},
        {"srgb": True, "quality": "fast"},
        {"hdr": True, "quality": "balanced"},
    ]
    make = [_hdr, _ldr, _hdr]
    images = [
        [make[d](*SIZES[(d + c) % len(SIZES)], seed=10 * d + c) for c in range(3)]
        for d in range(len(options))
    ]
    expected = []
    for opts, imgs in zip(options, images, strict=True):
        with Denoiser(backend="reference", **opts) as den:
            expected.append([den.denoise(image) for image in imgs])
    denoisers = [Denoiser(backend="reference", **opts) for opts in options]
    try:
        results = _run_threads(
            lambda d: [denoisers[d].denoise(image) for image in images[d]], len(denoisers)
        )
    finally:
        for den in denoisers:
            den.close()
    for d, (got, want) in enumerate(zip(results, expected, strict=True)):
        for c, (a, b) in enumerate(zip(got, want, strict=True)):
            np.testing.assert_array_equal(a, b, err_msg=f"denoiser {d}, call {c}")


def test_close_waits_for_a_running_denoise() -> None:
    """`close` from another thread during a call waits for it; later calls raise."""
    color = _hdr(64, 64, seed=7)
    with Denoiser(hdr=True, quality="fast", backend="reference") as den:
        expected = den.denoise(color)
    den = Denoiser(hdr=True, quality="fast", backend="reference")
    closer = threading.Thread(target=den.close)
    blocked: list[bool] = []

    def progress(fraction: float) -> None:
        if fraction == 0.0:
            closer.start()
            closer.join(timeout=0.5)
            # close() must still be waiting on the running call (it never can finish
            # before the call does, so this holds however loaded the machine is).
            blocked.append(closer.is_alive())

    got = den.denoise(color, progress=progress)
    closer.join()
    assert blocked == [True]
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(InvalidOperationError, match="the denoiser is closed"):
        den.denoise(color)


# -- mirrors of OIDN's oidnTest ---------------------------------------------------------------


@pytest.mark.oracle
def test_multiple_filters_interleaved_sizes_match_oidn() -> None:
    """oidnTest "multiple filters": N filters made first (large -> small -> medium), then
    run in turn; and one filter reused small -> large -> medium."""
    from tests.oracle import oidn_denoise

    sizes = (96, 17, 64)
    images = [_ldr(s, s, seed=s) for s in sizes]
    expected = [oidn_denoise(image, quality="fast") for image in images]
    filters = [Denoiser(quality="fast", backend="reference") for _ in sizes]
    try:
        several = [f.denoise(image) for f, image in zip(filters, images, strict=True)]
    finally:
        for f in filters:
            f.close()
    with Denoiser(quality="fast", backend="reference") as one:
        order = (1, 0, 2)  # small -> large -> medium
        reused = {i: one.denoise(images[i]) for i in order}
    for i, size in enumerate(sizes):
        assert_close(several[i], expected[i], rel_l2_tol=PARITY, label=f"filter {i} ({size}px)")
        np.testing.assert_array_equal(reused[i], several[i], err_msg=f"reused at {size}px")


@pytest.mark.oracle
def test_filter_update_across_size_and_inputs_matches_oidn() -> None:
    """oidnTest "filter update": one filter reused with a new image of the same size, a
    different size, an input removed, and other input combinations (other weights)."""
    from tests.oracle import oidn_denoise

    h, w = 40, 24
    color, albedo = _ldr(h, w, 1), _ldr(h, w, 2)
    normal = _ldr(h, w, 3) * 2 - 1
    big = (_ldr(2 * h, 2 * w, 4), _ldr(2 * h, 2 * w, 5))
    steps: list[tuple[str, tuple[np.ndarray | None, ...]]] = [
        ("color+albedo", (color, albedo, None)),
        ("same size, new color", (_ldr(h, w, 6), albedo, None)),
        ("different size", (big[0], big[1], None)),
        ("albedo removed", (color, None, None)),
        ("normal added", (color, albedo, normal)),
        ("albedo alone", (None, albedo, None)),
        ("normal alone", (None, None, normal)),
        ("back to the first", (color, albedo, None)),
    ]
    with Denoiser(quality="fast", backend="reference") as den:
        for label, (c, a, n) in steps:
            got = den.denoise(c, a, n)
            with Denoiser(quality="fast", backend="reference") as fresh:
                np.testing.assert_array_equal(got, fresh.denoise(c, a, n), err_msg=label)
            assert_close(got, oidn_denoise(c, a, n, quality="fast"), rel_l2_tol=PARITY, label=label)
