"""The temporal passes: the NumPy oracle's behaviour, and every backend's kernels agreeing
with it (torch on CPU tensors here)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.temporal import passes as tp
from tests.temporal import synthetic

PARAMS = tp.TemporalParams().with_guides(depth=True, normal=True, albedo=True)


def _inputs(frames, t, state=None):
    f, p = frames[t], frames[t - 1]
    guide = tp.pack_guide(f.depth, f.albedo, f.normal)
    prev_guide = tp.pack_guide(p.depth, p.albedo, p.normal)
    signal = tp.pack_signal(f.color, f.albedo, f.normal)
    if state is None:
        psignal = tp.pack_signal(p.color, p.albedo, p.normal)
        first = tp.reproject(
            p.motion, prev_guide, prev_guide, psignal, tp.empty_state(*p.color.shape[:2]), PARAMS
        )
        state = tp.next_state(first, p.reference)
    return f.motion, guide, prev_guide, signal, state


def _accumulate(colors, motion) -> np.ndarray:
    """The last reprojection of noise frames under one albedo, no light-change test."""
    params = tp.TemporalParams(firefly_ratio=0, change_sigmas=0).with_guides(
        depth=False, normal=False, albedo=True
    )
    albedo = np.full(colors[0].shape, 0.5, np.float32)
    guide = tp.pack_guide(None, albedo, None)
    state = tp.empty_state(*colors[0].shape[:2])
    for color in colors:
        rep = tp.reproject(motion, guide, guide, tp.pack_signal(color, albedo, None), state, params)
        state = tp.next_state(rep, rep[..., :3])
    return rep


def test_static_history_averages_the_noise():
    colors, motion = synthetic.shifted_noise_sequence(4, 32, (0.0, 0.0), seed=1)
    rep = _accumulate(colors, motion)
    np.testing.assert_allclose(rep[..., :3], np.mean(colors, axis=0), rtol=1e-5)
    assert np.all(rep[..., tp.STATE_COUNT] == 4)


def test_whole_pixel_motion_follows_the_content():
    colors, motion = synthetic.shifted_noise_sequence(3, 32, (2.0, 1.0), seed=2)
    rep = _accumulate(colors, motion)
    # The same content each frame: the average is the content itself where it stayed on
    # screen; where it came from off screen, the history restarted.
    inner = rep[:-2, :-4, :3]
    np.testing.assert_allclose(inner, colors[-1][:-2, :-4], rtol=1e-5)
    assert np.all(rep[-1, :, tp.REPROJECTION_VALID] == 0)
    assert np.all(rep[:-1, :-2, tp.REPROJECTION_VALID] == 1)


def test_subpixel_motion_does_not_accumulate_noise():
    frames = synthetic.sequence("pan", frames=2, size=32)
    rep = tp.reproject(*_inputs(frames, 1), dataclasses.replace(PARAMS, firefly_ratio=0))
    np.testing.assert_array_equal(
        rep[..., :3], tp.pack_signal(frames[1].color, frames[1].albedo, frames[1].normal)[..., :3]
    )
    assert rep[..., tp.REPROJECTION_VALID].mean() > 0.8  # the output history is kept


def test_disocclusion_rejects_history():
    frames = synthetic.sequence("object", frames=3, size=64)
    rep = tp.reproject(*_inputs(frames, 2), PARAMS)
    valid = rep[..., tp.REPROJECTION_VALID] > 0
    assert not valid[frames[2].disoccluded].any()
    assert valid[~frames[2].object_mask & ~frames[2].disoccluded].mean() > 0.99


DEPTH_ONLY = tp.TemporalParams().with_guides(depth=True, normal=False, albedo=False)


def _cosine(guide: np.ndarray, prev_guide: np.ndarray) -> np.ndarray:
    n, p = guide[..., 1:4], prev_guide[..., 1:4]
    return (n * p).sum(-1) / (np.linalg.norm(n, axis=-1) * np.linalg.norm(p, axis=-1))


def test_a_silhouette_just_in_front_of_a_surface_keeps_no_output_history():
    """The "contact" sphere is 2-5% nearer than the background it uncovers, within the
    depth tolerance: the noisy input's history stays (depth alone decides it), and the
    output history goes where the normals are more than 60 degrees apart (its rim), not
    where they agree."""
    frames = synthetic.sequence("contact", frames=3, size=32)
    motion, guide, prev_guide, signal, state = _inputs(frames, 2)
    rep = tp.reproject(motion, guide, prev_guide, signal, state, DEPTH_ONLY)
    d, e = guide[..., 0], prev_guide[..., 0]
    moved = np.abs(d - e) / np.maximum(d, e)
    # the background the sphere covered in frame 1: motion 0, so its one tap is itself
    band = frames[2].disoccluded & (moved > 2 * tp.SURFACE_DEPTH) & (moved < 0.045)
    rim = band & (_cosine(guide, prev_guide) < tp.SILHOUETTE_NORMAL_COS - 0.05)
    facing = band & (_cosine(guide, prev_guide) > tp.SILHOUETTE_NORMAL_COS + 0.05)
    assert rim.sum() >= 5 and facing.sum() >= 5
    assert (rep[..., tp.REPROJECTION_VALID][band] == 1).all()
    assert (rep[..., tp.REPROJECTION_OUTPUT_COUNT][rim] == 1).all()
    assert (rep[..., tp.REPROJECTION_OUTPUT_COUNT][facing] > 1).all()


def test_noisy_normals_on_a_surface_that_stays_keep_the_output_history():
    """With depth, normals decide nothing where the depth moved by less than
    `SURFACE_DEPTH`: random normals (renderers' are noisy) and depth jittered by 0.2%
    keep every pixel's output history; without depth the same normals reject it."""
    rng = np.random.default_rng(5)
    frames = [
        dataclasses.replace(
            f,
            normal=rng.normal(size=f.normal.shape).astype(np.float32),
            depth=(f.depth * (1 + 0.002 * rng.random(f.depth.shape))).astype(np.float32),
        )
        for f in synthetic.sequence("static", frames=3, size=24)
    ]
    rep = tp.reproject(*_inputs(frames, 2), DEPTH_ONLY)
    assert (rep[..., tp.REPROJECTION_OUTPUT_COUNT] > 1).all()
    normals = tp.TemporalParams().with_guides(depth=False, normal=True, albedo=False)
    rep = tp.reproject(*_inputs(frames, 2), normals)
    assert (rep[..., tp.REPROJECTION_OUTPUT_COUNT] == 1).mean() > 0.5


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 1e6, -3e4])
def test_bad_motion_rejects_and_stays_finite(bad):
    frames = synthetic.sequence("static", frames=2, size=32)
    motion, guide, prev_guide, signal, state = _inputs(frames, 1)
    motion = motion.copy()
    motion[4:9, 5:20] = bad
    rep = tp.reproject(motion, guide, prev_guide, signal, state, PARAMS)
    assert np.isfinite(rep).all()
    assert (rep[4:9, 5:20, tp.REPROJECTION_VALID] == 0).all()
    den = np.full((32, 32, 3), np.nan, np.float32)
    den[:16] = 1.0
    out = tp.stabilize(den, rep, PARAMS)
    assert np.isfinite(out[:16]).all()


