"""Temporal mode on the farm: contiguous chunks of frames, each with warm-up history.

`denoise_sequence_temporal` splits the frames into chunks (`oidn_gpu.farm.temporal_chunks`), one
per worker or more, and runs them through `driver.denoise_sequence` as units of work: a
`ChunkJob` (the chunk's first frame, for the progress lines) that a `TemporalFrameWorker`
denoises whole, warm-up frames first (not written), on a fresh history. A failed chunk is
tried again whole on another worker (its outputs are rewritten atomically, the same). The
summary then holds one result per frame. Farm output equals the single-process output
where a chunk's warm-up reaches back to the first frame, and is within
`chunks.FARM_TOLERANCE` of it with the default warm-up otherwise. With ``skip_existing`` a
chunk whose frames are all complete is skipped; otherwise its complete frames before its
last missing one are denoised again (not written) for the history, so a resumed run
writes the files of an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oidn_gpu.farm import driver
from oidn_gpu.farm import temporal_chunks as tc
from oidn_gpu.farm.scheduler import FarmFrameResult, FarmSummary
from oidn_gpu.farm.worker import FrameOutcome, FrameWorker
from oidn_gpu.sequence import FrameJob, denoise_frame, describe_error, output_is_complete
from oidn_gpu.sequence.temporal_frames import TemporalFrames

# Chunks per worker: a few, so a slow or failing chunk holds back little of the sequence.
CHUNKS_PER_WORKER = 2


@dataclass(frozen=True)
class ChunkJob(FrameJob):
    """A chunk as one unit of farm work: its first frame's fields, then all of it."""

    frames: tuple[FrameJob, ...] = ()
    warmup: tuple[FrameJob, ...] = ()
    params: tuple[tuple[str, Any], ...] = ()  # TemporalDenoiser parameters
    motion_layer: str | None = None
    motion_convention: str | None = None
    first_index: int = 0


class TemporalFrameWorker(FrameWorker):
    """A `FrameWorker` that denoises a `ChunkJob` whole with the temporal mode."""

    def denoise(self, job: FrameJob, skip_existing: bool = False) -> FrameOutcome:
        if not isinstance(job, ChunkJob):
            return super().denoise(job, skip_existing)
        start = time.perf_counter()
        skipped, history = _resume_plan(job.frames) if skip_existing else (set(), set())
        if len(skipped) == len(job.frames):
            frames = [{"status": "skipped", "elapsed_s": 0.0, "warnings": ()}] * len(skipped)
            return FrameOutcome("skipped", time.perf_counter() - start, layers={"frames": frames})
        temporal = TemporalFrames(dict(job.params), job.motion_layer, job.motion_convention)
        try:
            for warm in job.warmup:
                temporal.warm_up(warm, self._pool, self._options)
        except Exception as err:
            temporal.close()
            return FrameOutcome(
                "failed",
                time.perf_counter() - start,
                error=f"warm-up frame failed: {describe_error(err)}",
            )
        frames = []
        try:
            for i, frame in enumerate(job.frames):
                if i in history:
                    frames.append(self._history(frame, temporal))
                elif i in skipped:
                    frames.append({"status": "skipped", "elapsed_s": 0.0, "warnings": ()})
                else:
                    frames.append(self._frame(frame, temporal))
        finally:
            temporal.close()
        failed = [f for f in frames if f["status"] == "failed"]
        status = "failed" if failed else "done"
        return FrameOutcome(
            status,
            time.perf_counter() - start,
            layers={"frames": frames},
            error=failed[0]["error"] if failed else None,
        )

    def _history(self, job: FrameJob, temporal: TemporalFrames) -> dict[str, Any]:
        """A complete frame before a missing one: denoised for the history only."""
        start = time.perf_counter()
        try:
            report = temporal.warm_up(job, self._pool, self._options)
        except Exception as err:
            return {
                "status": "failed",
                "elapsed_s": time.perf_counter() - start,
                "error": f"history: {describe_error(err)}",
                "warnings": (),
            }
        return {
            "status": "skipped",
            "elapsed_s": time.perf_counter() - start,
            "warnings": (),
            "layers": {"temporal": report},
        }

    def _frame(self, job: FrameJob, temporal: TemporalFrames) -> dict[str, Any]:
        start = time.perf_counter()
        warned: list[str] = []
        try:
            done = denoise_frame(
                job, self._pool, self._options, warn=warned.append, temporal=temporal
            )
        except Exception as err:
            return {
                "status": "failed",
                "elapsed_s": time.perf_counter() - start,
                "error": describe_error(err),
                "warnings": tuple(warned),
            }
        return {
            "status": "done",
            "elapsed_s": time.perf_counter() - start,
            "used": done.used,
            "layers": done.layers,
            "warnings": tuple(warned),
            "nonfinite_pixels": done.nonfinite_pixels,
            "stages": dict(done.stages),
        }


