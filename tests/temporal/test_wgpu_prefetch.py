"""`WgpuTemporalSession.prefetch`: a later frame's images staged on a worker thread while
the current frame runs give the images of frame-by-frame `denoise`, bit for bit, and a
failing, dropped or overtaken staging never touches another frame's result (lavapipe)."""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu import Denoiser
from oidn_gpu.backends.base import TemporalFrame, get_backend
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.temporal import passes as tp
from tests.temporal import synthetic

pytestmark = pytest.mark.gpu

OPTIONS = dict(backend="wgpu", hdr=True, precision="fp32", quality="fast")
PARAMS = tp.TemporalParams().with_guides(depth=True, normal=False, albedo=False)


@pytest.fixture(scope="module")
def denoiser():
    with Denoiser(**OPTIONS) as den:
        yield den


def _frames(kind: str = "pan", count: int = 5, size: int = 24) -> list[TemporalFrame]:
    return [
        TemporalFrame(f.color, f.albedo, f.normal, f.motion, f.depth)
        for f in synthetic.sequence(kind, frames=count, size=size)
    ]


def _items(frames: list[TemporalFrame], numbers: list[int]) -> list[dict]:
    return [synthetic.item(f, n) for f, n in zip(frames, numbers, strict=True)]


def _run(den, calls) -> list:
    """Drive a new session with ``calls`` (``("prefetch", frame)``, ``("frame", frame,
    restart)``, ``("wait",)``: the stagings under way finished): the frames' results, or
    their errors."""
    results = []
    with get_backend("wgpu").temporal_session(den.frames) as session:
        for call in calls:
            if call[0] == "prefetch":
                session.prefetch(call[1])
            elif call[0] == "wait":
                for staged in session._prefetcher._pending:
                    staged.future.exception()
            else:
                try:
                    r = session.frame(call[1], PARAMS, restart=call[2])
                    results.append((r.output, r.history_fraction, r.cut))
                except InvalidArgumentError as err:
                    results.append(str(err))
        results.append(session.prefetched)
    return results


def _assert_same(got: list, expected: list) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        if isinstance(e, tuple):
            np.testing.assert_array_equal(g[0], e[0])
            assert g[1:] == e[1:]
        else:
            assert g == e