def test_nonfinite_color_is_sanitized():
    frames = synthetic.sequence("static", frames=2, size=32)
    motion, guide, prev_guide, signal, state = _inputs(frames, 1)
    color = frames[1].color.copy()
    color[0, 0], color[1, 1], color[2, 2] = np.nan, np.inf, -np.inf
    signal = tp.pack_signal(color, frames[1].albedo, frames[1].normal)
    rep = tp.reproject(motion, guide, prev_guide, signal, state, PARAMS)
    assert np.isfinite(rep).all()


def test_clamp_bounds_the_history():
    den = np.ones((16, 16, 3), np.float32)
    rep = np.zeros((16, 16, tp.REPROJECTION_CHANNELS), np.float32)
    rep[..., tp.STATE_OUTPUT : tp.STATE_OUTPUT + 3] = 5.0
    rep[..., tp.REPROJECTION_VALID] = 1.0
    rep[..., tp.REPROJECTION_OUTPUT_COUNT] = 4.0
    for clamp in ("minmax", "variance"):
        params = tp.TemporalParams(clamp=clamp)
        np.testing.assert_array_equal(tp.stabilize(den, rep, params), den)
    unclamped = tp.stabilize(den, rep, tp.TemporalParams(clamp="none"))
    np.testing.assert_allclose(unclamped, 1.0 + (5.0 - 1.0) * 0.75)


