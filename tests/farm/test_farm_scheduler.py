"""The farm's scheduler against a scripted stand-in for Ray: in-flight bounds, the choice
of workers for retries, dead workers. Deterministic: answers come oldest first."""

from __future__ import annotations

import io as stdio
import itertools
import logging
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from oidn_gpu import farm, sequence
from oidn_gpu.farm import scheduler
from oidn_gpu.farm.logs import ForwardedRecord


class ActorError(Exception):
    """Stands in for ray.exceptions.RayActorError."""


class TaskError(Exception):
    """Stands in for ray.exceptions.RayError."""


class Ref:
    submitted = itertools.count()

    def __init__(self, answer: Callable[[], Any], frame: bool, never: bool = False) -> None:
        self.answer = answer
        self.frame = frame
        self.never = never  # a worker that never starts (no resources for it)
        self.order = next(Ref.submitted)


class ScriptedRay:
    """`wait` answers the reference submitted first; records how many frames were in flight."""

    exceptions = SimpleNamespace(RayActorError=ActorError, RayError=TaskError)

    def __init__(self) -> None:
        self.max_frames_in_flight = 0

    def wait(self, refs: list[Ref], num_returns: int, fetch_local: bool):
        self.max_frames_in_flight = max(self.max_frames_in_flight, sum(1 for r in refs if r.frame))
        answering = [r for r in refs if not r.never]
        assert answering, "the scheduler would wait forever"
        oldest = min(answering, key=lambda r: r.order)
        return [oldest], [r for r in refs if r is not oldest]

    def get(self, ref: Ref) -> Any:
        return ref.answer()


class Worker:
    """A stand-in actor handle: ``denoise_logged.remote`` and ``ready.remote`` give `Ref`s.

    ``script(frame_name, attempt)`` returns the status of an attempt, or raises.
    """

    def __init__(self, number: int, script: Callable[[str, int], str], starts: bool) -> None:
        self.number = number
        self.frames: list[str] = []
        self.alive = True
        self.restarts_left = 1
        outer = self

        class Denoise:
            @staticmethod
            def remote(job: sequence.FrameJob, skip_existing: bool) -> Ref:
                name = job.color.name
                outer.frames.append(name)

                def answer() -> farm.FrameOutcome:
                    if not outer.alive:  # queued on a worker that died meanwhile
                        raise ActorError(f"worker {outer.number} died")
                    status = script(name, outer.number)
                    if status == "die":
                        outer.alive = False
                        raise ActorError(f"worker {outer.number} died")
                    if status == "done-nonfinite":  # written with 7 NaN/Inf pixels
                        return farm.FrameOutcome("done", nonfinite_pixels=7)
                    if status == "logged":  # done, with a record the worker logged
                        record = ForwardedRecord("oidn_gpu.wgpu", logging.WARNING, "slow", 5.0)
                        return farm.FrameOutcome("done", records=(record,))
                    if status == "warned":  # done, with a NaN count as a worker reports it
                        return farm.FrameOutcome("done", warnings=(f"{name}: 3 NaN pixels",))
                    return farm.FrameOutcome(status, error=None if status != "failed" else "bad")

                return Ref(answer, frame=True)

        class Ready:
            @staticmethod
            def remote() -> Ref:
                def answer() -> str:
                    if not outer.alive:
                        if outer.restarts_left == 0:
                            raise ActorError("gone for good")
                        outer.restarts_left -= 1
                        outer.alive = True
                    return f"host{outer.number}"

                return Ref(answer, frame=False, never=not starts)

        self.denoise_logged = Denoise
        self.ready = Ready


def _schedule(
    count: int,
    workers: int,
    script: Callable[[str, int], str],
    retries: int = 2,
    starting: int | None = None,
) -> tuple[farm.FarmSummary, list[Worker], ScriptedRay]:
    """Run the scheduler; only the first ``starting`` workers ever start (default all)."""
    ray = ScriptedRay()
    starting = workers if starting is None else starting
    handles = [Worker(i, script, starts=i < starting) for i in range(workers)]
    jobs = [sequence.FrameJob(Path(f"f{i:03d}.exr"), Path(f"o{i:03d}.exr")) for i in range(count)]
    summary = farm.FarmSummary()
    report = scheduler.Report(count, False, True, False, stdio.StringIO())
    loop = scheduler.Scheduler(
        ray,
        handles,
        jobs,
        retries=retries,
        skip_existing=False,
        report=report,
        summary=summary,
        on_frame=None,
    )
    loop.run()
    summary.results.extend(sorted(loop.results, key=lambda r: r.index))
    return summary, handles, ray


