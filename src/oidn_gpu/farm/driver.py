"""`denoise_sequence`: a frame sequence on a Ray cluster, from the driver's side.

Connects to Ray (or starts a local instance), plans the workers from the cluster's
resources (`plan_workers`), starts them as actors and runs the `scheduler.Scheduler`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from oidn_gpu.backends.base import AUTO, get_backend
from oidn_gpu.config import DenoiserConfig
from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError
from oidn_gpu.farm.logs import LOGGER_NAME
from oidn_gpu.farm.scheduler import FarmFrameResult, FarmSummary, Report, Scheduler
from oidn_gpu.farm.worker import FrameWorker, import_ray
from oidn_gpu.files import remove_temporaries_of
from oidn_gpu.sequence import AuxSource, FrameJob, SequenceOptions

DEFAULT_RETRIES = 2

# Ray sends anonymous usage statistics from instances it starts unless told otherwise; an
# instance oidn-gpu starts on this machine keeps them off unless the user set the variable.
RAY_USAGE_STATS_ENV = "RAY_USAGE_STATS_ENABLED"


@dataclass(frozen=True)
class FarmOptions:
    """Where a farm runs and how its workers are sized (`denoise_sequence`).

    Attributes:
        address: a Ray cluster (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``); None
            uses RAY_ADDRESS, a cluster started on this machine, or a new local instance.
        workers: the number of workers; default one per ``gpus_per_worker`` GPUs (GPU
            backends on a cluster with GPUs), else one per ``cpus_per_worker`` CPUs.
        cpus_per_worker: CPUs (and BLAS threads) of each worker without a GPU.
        gpus_per_worker: GPUs of each GPU worker; a fraction (0.5) shares one GPU between
            workers.
        retries: how many more times a failing frame is tried (on other workers).

    Raises:
        InvalidArgumentError: a negative ``retries`` (the other counts are checked by
            `plan_workers`, against the cluster).
    """

    address: str | None = None
    workers: int | None = None
    cpus_per_worker: int = 1
    gpus_per_worker: float = 1.0
    retries: int = DEFAULT_RETRIES

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise InvalidArgumentError(f"retries must not be negative, got {self.retries}")


@dataclass(frozen=True)
class WorkerPlan:
    """How many workers, and the Ray resources of each."""

    count: int
    num_cpus: int
    num_gpus: float

    def describe(self) -> str:
        each = f"{self.num_gpus:g} GPU + " if self.num_gpus else ""
        return f"{self.count} worker(s), each {each}{self.num_cpus} CPU"


def plan_workers(
    resources: Mapping[str, float],
    backend: str,
    workers: int | None = None,
    cpus_per_worker: int = 1,
    gpus_per_worker: float = 1.0,
) -> WorkerPlan:
    """One worker per ``gpus_per_worker`` GPUs of the cluster for GPU backends (one per
    GPU by default; 0.5 puts two workers on each GPU), else one per ``cpus_per_worker``
    CPUs (a backend that computes on the CPU, or a cluster without GPUs).

    Args:
        resources: ``ray.cluster_resources()``.
        backend: the requested backend (``auto`` uses the GPUs when the cluster has some;
            a backend that computes on the CPU, `Backend.uses_gpu` False, never does).
        workers: force the number of workers.
        cpus_per_worker: CPU slots (and BLAS threads) of each CPU worker.
        gpus_per_worker: Ray's ``num_gpus`` of each GPU worker: a fraction of one GPU (the
            workers then share it) or a whole number of GPUs.

    Raises:
        InvalidArgumentError: bad counts, or a cluster with no CPU.
    """
    if workers is not None and workers < 1:
        raise InvalidArgumentError(f"workers must be at least 1, got {workers}")
    if cpus_per_worker < 1:
        raise InvalidArgumentError(f"cpus_per_worker must be at least 1, got {cpus_per_worker}")
    # Ray accepts a fraction of one GPU or a whole number of GPUs per actor
    if not (
        0 < gpus_per_worker <= 1 or (gpus_per_worker > 1 and float(gpus_per_worker).is_integer())
    ):
        raise InvalidArgumentError(
            f"gpus_per_worker must be a fraction in (0, 1] or a whole number of GPUs, "
            f"got {gpus_per_worker}"
        )
    gpus = float(resources.get("GPU", 0))
    cpus = int(resources.get("CPU", 0))
    if (backend == AUTO or get_backend(backend).uses_gpu) and gpus > 0:
        count = workers or max(1, int(gpus / gpus_per_worker + 1e-9))
        return WorkerPlan(count, num_cpus=1, num_gpus=gpus_per_worker)
    if cpus < 1:
        raise InvalidArgumentError(
            f"the Ray cluster has no CPU to run workers on (resources: {dict(resources)})"
        )
    return WorkerPlan(workers or max(1, cpus // cpus_per_worker), cpus_per_worker, 0)


def _start_ray(ray: Any, address: str | None) -> bool:
    """Connect to ``address`` (or RAY_ADDRESS, or a cluster started on this machine), or
    start a local instance; returns whether we did (and so shut it down afterwards)."""
    if ray.is_initialized():
        return False
    os.environ.setdefault(RAY_USAGE_STATS_ENV, "0")
    with _keeping_sigterm_handler():
        # Workers' raw stdout/stderr stay on their nodes; their log records come back with
        # each frame's outcome and are logged here naming worker and frame (`farm.logs`).
        ray.init(address=address, log_to_driver=False)
    return True


@contextlib.contextmanager
def _keeping_sigterm_handler() -> Iterator[None]:
    """Put back the SIGTERM handler that ``ray.init`` replaces (with one that exits with
    status 15 wherever the driver is), so that SIGTERM stops a run as Ctrl-C does: the
    workers stopped, the summary printed, exit 130 (`files.install_signal_cleanup`)."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main and hasattr(signal, "SIGTERM") else None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def denoise_sequence(
    jobs: Sequence[FrameJob],
    config: DenoiserConfig,
    options: SequenceOptions | None = None,
    farm_options: FarmOptions | None = None,
    *,
    stream: TextIO | None = None,
    worker_class: type[FrameWorker] = FrameWorker,
    on_frame: Callable[[FarmFrameResult], None] | None = None,
) -> FarmSummary:
    """Denoise every frame on a Ray cluster; one failing frame does not stop the others.

    Paths must mean the same file on every node (shared storage); relative ones are made
    absolute here. Ray is used as it is when already initialized; otherwise
    ``ray.init(address)`` connects to a cluster, or starts a local instance on this
    machine, and is shut down at the end.

    Args:
        jobs: the frames (inputs and outputs), in order.
        config: the denoiser's options, as every worker takes them (``backend="auto"``
            is resolved on each worker's node).
        options: how frames are read, written and reported (`sequence.SequenceOptions`;
            ``skip_existing`` skips frames whose output and preview are complete,
            `sequence.output_is_complete`; ``show_progress`` None: a bar when ``stream``
            is a terminal; ``verbose`` adds retries and tracebacks).
        farm_options: the cluster and its workers (`FarmOptions`).
        stream: where messages go (stderr).
        worker_class: `FrameWorker` or a subclass (extra work per frame).
        on_frame: called on the driver with each frame's final result, as it comes.

    Returns:
        The per-frame results in frame order, the workers and their troubles.

    Raises:
        MissingDependencyError: Ray is not installed.
        UnsupportedDeviceError: the backend cannot run on the cluster (checked once, on a
            node with a worker's resources, before any worker starts).
        InvalidArgumentError: bad ``workers``/``cpus_per_worker``/``gpus_per_worker``.
        KeyboardInterrupt: after stopping the workers; outputs are complete or absent.
    """
    options = SequenceOptions() if options is None else options
    farm_options = FarmOptions() if farm_options is None else farm_options
    ray = import_ray()
    stream = sys.stderr if stream is None else stream
    jobs = [_absolute(job) for job in jobs]
    summary = FarmSummary()
    if not jobs:
        return summary
    started = _start_ray(ray, farm_options.address)
    report = Report(len(jobs), options.show_progress, options.quiet, options.verbose, stream)
    handles: list[Any] = []
    scheduler = None
    start = time.perf_counter()
    # the earliest a worker's temporary file can date from (a file server's clock may lag)
    since = time.time() - TEMPORARY_CLOCK_SLACK_S
    try:
        handles = _plan_and_start(ray, config, options, farm_options, worker_class, report)
        scheduler = Scheduler(
            ray,
            handles,
            jobs,
            retries=farm_options.retries,
            skip_existing=options.skip_existing,
            report=report,
            summary=summary,
            on_frame=on_frame,
        )
        scheduler.run()
    except KeyboardInterrupt:
        summary.interrupted = True  # the workers are stopped below; no output is partial
        raise
    finally:
        summary.elapsed_s = time.perf_counter() - start
        if scheduler is not None:
            summary.results.extend(sorted(scheduler.results, key=lambda r: r.index))
        report.close()
        _stop_run(ray, handles, started, jobs, since)
    return summary


