"""Temporal chunks: the plan, and the warm-up's promise (within FARM_TOLERANCE of the
single-process frames, in relative RMS, on a synthetic static sequence with the default
warm-up)."""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu import Denoiser, TemporalDenoiser
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.farm import temporal_chunks as chunks
from tests.temporal import synthetic


def test_plan_chunks_covers_every_frame_once():
    plan = chunks.plan_chunks(10, 4, warmup=3)
    assert [list(c.frames) for c in plan] == [[0, 1], [2, 3, 4], [5, 6], [7, 8, 9]]
    assert [list(c.warmup) for c in plan] == [[], [0, 1], [2, 3, 4], [4, 5, 6]]
    assert len(chunks.plan_chunks(2, 5)) == 2
    assert chunks.plan_chunks(0, 3) == []


@pytest.mark.parametrize("args", [(-1, 2), (4, 0), (4, 2, -1), (4.0, 2)])
def test_plan_chunks_checks_its_arguments(args):
    with pytest.raises(InvalidArgumentError, match="temporal chunk"):
        chunks.plan_chunks(*args)


@pytest.mark.parametrize("kind", ["static"])  # the longest history: the worst case
def test_default_warmup_is_within_the_farm_tolerance(kind):
    frames = synthetic.sequence(kind, frames=chunks.DEFAULT_WARMUP + 28, size=16, seed=3)
    start = chunks.DEFAULT_WARMUP + 24
    with Denoiser(backend="reference", hdr=True, quality="balanced") as den:

        def run(fs):
            with TemporalDenoiser(den) as td:
                return [
                    td.denoise(f.color, f.albedo, f.normal, motion=f.motion, depth=f.depth)
                    for f in fs
                ]

        full = run(frames)[start:]
        chunk = run(frames[start - chunks.DEFAULT_WARMUP :])[chunks.DEFAULT_WARMUP :]
    for a, b in zip(chunk, full, strict=True):
        assert np.sqrt(np.mean((a - b) ** 2)) <= chunks.FARM_TOLERANCE * np.sqrt(np.mean(b**2))