@pytest.mark.parametrize(
    "name, value",
    [
        ("history", 0),
        ("history", 2.5),
        ("output_blend", 0),
        ("output_blend", 1.5),
        ("clamp", "box"),
        ("clamp_radius", -1),
        ("cut_threshold", 2.0),
        ("depth_tolerance", -1),
        ("firefly_ratio", "x"),
    ],
)
def test_params_are_checked(name, value):
    with pytest.raises(InvalidArgumentError, match=name):
        tp.TemporalParams(**{name: value})


def test_torch_passes_agree_with_numpy():
    import torch

    from oidn_gpu.backends.cuda.temporal import TorchTemporalPasses

    passes = TorchTemporalPasses(torch.device("cpu"))
    for kind, params in (("pan", PARAMS), ("object", PARAMS), ("contact", DEPTH_ONLY)):
        frames = synthetic.sequence(kind, frames=4, size=32)
        frames[2].motion[3, 3] = np.nan
        expected = synthetic.run_passes(tp.NumpyTemporalPasses(), frames, params)
        got = synthetic.run_passes(passes, frames, params)
        for (rep_e, out_e), (rep_g, out_g) in zip(expected, got, strict=True):
            np.testing.assert_allclose(rep_g, rep_e, rtol=2e-5, atol=2e-6)
            np.testing.assert_allclose(out_g, out_e, rtol=2e-5, atol=2e-6)


def test_a_light_change_drops_the_history_there():
    frames = synthetic.sequence("static", frames=2, size=32, firefly_rate=0.0)
    motion, guide, prev_guide, signal, state = _inputs(frames, 1)
    lit = frames[1].color.copy()
    lit[8:16, 8:16] *= 4.0  # a light switched on over a patch
    signal = tp.pack_signal(lit, frames[1].albedo, frames[1].normal)
    rep = tp.reproject(motion, guide, prev_guide, signal, state, PARAMS)
    assert (rep[10:14, 10:14, tp.STATE_COUNT] == 1).all()
    # the output's history is cut to change_output_history frames, not dropped
    assert (rep[10:14, 10:14, tp.REPROJECTION_OUTPUT_COUNT] == 1.5).all()
    np.testing.assert_array_equal(rep[10:14, 10:14, :9], signal[10:14, 10:14])
    dropped = tp.reproject(
        motion,
        guide,
        prev_guide,
        signal,
        state,
        dataclasses.replace(PARAMS, change_output_history=1.0),
    )
    assert (dropped[10:14, 10:14, tp.REPROJECTION_OUTPUT_COUNT] == 1).all()
    # elsewhere most of the history stays (noise alone passes 2 sigmas in some windows)
    assert (rep[24:, 24:, tp.STATE_COUNT] == 2).mean() > 0.7
    off = tp.reproject(
        motion,
        guide,
        prev_guide,
        signal,
        state,
        tp.TemporalParams(change_sigmas=0).with_guides(depth=True, normal=True, albedo=True),
    )
    assert (off[10:14, 10:14, tp.STATE_COUNT] == 2).all()


