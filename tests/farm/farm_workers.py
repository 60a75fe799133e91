"""Farm workers that fail on purpose, for the tests (sent to Ray's workers by value).

Each misbehaves once, on a chosen frame, and leaves a marker file naming the worker that
did, so the tests are deterministic: no timing, no killing from outside at a lucky moment.
"""

from __future__ import annotations

import os
from pathlib import Path

from oidn_gpu.errors import MissingDependencyError
from oidn_gpu.farm import FrameOutcome, FrameWorker
from oidn_gpu.sequence import FrameJob


def _first_time(job: FrameJob, frame_name: str, marker: Path, worker: FrameWorker) -> bool:
    """True (and the marker written) the first time any worker gets ``frame_name``."""
    if job.color.name != frame_name or marker.exists():
        return False
    marker.write_text(worker.ready())
    return True


def crashing_worker(frame_name: str, marker: Path) -> type[FrameWorker]:
    """A worker whose process dies (as in a segfault) the first time it gets the frame."""

    class CrashingWorker(FrameWorker):
        def denoise(self, job: FrameJob, skip_existing: bool = False) -> FrameOutcome:
            if _first_time(job, frame_name, marker, self):
                os._exit(1)
            return super().denoise(job, skip_existing)

    return CrashingWorker


def leaving_worker(frame_name: str, marker: Path) -> type[FrameWorker]:
    """A worker that stops for good (no restart) the first time it gets the frame."""

    class LeavingWorker(FrameWorker):
        def denoise(self, job: FrameJob, skip_existing: bool = False) -> FrameOutcome:
            if _first_time(job, frame_name, marker, self):
                import ray  # in the worker: the tests import ray only once configured

                ray.actor.exit_actor()
            return super().denoise(job, skip_existing)

    return LeavingWorker


def flaky_worker(frame_name: str, marker: Path) -> type[FrameWorker]:
    """A worker whose denoise raises the first time any worker gets the frame."""

    class FlakyWorker(FrameWorker):
        def denoise(self, job: FrameJob, skip_existing: bool = False) -> FrameOutcome:
            if _first_time(job, frame_name, marker, self):
                raise RuntimeError(f"flaky failure on {frame_name}")
            return super().denoise(job, skip_existing)

    return FlakyWorker


class UnstartableWorker(FrameWorker):
    """A worker that cannot start, as on a node without OpenImageIO."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise MissingDependencyError(
            "the optional dependency 'OpenImageIO' is not installed; "
            "install it with: pip install 'oidn-gpu[images]'"
        )


class LoggingWorker(FrameWorker):
    """A worker that logs a warning on the ``oidn_gpu.sequence`` logger for every frame (and
    a debug record below the driver's level)."""

    def denoise(self, job: FrameJob, skip_existing: bool = False) -> FrameOutcome:
        import logging

        logger = logging.getLogger("oidn_gpu.sequence")
        logger.debug("below the driver's level")
        logger.warning("worker saw %s in pid %d", job.color.name, os.getpid())
        return super().denoise(job, skip_existing)


def interrupting_writer(frame_name: str, marker: Path, driver_pid: int) -> type[FrameWorker]:
    """A worker that, the first time it gets the frame, starts writing its output (the
    temporary file is there), sends SIGINT to the driver (Ctrl-C at that very moment) and
    waits inside the write until the driver kills it."""

    class InterruptingWriter(FrameWorker):
        def denoise(self, job: FrameJob, skip_existing: bool = False) -> FrameOutcome:
            if _first_time(job, frame_name, marker, self):
                import signal
                import time

                from oidn_gpu import files

                with files.atomic_write(job.output) as tmp:
                    tmp.file.write(b"partial")
                    tmp.file.flush()
                    os.kill(driver_pid, signal.SIGINT)
                    time.sleep(120)
            return super().denoise(job, skip_existing)

    return InterruptingWriter
