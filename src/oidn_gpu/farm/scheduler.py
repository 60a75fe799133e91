"""The farm's driver loop: streams frames to workers and gathers what they report.

`Scheduler` keeps at most `FRAMES_IN_FLIGHT_PER_WORKER` frames per worker in flight and
waits with ``ray.wait``. A failed frame is tried again on a worker it has not failed on;
a worker that dies sends its frames back to the queue and gets a readiness probe that
answers once Ray restarted it (or fails if it is gone for good). `Report` prints progress:
a bar on a terminal, one line per frame otherwise.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from oidn_gpu.farm.logs import forward
from oidn_gpu.farm.worker import FrameOutcome
from oidn_gpu.sequence import FrameJob, FrameResult, SequenceSummary
from oidn_gpu.sequence.logs import report

# One frame denoising and one queued per worker: the worker never waits for the driver
# between frames, and the in-flight work stays bounded at twice the number of workers.
FRAMES_IN_FLIGHT_PER_WORKER = 2

_LOG = logging.getLogger("oidn_gpu.farm")


@dataclass
class FarmFrameResult(FrameResult):
    """What happened to one frame on the farm: the worker of its last attempt, and how
    many attempts failed or were lost with a worker that died."""

    worker: str = ""
    failed_attempts: int = 0
    lost_attempts: int = 0
    index: int = -1  # position in the sequence


@dataclass
class FarmSummary(SequenceSummary):
    """Totals of a farm run: the sequence totals plus the workers and their troubles."""

    workers: list[str] = field(default_factory=list)
    retried: int = 0  # attempts that failed and were tried again
    lost: int = 0  # attempts lost with a worker that died (the frames went back to the queue)
    worker_deaths: int = 0
    workers_lost: int = 0  # workers that died for good (or never started)

    def line(self, total: int) -> str:
        """The sequence line plus ``on 2 workers; 1 attempt retried, ...``."""
        text = super().line(total)
        extras = [f"on {len(self.workers)} worker{'s' if len(self.workers) != 1 else ''}"]
        troubles = [
            (self.retried, "failed attempt retried", "failed attempts retried"),
            (self.lost, "frame requeued from a dead worker", "frames requeued from dead workers"),
            (self.workers_lost, "worker lost", "workers lost"),
        ]
        notes = [f"{n} {one if n == 1 else many}" for n, one, many in troubles if n]
        return f"{text} {extras[0]}" + (f"; {', '.join(notes)}" if notes else "")


class Report:
    """Progress on the driver: a tqdm bar on a terminal, one line per frame otherwise."""

    def __init__(
        self, total: int, show_progress: bool | None, quiet: bool, verbose: bool, stream: TextIO
    ) -> None:
        self._stream = stream
        self._total = total
        self._quiet = quiet
        self.verbose = verbose
        self._finished = 0
        self._noted: set[str] = set()
        self._bar = None
        if show_progress is None:
            show_progress = bool(getattr(stream, "isatty", lambda: False)())
        if show_progress and not quiet and total:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=total, unit="frame", file=stream, dynamic_ncols=True)

    def message(self, text: str, *, error: bool = False) -> None:
        if self._quiet and not error:
            return
        report(_LOG, text)
        if self._bar is not None:
            self._bar.write(text, file=self._stream)
        else:
            print(text, file=self._stream, flush=True)

    def warnings(self, result: FarmFrameResult, outcome: FrameOutcome) -> None:
        """The frame's warnings, and each kind of note once per run."""
        for text in outcome.warnings:
            self.message(f"warning: {result.job.color}: {text}")
        for note in outcome.notes:
            if note.kind not in self._noted:
                self._noted.add(note.kind)
                self.message(f"warning: {note.text}")

    def frame(self, result: FarmFrameResult) -> None:
        self._finished += 1
        if result.status == "failed":
            self.message(f"error: {result.job.color}: {result.error}", error=True)
        if self._bar is not None:
            self._bar.update(1)
            return
        if result.status == "failed":
            return
        head = f"frame {result.index + 1}/{self._total} {result.job.color}"
        if result.status == "skipped":
            text = f"{head}: skipped, '{result.job.output}' is complete"
        else:
            text = (
                f"{head}: {result.used}; {result.elapsed_s:.2f} s -> {result.job.output} "
                f"on {result.worker}"
            )
        self.message(text)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