def _resume_plan(frames: Sequence[FrameJob]) -> tuple[set[int], set[int]]:
    """Of a chunk's frames with ``skip_existing``: those complete (skipped), and those of
    them before the last missing frame (denoised again, unwritten, for its history, so
    that the chunk writes what it writes uninterrupted)."""
    complete = {i for i, job in enumerate(frames) if output_is_complete(job)}
    missing = [i for i in range(len(frames)) if i not in complete]
    history = {i for i in complete if missing and i < missing[-1]}
    return complete, history


def chunk_jobs(
    jobs: Sequence[FrameJob],
    chunks: int,
    warmup: int,
    params: Mapping[str, Any],
    motion_layer: str | None,
    motion_convention: str | None = None,
) -> list[ChunkJob]:
    """The `ChunkJob` of each chunk of ``jobs`` (absolute paths)."""
    absolute = [driver._absolute(job) for job in jobs]
    out = []
    for chunk in tc.plan_chunks(len(absolute), chunks, warmup):
        first = absolute[chunk.start]
        out.append(
            ChunkJob(
                **{f.name: getattr(first, f.name) for f in dataclasses.fields(FrameJob)},
                frames=tuple(absolute[i] for i in chunk.frames),
                warmup=tuple(absolute[i] for i in chunk.warmup),
                params=tuple(sorted(params.items())),
                motion_layer=motion_layer,
                motion_convention=motion_convention,
                first_index=chunk.start,
            )
        )
    return out


def denoise_sequence_temporal(
    jobs: Sequence[FrameJob],
    config: Any,
    options: Any = None,
    farm_options: driver.FarmOptions | None = None,
    *,
    temporal: TemporalFrames | None = None,
    warmup: int = tc.DEFAULT_WARMUP,
    chunks: int | None = None,
    **driver_options: Any,
) -> FarmSummary:
    """`driver.denoise_sequence` with the temporal mode, in chunks (module docstring).

    Args:
        temporal: the parameters and motion layer (a `TemporalFrames`; its own state is
            not used).
        warmup: frames of warm-up before each chunk.
        chunks: how many chunks (default `CHUNKS_PER_WORKER` per worker, or per frame
            when there are fewer frames).
        config, options, farm_options, driver_options: as `driver.denoise_sequence`
            takes them (``stream``, ``on_frame``: per chunk).
    """
    temporal = temporal or TemporalFrames()
    farm_options = farm_options or driver.FarmOptions()
    if chunks is None:
        chunks = CHUNKS_PER_WORKER * (farm_options.workers or 2)
    units = chunk_jobs(
        jobs, chunks, warmup, temporal.params, temporal.motion_layer, temporal.motion_convention
    )
    summary = driver.denoise_sequence(
        units, config, options, farm_options, worker_class=TemporalFrameWorker, **driver_options
    )
    summary.results = [r for result in summary.results for r in _frame_results(result)]
    return summary


def _frame_results(result: FarmFrameResult) -> list[FarmFrameResult]:
    """One result per frame of a chunk's result."""
    chunk = result.job
    assert isinstance(chunk, ChunkJob)
    frames = result.layers.get("frames")
    if frames is None:  # the chunk failed before its frames (warm-up, a dead worker)
        return [
            dataclasses.replace(result, job=job, index=chunk.first_index + i, layers={})
            for i, job in enumerate(chunk.frames)
        ]
    out = []
    for i, (job, frame) in enumerate(zip(chunk.frames, frames, strict=True)):
        out.append(
            dataclasses.replace(
                result,
                job=job,
                index=chunk.first_index + i,
                status=frame["status"],
                elapsed_s=frame["elapsed_s"],
                error=frame.get("error"),
                used=frame.get("used", ""),
                layers=dict(frame.get("layers", {})),
                warnings=tuple(frame["warnings"]),
                nonfinite_pixels=frame.get("nonfinite_pixels", 0),
                stages=dict(frame.get("stages", {})),
            )
        )
    return out
