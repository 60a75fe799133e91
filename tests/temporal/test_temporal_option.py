"""``oidn_gpu.Denoiser(temporal=True, ...)``: the temporal mode through the usual entry."""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu import TemporalDenoiser
from oidn_gpu.errors import InvalidArgumentError
from tests.temporal import synthetic


def _frames():
    frames = synthetic.sequence("pan", frames=3, size=16)
    return [synthetic.item(f, i + 1) for i, f in enumerate(frames)]


def test_temporal_true_is_a_temporal_denoiser_of_the_same_options():
    frames = _frames()
    with oidn_gpu.Denoiser(
        temporal=True, backend="reference", hdr=True, history=4, clamp="minmax"
    ) as td:
        assert isinstance(td, TemporalDenoiser)
        assert td.params.history == 4 and td.params.clamp == "minmax"
        assert td.denoiser.hdr and td.denoiser.backend == "reference"
        got = list(td.denoise_many(frames))
    with TemporalDenoiser(backend="reference", hdr=True, history=4, clamp="minmax") as td:
        expected = [td.denoise(**f) for f in frames]
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_without_temporal_it_is_the_per_frame_denoiser():
    with oidn_gpu.Denoiser(temporal=False, backend="reference") as den:
        assert type(den) is oidn_gpu.Denoiser
    config = oidn_gpu.Denoiser(backend="reference").config
    assert type(oidn_gpu.Denoiser.from_config(config)) is oidn_gpu.Denoiser


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: oidn_gpu.Denoiser(backend="reference", history=4),
            "history is a temporal mode parameter: add temporal=True",
        ),
        (
            lambda: oidn_gpu.Denoiser(backend="reference", clamp="none", output_blend=0.5),
            "clamp, output_blend are temporal mode parameters: add temporal=True",
        ),
        (lambda: oidn_gpu.Denoiser(temporal="yes"), "temporal is 'yes'; expected True or False"),
        (lambda: oidn_gpu.RTLightmapFilter(temporal=True), "option of oidn_gpu.Denoiser"),
        (
            lambda: oidn_gpu.Denoiser(temporal=True, backend="reference", history=0),
            "temporal history is 0",
        ),
    ],
)
def test_temporal_options_are_checked(make, message):
    with pytest.raises(InvalidArgumentError, match=message):
        make()