def test_at_most_two_frames_per_worker_are_in_flight_and_every_worker_gets_frames():
    summary, handles, ray = _schedule(30, 3, lambda name, worker: "done")
    assert summary.count("done") == 30
    assert ray.max_frames_in_flight == 2 * 3
    assert all(len(h.frames) >= 5 for h in handles)
    assert sum(len(h.frames) for h in handles) == 30  # each frame sent once


def test_a_failed_frame_goes_to_a_worker_it_has_not_failed_on():
    attempts: list[int] = []

    def script(name: str, worker: int) -> str:
        if name != "f004.exr":
            return "done"
        attempts.append(worker)
        return "failed" if len(attempts) < 3 else "done"

    summary, _, _ = _schedule(10, 3, script)
    result = summary.results[4]
    assert sorted(attempts) == [0, 1, 2]  # three attempts, three workers
    assert result.status == "done" and result.failed_attempts == 2
    assert result.worker == f"worker {attempts[-1] + 1} (host{attempts[-1]})"


def test_a_frame_failing_everywhere_is_reported_after_its_retries():
    summary, handles, _ = _schedule(6, 2, lambda n, w: "failed" if n == "f001.exr" else "done")
    failed = summary.results[1]
    assert failed.status == "failed" and failed.failed_attempts == 3 and failed.error == "bad"
    assert sum(h.frames.count("f001.exr") for h in handles) == 3  # 1 + 2 retries, no more
    assert summary.count("done") == 5 and summary.retried == 2


def test_frames_of_a_dead_worker_go_back_to_the_queue():
    died = []

    def script(name: str, worker: int) -> str:
        if name == "f003.exr" and not died:
            died.append(worker)
            return "die"
        return "done"

    summary, _, _ = _schedule(12, 2, script)
    assert summary.count("done") == 12
    assert summary.worker_deaths == 1 and summary.lost >= 1 and summary.workers_lost == 0
    assert summary.results[3].lost_attempts == 1


def test_when_every_worker_is_gone_the_remaining_frames_fail_with_the_reason():
    def script(name: str, worker: int) -> str:
        return "die"

    summary, _, _ = _schedule(5, 2, script, retries=5)
    assert summary.count("failed") == 5 and summary.workers_lost == 2
    assert all(r.error == "no worker left to run it (gone for good)" for r in summary.results)


def test_a_retry_runs_again_on_the_same_worker_rather_than_wait_for_one_that_never_starts():
    attempts: list[int] = []

    def script(name: str, worker: int) -> str:
        if name != "f002.exr":
            return "done"
        attempts.append(worker)
        return "failed" if len(attempts) == 1 else "done"

    summary, handles, _ = _schedule(4, 2, script, starting=1)
    assert summary.count("done") == 4 and attempts == [0, 0]
    assert handles[1].frames == []


def test_frames_with_non_finite_output_pixels_are_counted_in_the_farm_summary():
    summary, _, _ = _schedule(
        3, 2, lambda name, _worker: "done-nonfinite" if name == "f001.exr" else "done"
    )
    assert [r.nonfinite_pixels for r in summary.results] == [0, 7, 0]
    assert summary.count("done") == 3 and summary.nonfinite_frames == 1
    assert summary.as_json(3)["nonfinite"] == 1
    assert "; 1 with non-finite output pixels" in summary.line(3)


def test_a_frame_s_warnings_reach_its_result_and_the_json_summary():
    summary, _, _ = _schedule(3, 2, lambda name, worker: "warned" if name == "f001.exr" else "done")
    assert [r.warnings for r in summary.results] == [(), ("f001.exr: 3 NaN pixels",), ()]
    frames = summary.as_json(3)["results"]
    assert [f["warnings"] for f in frames] == [[], ["f001.exr: 3 NaN pixels"], []]


def test_a_worker_s_log_records_reach_the_driver_s_loggers_naming_worker_and_frame(caplog):
    with caplog.at_level(logging.INFO, logger="oidn_gpu"):
        _schedule(3, 1, lambda name, worker: "logged" if name == "f001.exr" else "done")
    forwarded = [r for r in caplog.records if r.name == "oidn_gpu.wgpu"]
    assert len(forwarded) == 1
    assert forwarded[0].levelno == logging.WARNING
    assert forwarded[0].getMessage() == "slow [worker 1 (host0), frame f001.exr]"
    assert forwarded[0].created == 5.0  # when the worker logged it
