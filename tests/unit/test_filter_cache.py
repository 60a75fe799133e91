"""The one-call API's cache of warm denoisers (`oidn_gpu.filter_cache`), on the reference
backend with tiny random U-Nets (tests/data)."""

from __future__ import annotations

import os
import select
import shutil
import signal
import threading
from pathlib import Path

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.filter_cache import CACHE, DenoiserCache, options_key
from oidn_gpu.model import read_tza, write_tza

DATA = Path(__file__).resolve().parents[1] / "data"
TINY_COLOR = DATA / "tiny_base_ic3.tza"
TINY_AOV = DATA / "tiny_base_ic9.tza"
OPTIONS = {"backend": "reference", "weights": str(TINY_COLOR)}


@pytest.fixture(autouse=True)
def empty_cache():
    oidn_gpu.clear_denoiser_cache()
    yield
    oidn_gpu.clear_denoiser_cache()


def _idle():
    return list(CACHE._idle.values())


def _color(rng):
    return rng.random((16, 16, 3), dtype=np.float32)


def test_repeated_calls_reuse_one_warm_denoiser_with_a_fresh_ones_result(rng):
    color = _color(rng)
    first = oidn_gpu.denoise(color, **OPTIONS)
    (cached,) = _idle()
    engines = dict(cached._engines)
    seen = []
    second = oidn_gpu.denoise(color, progress=seen.append, **OPTIONS)
    assert _idle() == [cached] and cached._engines == engines  # the same warm executor
    assert seen[0] == 0.0 and seen[-1] == 1.0  # progress of this call
    with oidn_gpu.Denoiser(**OPTIONS) as fresh:
        expected = fresh.denoise(color)
    np.testing.assert_array_equal(first, expected, strict=True)
    np.testing.assert_array_equal(second, expected, strict=True)


def test_other_options_get_other_denoisers_and_the_least_recent_is_closed(rng):
    color = _color(rng)
    made = []
    for scale in (0.5, 1.0, 1.5, 2.0, 2.5):
        oidn_gpu.denoise(color, input_scale=scale, **OPTIONS)
        made += [d for d in _idle() if d not in made]
    assert len(made) == 5 and len(CACHE) == CACHE.max_idle == 4
    assert made[0]._closed and not any(d._closed for d in made[1:])
    oidn_gpu.denoise(color, hdr=False, input_scale=1.0, **OPTIONS)  # hdr=False is not 1.0
    assert len(made) == 5
    with pytest.raises(oidn_gpu.InvalidArgumentError, match="expected True or False"):
        oidn_gpu.denoise(color, hdr=1, **OPTIONS)  # not served by the hdr=False denoiser


def test_concurrent_calls_do_not_wait_for_one_another(rng):
    """The first call holds its denoiser (its progress waits) until the second has finished:
    the second gets a denoiser of its own."""
    color = _color(rng)
    oidn_gpu.denoise(color, **OPTIONS)  # one idle denoiser
    started, second_done = threading.Event(), threading.Event()
    waited = []

    def hold(fraction):
        if fraction == 0.0:  # the first call holds the idle denoiser now
            started.set()
            waited.append(second_done.wait(timeout=60))

    first = threading.Thread(
        target=oidn_gpu.denoise, args=(color,), kwargs={"progress": hold, **OPTIONS}
    )
    first.start()
    assert started.wait(timeout=60)
    oidn_gpu.denoise(color, **OPTIONS)
    second_done.set()
    first.join(timeout=60)
    assert waited == [True]
    assert len(CACHE) == 2  # both denoisers came back


