"""The committed animation test sequences (tests/data/sequences): they load as a renderer's
files, and their motion vectors carry each converged frame onto the next."""

from __future__ import annotations

import functools
import itertools
import json

import numpy as np
import pytest

from oidn_gpu import Denoiser
from oidn_gpu.image import temporal_metric as tm
from tests.bench_scripts import load
from tests.datasets import REPO_ROOT

SEQUENCES = REPO_ROOT / "tests" / "data" / "sequences"
NAMES = ("static", "orbit", "moving")
TINY_WEIGHTS = REPO_ROOT / "tests" / "data" / "tiny_base_ic9.tza"


@functools.cache
def _frames(name: str) -> list:
    return load("temporal_stability").load_sequence(SEQUENCES / name)


@pytest.fixture(params=NAMES)
def sequence(request) -> tuple[str, list]:
    return request.param, _frames(request.param)


def test_the_sequences_stay_small() -> None:
    total = sum(p.stat().st_size for p in SEQUENCES.rglob("*") if p.is_file())
    # five sequences of 96x64 or 128x72 frames (with moving objects since 2026-12-05)
    assert total < 4.5 * 1024 * 1024, f"tests/data/sequences holds {total} bytes"


def test_each_sequence_loads_as_written(sequence) -> None:
    name, frames = sequence
    meta = json.loads((SEQUENCES / name / "sequence.json").read_text())
    assert len(frames) == meta["frames"] >= 8
    for frame in frames:
        assert frame.color.shape == frame.reference.shape == (64, 64, 3)
        assert frame.albedo is not None and frame.normal is not None
        assert frame.motion.convention.name == "cycles"
        assert frame.motion.forward is not None and frame.motion.invalid_count == 0
    colors = [f.color for f in frames]
    assert not any(np.array_equal(a, b) for a, b in itertools.pairwise(colors)), (
        "the seed must change every frame"
    )


def test_the_static_sequence_has_no_motion() -> None:
    for frame in _frames("static"):
        assert not frame.motion.backward.any() and not frame.motion.forward.any()


def test_motion_carries_each_reference_onto_the_next(sequence) -> None:
    name, frames = sequence
    bench = load("temporal_stability")
    masks = bench.disocclusions(frames)
    moved = 0.0
    for t in range(1, len(frames)):
        back = frames[t].motion.backward
        moved = max(moved, float(np.abs(back).max()))
        warped, valid = tm.warp(frames[t - 1].reference, back)
        visible = valid & ~masks[t]
        assert visible.mean() > 0.9
        warped_error = tm.relative_l2(warped, frames[t].reference, visible)
        still_error = tm.relative_l2(frames[t - 1].reference, frames[t].reference, visible)
        # What remains is the references' own noise (2048 spp: 0.025 between two frames),
        # resampling the checkerboard's edges, and the moving sphere's shading and shadow.
        assert warped_error < 0.15, (name, t, warped_error)
        if name != "static":
            assert warped_error < 0.75 * still_error, (name, t, warped_error, still_error)
    if name != "static":
        assert moved > 1.0  # pixels a frame, somewhere


def test_the_moving_sphere_keeps_its_depth_along_its_motion() -> None:
    # It moves parallel to the image plane, so the depth of its surface points does not
    # change: warping the previous depth by the motion must give this frame's depth exactly
    # (up to half floats and bilinear weights) inside the sphere.
    frames = _frames("moving")
    for t in range(1, len(frames)):
        back = frames[t].motion.backward
        depth, previous = frames[t].depth, frames[t - 1].depth
        warped, valid = tm.warp(previous, back)
        ys, xs = np.nonzero(back[..., 0] < -1.0)  # on the sphere
        inside = np.zeros_like(valid)
        for y, x in zip(ys, xs, strict=True):  # and its 3 x 3 neighbourhood too
            inside[y, x] = (back[max(y - 1, 0) : y + 2, max(x - 1, 0) : x + 2, 0] < -1.0).all()
        inside &= valid
        assert inside.sum() > 100
        np.testing.assert_allclose(warped[inside], depth[inside], rtol=2e-3)


def test_the_moving_sphere_disoccludes_the_background() -> None:
    bench = load("temporal_stability")
    counts = [int(m.sum()) for m in bench.disocclusions(_frames("moving"))[1:]]
    # The sphere is about 20 px wide and moves about 4 px a frame.
    assert all(20 <= c <= 200 for c in counts), counts
    static = [int(m.sum()) for m in bench.disocclusions(_frames("static"))[1:]]
    assert static == [0] * len(static)


def test_the_bench_compares_methods_on_a_sequence() -> None:
    bench = load("temporal_stability")

    def tiny(frames):
        with Denoiser(hdr=True, backend="reference", weights=TINY_WEIGHTS) as den:
            return [
                np.asarray(o)[..., :3]
                for o in den.denoise_many((f.color, f.albedo, f.normal) for f in frames)
            ]

    methods = {
        "noisy input": bench.noisy_input,
        "reference": lambda frames: [f.reference for f in frames],
        "tiny": tiny,
    }
    rows = {r.method: r for r in bench.compare(SEQUENCES / "moving", methods)}
    assert rows["reference"].instability == 0.0 and rows["reference"].psnr_db == np.inf
    assert rows["noisy input"].instability > 0.1
    assert np.isfinite(rows["tiny"].instability) and rows["tiny"].disoccluded_pixels > 0
    assert "disocc. PSNR" in bench.format_rows(list(rows.values()))