def _stop_run(
    ray: Any, handles: list[Any], started: bool, jobs: Sequence[FrameJob], since: float
) -> None:
    """The end of a run, finished or not: the workers stopped, Ray shut down where the run
    started it, and the temporary files of the jobs' outputs made since ``since`` removed (a
    worker stopped while it wrote leaves its own; none is written any more)."""
    _stop_workers(ray, handles)
    if started:
        ray.shutdown()
    remove_temporaries_of(_destinations(jobs), since)


TEMPORARY_CLOCK_SLACK_S = 60.0
WORKER_STOP_TIMEOUT_S = 30.0


def _stop_workers(ray: Any, handles: list[Any]) -> None:
    """Kill the workers and wait until each is gone (a call to it then fails), at most
    `WORKER_STOP_TIMEOUT_S`: none writes a file after this returns."""
    for handle in handles:
        ray.kill(handle)
    calls = [handle.ready.remote() for handle in handles]
    deadline = time.monotonic() + WORKER_STOP_TIMEOUT_S
    for call in calls:
        with contextlib.suppress(Exception):  # RayActorError: gone, as asked
            ray.get(call, timeout=max(0.0, deadline - time.monotonic()))


def _destinations(jobs: Sequence[FrameJob]) -> Iterator[Path]:
    """Every file the jobs write."""
    for job in jobs:
        yield job.output
        if job.side_by_side is not None:
            yield job.side_by_side