def _firefly_inputs(kind: str):
    """A frame of ``kind`` with one firefly (1000 times the pixel) at (12, 20)."""
    frames = synthetic.sequence(kind, frames=2, size=32, firefly_rate=0.0)
    motion, guide, prev_guide, _, state = _inputs(frames, 1)
    color = frames[1].color.copy()
    color[12, 20] *= 1000.0
    return (
        motion,
        guide,
        prev_guide,
        tp.pack_signal(color, frames[1].albedo, frames[1].normal),
        state,
    )


@pytest.mark.parametrize("kind", ["static", "pan"])
def test_a_firefly_is_limited_by_the_history_before_the_network(kind):
    """Accumulated (static) or not (subpixel pan), a one-frame firefly reaches the network
    at most firefly_ratio times its history's luminance, and it is not taken for a light
    change (which would pass it on whole)."""
    motion, guide, prev_guide, signal, state = _firefly_inputs(kind)
    rep = tp.reproject(motion, guide, prev_guide, signal, state, PARAMS)
    scale = rep[12, 20, tp.REPROJECTION_INPUT_SCALE]
    assert 0 < scale < 0.05
    if kind == "pan":  # nothing accumulates: the guide is the previous output
        history = rep[12:13, 20:21, tp.STATE_OUTPUT : tp.STATE_OUTPUT + 3]
        limit = PARAMS.firefly_ratio * tp.luminance(history)[0, 0]
        np.testing.assert_allclose(rep[12, 20, :3], signal[12, 20, :3] * scale, rtol=1e-6)
        assert tp.luminance(rep[12:13, 20:21, :3])[0, 0] == pytest.approx(limit, rel=1e-5)
    assert rep[12, 20, tp.REPROJECTION_OUTPUT_COUNT] > 1.5  # not taken for a light change
    off = tp.reproject(
        motion, guide, prev_guide, signal, state, dataclasses.replace(PARAMS, firefly_ratio=0)
    )
    assert off[12, 20, tp.REPROJECTION_INPUT_SCALE] == 1
    assert off[12, 20, 0] > 20 * rep[12, 20, 0]


@pytest.mark.parametrize("radius", [0, 1, 3])
def test_near_pixels_is_the_chebyshev_dilation(radius):
    rng = np.random.default_rng(radius)
    mask = rng.random((13, 17)) < 0.04
    ys, xs = np.nonzero(mask)
    rows, cols = np.mgrid[0:13, 0:17]
    expected = np.zeros_like(mask)
    for y, x in zip(ys, xs, strict=True):
        expected |= np.maximum(np.abs(rows - y), np.abs(cols - x)) <= radius
    np.testing.assert_array_equal(tp.near_pixels(mask, radius), expected)


def test_input_history_is_dropped_near_a_disocclusion_and_the_output_history_kept():
    frames = synthetic.sequence("object", frames=3, size=32, firefly_rate=0.0)
    motion, guide, prev_guide, signal, state = _inputs(frames, 2)
    params = dataclasses.replace(PARAMS, disocclusion_margin=0, change_sigmas=0)
    plain = tp.reproject(motion, guide, prev_guide, signal, state, params)
    rejected = plain[..., tp.REPROJECTION_VALID] < 0.5
    assert rejected.any() and not rejected.all()
    margin = dataclasses.replace(params, disocclusion_margin=2)
    near = tp.near_pixels(rejected, 2)
    got = tp.reproject(motion, guide, prev_guide, signal, state, margin)
    np.testing.assert_array_equal(got[near][:, :9], signal[near])
    assert (got[near][:, tp.STATE_COUNT] == 1).all()
    np.testing.assert_array_equal(got[~near], plain[~near])
    # the output's history and the valid flag (the camera-cut test) are untouched
    for channel in (tp.REPROJECTION_VALID, tp.REPROJECTION_OUTPUT_COUNT):
        np.testing.assert_array_equal(got[..., channel], plain[..., channel])
    assert (plain[near & ~rejected][:, tp.STATE_COUNT] > 1).any()  # history was there
