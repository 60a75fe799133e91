"""Temporal mode in contiguous chunks (a render farm's workers each take one).

A chunk is a run of consecutive frames to denoise and write, preceded by up to `warmup`
frames that are denoised only for their history (not written). A chunk whose warm-up
reaches back to the first frame gives exactly the single-process result (the same bits).
Otherwise its history lacks what is older than the warm-up: that has decayed (the
accumulated input by ``(1 - 1 / history)`` per frame, the output blend by ``(1 -
output_blend)``), but the per-pixel decisions (history dropped where the light seems to
change, fireflies limited) can fall differently on a history that started later, so frames
differ from the single-process ones by up to `FARM_TOLERANCE` relative RMS with
`DEFAULT_WARMUP` (single pixels by more; docs/benchmarks.md). Give a warm-up as long as the
sequence for identical output.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.temporal.passes import TemporalParams

DEFAULT_WARMUP = 4 * TemporalParams.history
# Largest RMS difference of a farm frame from the single-process one, relative to the
# frame's RMS, with DEFAULT_WARMUP (measured on the synthetic static sequence of
# tests/temporal, the longest history: 2.3e-2 at most; docs/benchmarks.md).
FARM_TOLERANCE = 3e-2


@dataclass(frozen=True)
class TemporalChunk:
    """Frames ``[start, stop)`` of a sequence, with the warm-up ``[warmup_start, start)``."""

    warmup_start: int
    start: int
    stop: int

    @property
    def warmup(self) -> range:
        return range(self.warmup_start, self.start)

    @property
    def frames(self) -> range:
        return range(self.start, self.stop)


def plan_chunks(count: int, chunks: int, warmup: int = DEFAULT_WARMUP) -> list[TemporalChunk]:
    """``count`` frames split into at most ``chunks`` contiguous chunks of nearly equal
    length, each with up to ``warmup`` frames of warm-up before it."""
    for name, value in (("count", count), ("chunks", chunks), ("warmup", warmup)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (name == "chunks"):
            raise InvalidArgumentError(
                f"temporal chunk {name} is {value!r}; expected a "
                f"{'positive' if name == 'chunks' else 'non-negative'} integer"
            )
    chunks = min(chunks, count) or 1
    bounds = [count * i // chunks for i in range(chunks + 1)]
    return [
        TemporalChunk(max(0, start - warmup), start, stop)
        for start, stop in itertools.pairwise(bounds)
        if stop > start
    ]


def denoise_chunk(
    chunk: TemporalChunk,
    jobs: Sequence[Any],
    denoise: Callable[[Any, Any, bool], Any],
    temporal: Any,
) -> list[Any]:
    """Run one chunk: ``denoise(job, temporal, write)`` for each warm-up frame with
    ``write=False`` and each of its frames with ``write=True``, on a fresh history
    (``temporal``, a `TemporalFrames`, is reset first). Returns the frames' answers."""
    temporal.close()
    for index in chunk.warmup:
        denoise(jobs[index], temporal, False)
    return [denoise(jobs[index], temporal, True) for index in chunk.frames]