def _plan_and_start(
    ray: Any,
    config: DenoiserConfig,
    options: SequenceOptions,
    farm_options: FarmOptions,
    worker_class: type[FrameWorker],
    report: Report,
) -> list[Any]:
    """Plan the workers from the cluster's resources, check the backend on a node with a
    worker's resources, and start the workers."""
    plan = plan_workers(
        ray.cluster_resources(),
        config.requested_backend(),
        farm_options.workers,
        farm_options.cpus_per_worker,
        farm_options.gpus_per_worker,
    )
    _check_backend_on_cluster(ray, plan, config)
    if options.verbose:
        report.message(f"starting {plan.describe()}")
    return _start_workers(ray, plan, worker_class, (config, options), farm_options.retries)


def _backend_problem(config: DenoiserConfig) -> str | None:
    """Why the backend cannot run where this runs (a Ray task on a worker's node), or None."""
    try:
        config.check()
    except UnsupportedDeviceError as err:
        return f"{err} (on {socket.gethostname()})"
    return None


def _check_backend_on_cluster(ray: Any, plan: WorkerPlan, config: DenoiserConfig) -> None:
    """The backend's check, once, on a node and with the resources a worker gets, before
    any worker starts: an unavailable backend is one error, not one per frame."""
    task = ray.remote(num_cpus=plan.num_cpus, num_gpus=plan.num_gpus)(_backend_problem)
    problem = ray.get(task.remote(config))
    if problem is not None:
        raise UnsupportedDeviceError(problem)


def _start_workers(
    ray: Any,
    plan: WorkerPlan,
    worker_class: type[FrameWorker],
    args: tuple[DenoiserConfig, SequenceOptions],
    retries: int,
) -> list[Any]:
    """Start ``plan.count`` actors of ``worker_class`` (Ray schedules them as resources allow)."""
    actor = ray.remote(worker_class)
    log_level = logging.getLogger(LOGGER_NAME).getEffectiveLevel()  # what the driver shows
    run_id = uuid.uuid4().hex[:8]
    return [
        actor.options(
            name=f"oidn-gpu-{run_id}-worker-{i + 1}",  # as `ray list actors` shows them
            num_cpus=plan.num_cpus,
            num_gpus=plan.num_gpus,
            max_restarts=retries + 1,
            max_task_retries=0,  # the driver retries, on another worker
        ).remote(*args, blas_threads=plan.num_cpus, log_level=log_level)
        for i in range(plan.count)
    ]


def _absolute(job: FrameJob) -> FrameJob:
    """The job with absolute paths: a worker's current folder is not the driver's."""

    def aux(source: AuxSource | None) -> AuxSource | None:
        return None if source is None else replace(source, path=source.path.absolute())

    return replace(
        job,
        color=job.color.absolute(),
        output=job.output.absolute(),
        albedo=aux(job.albedo),
        normal=aux(job.normal),
        side_by_side=None if job.side_by_side is None else job.side_by_side.absolute(),
    )
