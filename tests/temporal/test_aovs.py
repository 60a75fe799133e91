"""Light-path passes in temporal mode (`oidn_gpu.TemporalAovDenoiser`): every
pass of a frame goes through the beauty's history decisions, and the passes of the sum add
up to the temporal beauty."""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu import Denoiser
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu import TemporalDenoiser
from oidn_gpu.temporal import passes as tp
from oidn_gpu import TemporalAovDenoiser
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