def test_changed_weights_are_never_served_stale(tmp_path, rng):
    path = tmp_path / "weights.tza"
    shutil.copyfile(TINY_COLOR, path)
    options = {"backend": "reference", "weights": str(path)}
    oidn_gpu.denoise(_color(rng), **options)
    shutil.copyfile(TINY_AOV, path)  # a network of 9 input channels now
    with pytest.raises(oidn_gpu.InvalidArgumentError, match="take 9 input channels"):
        oidn_gpu.denoise(_color(rng), **options)
    data = TINY_COLOR.read_bytes()
    assert options_key({"weights": data}) == options_key({"weights": bytearray(data)})
    assert options_key({"weights": data}) != options_key({"weights": TINY_AOV.read_bytes()})


def test_weights_replaced_by_another_of_the_same_size_and_time_are_reloaded(tmp_path, rng):
    tensors = read_tza(TINY_COLOR)
    name = next(n for n in tensors if n.endswith(".bias"))
    tensors[name] = tensors[name] + np.float32(0.5)  # another network, the same bytes' count
    other = tmp_path / "other.tza"
    other.write_bytes(write_tza(tensors))
    path = tmp_path / "weights.tza"
    shutil.copyfile(TINY_COLOR, path)
    assert other.stat().st_size == path.stat().st_size
    stamp = path.stat().st_mtime_ns
    color = _color(rng)
    options = {"backend": "reference", "weights": str(path)}
    first = oidn_gpu.denoise(color, **options)
    os.utime(other, ns=(stamp, stamp))
    os.replace(other, path)  # what a copy tool keeping times does
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (len(write_tza(tensors)), stamp)
    with oidn_gpu.Denoiser(backend="reference", weights=str(path)) as fresh:
        expected = fresh.denoise(color)
    second = oidn_gpu.denoise(color, **options)
    assert not np.array_equal(first, expected)
    np.testing.assert_array_equal(second, expected)


def test_unhashable_options_run_uncached(rng):
    cache = DenoiserCache()
    made = []

    def make():
        made.append(oidn_gpu.Denoiser(**OPTIONS))
        return made[-1]

    options = {**OPTIONS, "gemm": {"enc_conv0": "a mapping"}}
    assert options_key(options) is None
    result = cache.run(options, make, lambda den: den.denoise(_color(rng)))
    assert result.shape == (16, 16, 3)
    assert len(cache) == 0 and made[0]._closed


def test_clear_closes_idle_and_in_use_denoisers(rng):
    color = _color(rng)
    oidn_gpu.denoise(color, **OPTIONS)
    (idle,) = _idle()
    in_use = []

    def clear_while_running(fraction):
        if fraction == 0.0 and not in_use:
            in_use.append(oidn_gpu.clear_denoiser_cache())

    oidn_gpu.denoise(color, progress=clear_while_running, **OPTIONS)
    assert in_use == [0]  # the only denoiser was in use
    assert idle._closed and len(CACHE) == 0  # closed on its return
    oidn_gpu.denoise(color, **OPTIONS)
    assert oidn_gpu.clear_denoiser_cache() == 1


def test_errors_are_a_fresh_denoisers(rng):
    oidn_gpu.denoise(_color(rng), **OPTIONS)
    for _ in range(2):
        with pytest.raises(oidn_gpu.InvalidOperationError, match="image size mismatch"):
            oidn_gpu.denoise(_color(rng), output=np.zeros((8, 8, 3), np.float32), **OPTIONS)
        with pytest.raises(oidn_gpu.InvalidArgumentError, match="unknown filter quality"):
            oidn_gpu.denoise(_color(rng), quality="ultra", **OPTIONS)
    assert len(CACHE) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_uses_denoisers_of_its_own(rng):
    color = _color(rng)
    expected = oidn_gpu.denoise(color, **OPTIONS)  # the parent's cache holds one now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: writes 1 when it starts empty and denoises the same image
        try:
            os.close(read)
            empty = len(CACHE) == 0
            again = oidn_gpu.denoise(color, **OPTIONS)
            os.write(write, b"1" if empty and np.array_equal(again, expected) else b"0")
        finally:
            os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], 60)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    assert ready and answer == b"1"
    assert len(CACHE) == 1 and not _idle()[0]._closed  # the parent's is untouched
