"""Light-path passes in temporal mode (`oidn_gpu.TemporalAovDenoiser`): every
pass of a frame goes through the beauty's history decisions, and the passes of the sum add
up to the temporal beauty."""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu import Denoiser, TemporalAovDenoiser, TemporalDenoiser
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.filter_temporal_aovs import pass_reprojection
from oidn_gpu.temporal import passes as tp
from tests.temporal import synthetic

FRAMES = 4


@pytest.fixture(scope="module")
def denoiser():
    with Denoiser(backend="reference", hdr=True) as den:
        yield den


@pytest.fixture(scope="module")
def frames():
    """A sphere crossing a textured plane (disocclusions, rejected history), 32 px."""
    return synthetic.sequence("object", frames=FRAMES, size=32)


def _groups(color: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Two light groups and their float32 sum, the beauty: ``(beauty, {key, fill})``."""
    share = np.linspace(0.2, 0.8, color.shape[1], dtype=np.float32)[None, :, None]
    key = (color * share).astype(np.float32)
    fill = (color * (1 - share) + 0.01 * np.arange(3, dtype=np.float32)).astype(np.float32)
    return key + fill, {"key": key, "fill": fill}


def _run(denoiser, frames, make_passes, summed=None):
    results, states = [], []
    with TemporalAovDenoiser(TemporalDenoiser(denoiser)) as td:
        for f in frames:
            beauty, passes = make_passes(f.color)
            result = td.denoise(
                beauty, passes, f.albedo, f.normal, motion=f.motion, depth=f.depth, summed=summed
            )
            results.append(result)
            session = td.session
            states.append(
                (session._state.copy(), {n: s.copy() for n, s in session._pass_states.items()})
            )
    return results, states


def test_a_pass_equal_to_the_beauty_is_denoised_as_the_beauty_bit_for_bit(denoiser, frames):
    """Same decisions: a pass holding the beauty itself (left out of the sum) comes out as
    the temporal beauty, which is `TemporalDenoiser`'s, on every frame."""
    results, _ = _run(denoiser, frames, lambda c: (c, {"copy": c}), summed=[])
    with TemporalDenoiser(denoiser) as plain:
        expected = [
            plain.denoise(f.color, f.albedo, f.normal, motion=f.motion, depth=f.depth)
            for f in frames
        ]
    for result, want in zip(results, expected, strict=True):
        np.testing.assert_array_equal(result.beauty, want)
        np.testing.assert_array_equal(result.passes["copy"], want)


def test_summed_passes_add_up_to_the_temporal_beauty_with_its_history(denoiser, frames):
    results, states = _run(denoiser, frames, _groups)
    for index, (result, (beauty_state, pass_states)) in enumerate(
        zip(results, states, strict=True)
    ):
        total = result.passes["key"] + result.passes["fill"]
        scale = np.abs(result.beauty).max()
        np.testing.assert_allclose(total, result.beauty, rtol=0, atol=1e-5 * scale)
        for name, state in pass_states.items():
            for channel in (tp.STATE_COUNT, tp.STATE_OUTPUT_COUNT):  # the beauty's history
                np.testing.assert_array_equal(state[:, :, channel], beauty_state[:, :, channel])
            # the state keeps the adjusted pass: the next frame's history sums up too
            np.testing.assert_array_equal(
                state[:, :, tp.STATE_OUTPUT : tp.STATE_OUTPUT + 3], result.passes[name]
            )
        if index:
            counts = beauty_state[:, :, tp.STATE_COUNT]
            assert counts.max() > 1 and counts.min() == 1  # history kept and rejected


def test_bad_passes_are_clear_errors(denoiser, frames):
    f = frames[0]
    with TemporalAovDenoiser(TemporalDenoiser(denoiser)) as td:
        with pytest.raises(InvalidArgumentError, match="pass 'key' is"):
            td.denoise(f.color, {"key": f.color[:8]}, motion=f.motion)
        with pytest.raises(InvalidArgumentError, match="summed names"):
            td.denoise(f.color, {"key": f.color}, motion=f.motion, summed=["fill"])


def _beauty_and_pass_reprojections(frames, make_pass, params):
    """Each frame's beauty reprojection (`passes.reproject`) and a pass's under its
    decisions, the pass's history kept as `AovTemporalSession` keeps it (0.9 times the
    accumulated color standing in for the denoiser): ``[(beauty, pass)]``."""
    state = pass_state = prev_guide = None
    out = []
    for f in frames:
        guide = tp.pack_guide(f.depth, f.albedo, f.normal)
        signal = tp.pack_signal(f.color, f.albedo, f.normal)
        values = tp.pack_signal(make_pass(f.color), f.albedo, f.normal)
        if state is None:
            state = pass_state = tp.empty_state(*f.color.shape[:2])
            prev_guide = guide
        beauty = tp.reproject(f.motion, guide, prev_guide, signal, state, params)
        own = pass_reprojection(
            f.motion, guide, prev_guide, values, pass_state, signal, beauty, params
        )
        state = tp.next_state(
            beauty, tp.stabilize(beauty[..., :3] * np.float32(0.9), beauty, params)
        )
        pass_state = tp.next_state(own, tp.stabilize(own[..., :3] * np.float32(0.9), own, params))
        prev_guide = guide
        out.append((beauty, own, signal))
    return out


def test_a_pass_equal_to_the_beauty_takes_every_decision_of_the_beauty(frames):
    """Fireflies limited, light changes (the output history cut) and the margin around
    disocclusions all happen in this sequence, and a pass holding the beauty is reprojected
    as the beauty, bit for bit."""
    params = tp.TemporalParams(firefly_ratio=2.0)
    fired = {"firefly": False, "change": False, "near": False}
    for beauty, own, signal in _beauty_and_pass_reprojections(frames, lambda c: c, params):
        np.testing.assert_array_equal(own, beauty)
        fired["firefly"] |= bool((beauty[:, :, tp.REPROJECTION_INPUT_SCALE] < 1).any())
        fired["change"] |= bool(tp.light_changed(signal, beauty, params).any())
        near = tp.near_disocclusions(beauty, params)
        fired["near"] |= bool((near & (beauty[:, :, tp.REPROJECTION_VALID] > 0.5)).any())
    assert all(fired.values()), fired


def test_a_pass_limits_its_own_fireflies_against_its_own_history(frames):
    """A firefly only in a pass (last frame) is limited against the pass's history, where
    the beauty's color is left alone; the history lengths stay the beauty's."""
    params = tp.TemporalParams()
    pixel = (4, 4)  # background, history kept from the second frame on
    last = frames[-1].color

    def half(color):
        out = (color * np.float32(0.5)).astype(np.float32)
        if color is last:
            out[pixel] *= np.float32(1000)
        return out

    beauty, own, _ = _beauty_and_pass_reprojections(frames, half, params)[-1]
    assert beauty[(*pixel, tp.REPROJECTION_VALID)] == 1
    assert beauty[(*pixel, tp.REPROJECTION_INPUT_SCALE)] == 1
    assert own[(*pixel, tp.REPROJECTION_INPUT_SCALE)] < 0.1
    for channel in (tp.STATE_COUNT, tp.REPROJECTION_VALID, tp.REPROJECTION_OUTPUT_COUNT):
        np.testing.assert_array_equal(own[:, :, channel], beauty[:, :, channel])