@dataclass
class _Frame:
    index: int
    job: FrameJob
    failed: int = 0
    lost: int = 0
    tried_on: set[int] = field(default_factory=set)
    error: str | None = None


class Scheduler:
    """Streams frames to workers, retries, requeues the frames of dead workers."""

    def __init__(
        self,
        ray: Any,
        handles: list[Any],
        jobs: Sequence[FrameJob],
        *,
        retries: int,
        skip_existing: bool,
        report: Report,
        summary: FarmSummary,
        on_frame: Callable[[FarmFrameResult], None] | None,
    ) -> None:
        self._ray = ray
        self._handles = handles
        self._retries = retries
        self._skip_existing = skip_existing
        self._report = report
        self._summary = summary
        self._on_frame = on_frame
        self._fresh = deque(_Frame(i, job) for i, job in enumerate(jobs))
        self._retry: list[_Frame] = []
        self._in_flight: dict[Any, tuple[_Frame, int]] = {}
        self._probes: dict[Any, int] = {}
        self._ready: dict[int, str] = {}  # worker -> where it runs
        self._load: Counter[int] = Counter()
        self._gone: dict[int, str] = {}  # workers that died for good -> why
        self.results: list[FarmFrameResult] = []

    def run(self) -> None:
        for worker, handle in enumerate(self._handles):
            self._probes[handle.ready.remote()] = worker
        while self._fresh or self._retry or self._in_flight:
            self._assign()
            if not self._in_flight and not self._probes:
                self._fail_remaining()
                break
            done, _ = self._ray.wait(
                [*self._in_flight, *self._probes], num_returns=1, fetch_local=True
            )
            for ref in done:
                if ref in self._probes:
                    self._probe_answered(ref)
                else:
                    self._frame_answered(ref)

    # -- assignment --

    def _free_workers(self) -> list[int]:
        return [w for w in self._ready if self._load[w] < FRAMES_IN_FLIGHT_PER_WORKER]

    def _assign(self) -> None:
        waiting: list[_Frame] = []
        for frame in self._retry:
            worker = self._worker_for_retry(frame)
            if worker is None:
                waiting.append(frame)
            else:
                self._submit(frame, worker)
        self._retry = waiting
        while self._fresh:
            free = self._free_workers()
            if not free:
                break
            self._submit(self._fresh.popleft(), min(free, key=self._load.__getitem__))

    def _worker_for_retry(self, frame: _Frame) -> int | None:
        """A free worker the frame has not failed on; else, a free one it has, when no
        other worker can take it soon (every live one had it, or nothing else runs, so
        waiting for a busy or starting worker could wait forever)."""
        free = self._free_workers()
        if not free:
            return None
        untried = [w for w in free if w not in frame.tried_on]
        if untried:
            return min(untried, key=self._load.__getitem__)
        coming = [w for w in [*self._ready, *self._probes.values()] if w not in frame.tried_on]
        if coming and self._in_flight:
            return None
        return min(free, key=self._load.__getitem__)

    def _submit(self, frame: _Frame, worker: int) -> None:
        ref = self._handles[worker].denoise_logged.remote(frame.job, self._skip_existing)
        self._in_flight[ref] = (frame, worker)
        self._load[worker] += 1

    # -- answers --

    def _probe_answered(self, ref: Any) -> None:
        worker = self._probes.pop(ref)
        try:
            where = self._ray.get(ref)
        except self._ray.exceptions.RayActorError as err:
            self._gone[worker] = ray_error_message(err)
            self._summary.workers_lost += 1
            self._report.message(
                f"error: worker {worker + 1} stopped: {self._gone[worker]}", error=True
            )
            return
        self._ready[worker] = f"worker {worker + 1} ({where})"
        if self._ready[worker] not in self._summary.workers:
            self._summary.workers.append(self._ready[worker])

    def _frame_answered(self, ref: Any) -> None:
        frame, worker = self._in_flight.pop(ref)
        self._load[worker] -= 1
        frame.tried_on.add(worker)
        where = self._ready.get(worker, f"worker {worker + 1}")
        try:
            outcome: FrameOutcome = self._ray.get(ref)
        except self._ray.exceptions.RayActorError as err:
            self._worker_died(worker, err)
            frame.lost += 1
            frame.error = f"its worker died ({ray_error_message(err)})"
            self._summary.lost += 1
            if frame.lost > self._retries:
                self._finish(
                    frame,
                    "failed",
                    where,
                    error=(f"{frame.lost} workers died while they held it; last: {frame.error}"),
                )
            else:
                self._retry.insert(0, frame)
            return
        except self._ray.exceptions.RayError as err:  # the task itself broke
            outcome = FrameOutcome("failed", error=ray_error_message(err))
        forward(outcome.records, where, frame.job.color.name)
        if outcome.status != "failed":
            self._finish(frame, outcome.status, where, outcome=outcome)
            return
        frame.failed += 1
        frame.error = outcome.error
        if frame.failed > self._retries:
            self._finish(frame, "failed", where, outcome=outcome)
            if self._report.verbose and outcome.details:
                self._report.message(outcome.details, error=True)
            return
        self._summary.retried += 1
        if self._report.verbose:
            self._report.message(f"retrying {frame.job.color} (failed on {where}: {outcome.error})")
        self._retry.append(frame)

    def _worker_died(self, worker: int, err: Exception) -> None:
        if worker not in self._ready:
            return  # already known; its probe is out
        del self._ready[worker]
        self._summary.worker_deaths += 1
        self._report.message(
            f"worker {worker + 1} died ({ray_error_message(err)}); its frames go back to the queue"
        )
        # answers once Ray restarted it, or fails if it is gone for good
        self._probes[self._handles[worker].ready.remote()] = worker

    def _finish(
        self,
        frame: _Frame,
        status: str,
        worker: str,
        *,
        outcome: FrameOutcome | None = None,
        error: str | None = None,
    ) -> None:
        result = FarmFrameResult(
            frame.job,
            status,
            elapsed_s=outcome.elapsed_s if outcome else 0.0,
            error=error if error is not None else (outcome.error if outcome else None),
            used=outcome.used if outcome else "",
            layers=dict(outcome.layers) if outcome else {},
            nonfinite_pixels=outcome.nonfinite_pixels if outcome else 0,
            warnings=tuple(outcome.warnings) if outcome else (),
            stages=dict(outcome.stages) if outcome else {},
            worker=worker,
            failed_attempts=frame.failed,
            lost_attempts=frame.lost,
            index=frame.index,
        )
        self.results.append(result)
        if outcome is not None:
            self._report.warnings(result, outcome)
        self._report.frame(result)
        if self._on_frame is not None:
            self._on_frame(result)

    def _fail_remaining(self) -> None:
        why = "; ".join(sorted(set(self._gone.values()))) or "no worker could be started"
        for frame in [*self._retry, *self._fresh]:
            self._finish(frame, "failed", "", error=f"no worker left to run it ({why})")
        self._retry.clear()
        self._fresh.clear()


def ray_error_message(err: BaseException) -> str:
    """The first meaningful line of a Ray error (they carry multi-line reports)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    for line in reversed(lines):  # a creation error ends with "SomeError: message"
        if ": " in line and line.split(":", 1)[0].endswith(("Error", "Exception")):
            return line
    return lines[0] if lines else type(err).__name__