def test_denoise_many_stages_the_next_frame_and_gives_denoise_s_images():
    """The public API: `denoise_many` on wgpu stages each next frame (a gap restarting
    the history on the way) and gives what `denoise` gives frame by frame."""
    frames = _frames(count=6)
    items = _items(frames, [1, 2, 3, 5, 6, 7])
    with Denoiser(temporal=True, **OPTIONS) as td:
        assert td.session.name == "wgpu-device"
        many = list(td.denoise_many(items))
        assert td.session.prefetched == len(items) - 1  # all but the first
        assert td.session.ran_ahead == len(items) - 2  # all but the first and the gap's
        assert [r.frame for r in td.restarts] == [1, 5]
    with Denoiser(temporal=True, **OPTIONS) as td:
        one_by_one = [td.denoise(**item) for item in items]
        assert td.session.prefetched == td.session.ran_ahead == 0
    for got, expected in zip(many, one_by_one, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_a_staging_that_fails_raises_at_its_frame_and_spares_the_others(denoiser):
    f0, f1, f2, f3 = _frames(count=4)
    bad = TemporalFrame(
        f1.color, f1.albedo, f1.normal, np.zeros((24, 24, 3), np.float32), f1.depth
    )  # motion of 3 channels: refused when it is staged
    plain = _run(
        denoiser,
        [("frame", f0, True), ("frame", bad, False), ("frame", f2, False), ("frame", f3, False)],
    )
    staged = _run(
        denoiser,
        [
            ("prefetch", bad),
            ("frame", f0, True),
            ("prefetch", f2),
            ("frame", bad, False),
            ("prefetch", f3),
            ("frame", f2, False),
            ("frame", f3, False),
        ],
    )
    assert "motion image has shape (24, 24, 3)" in plain[1]
    assert plain[-1] == 0 and staged[-1] == 2  # f2 and f3 came staged, the bad frame not
    _assert_same(staged[:-1], plain[:-1])


def test_dropped_and_overtaken_stagings_are_uploaded_again(denoiser):
    """Three stagings (the oldest dropped), a frame run ahead that is not the next one
    called, input buffers overwritten by another frame's upload: every frame is then
    uploaded again from its arrays, and each result is the one of the plain calls."""
    f0, f1, f2, f3, f4 = _frames(count=5)
    order = [(f0, True), (f2, False), (f4, False), (f1, False), (f3, False)]
    plain = _run(denoiser, [("frame", f, restart) for f, restart in order])
    staged = _run(
        denoiser,
        [
            ("prefetch", f1),
            ("prefetch", f3),
            ("prefetch", f4),
            ("wait",),  # f1 dropped
            ("frame", f0, True),  # runs f3 ahead, and queues f4's copies behind it
            ("frame", f2, False),  # not f3: f3 is run again; f2's upload overwrites f4's images
            ("frame", f4, False),
            ("frame", f1, False),
            ("frame", f3, False),
        ],
    )
    assert staged[-1] == 0
    _assert_same(staged[:-1], plain[:-1])


def test_a_staging_beside_a_frame_run_ahead_drops_the_older_one(denoiser):
    """f1 runs ahead while f0 is read back (its upload buffers held), so staging f3 drops
    f2 (both sets of upload buffers are taken); f1 then runs f3 ahead, which f2 overtakes:
    f2 and f3 are uploaded again, and every result is the plain calls'."""
    f0, f1, f2, f3 = _frames(count=4)
    plain = _run(denoiser, [("frame", f, i == 0) for i, f in enumerate((f0, f1, f2, f3))])
    staged = _run(
        denoiser,
        [
            ("prefetch", f1),
            ("wait",),
            ("frame", f0, True),
            ("prefetch", f2),
            ("prefetch", f3),
            ("wait",),
            ("frame", f1, False),
            ("frame", f2, False),
            ("frame", f3, False),
        ],
    )
    assert staged[-1] == 1  # f1
    _assert_same(staged[:-1], plain[:-1])


def test_close_joins_the_worker_and_releases_the_staged_buffers(denoiser):
    f0, f1 = _frames(count=2)
    session = get_backend("wgpu").temporal_session(denoiser.frames)
    session.frame(f0, PARAMS, restart=True)
    session.prefetch(f1)
    worker = session._prefetcher._worker
    assert worker is not None
    session.close()
    assert session._prefetcher._worker is None and not session._prefetcher._pending
    assert session.resources() == (0, 0)
    with pytest.raises(InvalidOperationError, match="closed"):
        session.prefetch(f1)


def test_the_benchmark_times_denoise_many_and_checks_it_against_denoise():
    from tests.bench_scripts import load

    overhead = load("temporal_overhead")
    frames = overhead.sequence(16, 32, 4)
    row = overhead.measure("wgpu", frames, 1, {"precision": "fp32", "quality": "fast"})
    assert row["passes"] == "wgpu-device" and row["many_bit_equal_frames"] == 4
    assert row["prefetched_frames"] == 3
    assert row["per_frame_many_ms"] > 0 and row["temporal_many_ms"] > 0
    assert row["interleaved_per_frame_ms"] > 0 and row["interleaved_temporal_ms"] > 0
    assert {"upload", "wait"} <= set(row["host_ms"])
    if row["gpu_ms"]:  # the device has timestamp queries
        assert set(row["gpu_ms"]) == {"upload", "passes", "network", "stabilize", "readback"}
        assert {
            "gather",
            "accumulate",
            "changes",
            "near_rows",
            "near",
            "restart",
            "stabilize",
        } <= set(row["kernel_ms"])
    assert "bit-equal to denoise: 4 of 4" in overhead.describe(row, 32, 16)
