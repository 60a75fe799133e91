"""Denoise a frame sequence on a Ray cluster (``oidn-gpu denoise ... --ray [ADDRESS]``).

One long-lived worker per GPU (or per CPU slot for the reference backend) runs as a Ray
actor: it keeps its Denoisers, and with them the model, the plans and the compiled GPU
kernels, warm from frame to frame. The driver streams frames (file paths, never pixels) to
the workers, at most `FRAMES_IN_FLIGHT_PER_WORKER` per worker, so a worker always has its
next frame queued but a slow worker never hoards frames. Each worker reads its frame from
the (shared) storage, denoises it with the same code as the single-process loop
(`sequence.denoise_frame`) and writes the output atomically (temporary file, then rename).

Failures:

- a frame whose denoise raises is tried again on another worker, up to ``retries`` more
  times, then reported as failed; the other frames go on;
- a worker that dies (its process crashed, its node was lost, or it was killed) loses no
  frame: the frames it held go back to the queue. Ray restarts the worker (up to
  ``retries + 1`` times) and it gets frames again once it answers; a frame that was on
  ``retries + 1`` workers that died is reported as failed, so a frame that crashes every
  worker cannot take the whole farm down;
- with ``skip_existing`` a frame is skipped when its output (and preview) exists and
  decodes as an image of the input's size; a truncated or foreign half-written file is
  denoised again.

The driver aggregates progress: a bar on a terminal, one line per frame otherwise, and
the summary of `sequence.SequenceSummary`. Ray is optional (``pip install
'oidn-gpu[ray]'``) and imported only when a farm runs.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import traceback
import uuid
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from oidn_gpu.backends import BACKEND_ENV_VAR
from oidn_gpu.errors import InvalidArgumentError, require
from oidn_gpu.image import io
from oidn_gpu.sequence import (
    AuxSource,
    FrameJob,
    FrameResult,
    InputOptions,
    SequenceSummary,
    _DenoiserPool,
    _message,
    denoise_frame,
)

RAY_EXTRA = "ray"
# One frame denoising and one queued per worker: the worker never waits for the driver
# between frames, and the in-flight work stays bounded at twice the number of workers.
FRAMES_IN_FLIGHT_PER_WORKER = 2
DEFAULT_RETRIES = 2
# Ray sends anonymous usage statistics from instances it starts unless told otherwise; an
# instance oidn-gpu starts on this machine keeps them off unless the user set the variable.
RAY_USAGE_STATS_ENV = "RAY_USAGE_STATS_ENABLED"


@dataclass(frozen=True)
class FrameOutcome:
    """What a worker reports for one attempt at one frame."""

    status: str  # 'done', 'skipped' or 'failed'
    elapsed_s: float = 0.0
    used: str = ""
    error: str | None = None
    details: str | None = None  # the traceback of a failure


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


def import_ray() -> Any:
    """The ``ray`` module, or `MissingDependencyError` naming ``pip install 'oidn-gpu[ray]'``."""
    return require("ray", RAY_EXTRA)


# --- the worker (a Ray actor) --------------------------------------------------------------


def output_is_complete(job: FrameJob) -> bool:
    """True when the frame's output (and preview, if asked for) exists and decodes as an
    image of the input's size.

    Outputs are written atomically, so an existing file of ours is complete; decoding every
    pixel also catches a file that another tool left half-written.
    """
    if not job.output.is_file() or (
        job.side_by_side is not None and not job.side_by_side.is_file()
    ):
        return False
    try:
        color = io.read_image(job.color)
        output = io.read_image(job.output)
        if job.side_by_side is not None:
            io.read_image(job.side_by_side)
    except (OSError, ValueError):  # ImageFileError (an OSError): unreadable or truncated
        return False
    return (output.height, output.width) == (color.height, color.width)


def select_gpu_adapter(adapters: Sequence[Any], gpu_id: int) -> Any:
    """The WebGPU adapter for the GPU that Ray assigned to this worker.

    Vulkan sees every GPU of the node whatever ``CUDA_VISIBLE_DEVICES`` says, so the
    worker picks the ``gpu_id``-th hardware adapter itself: discrete adapters if there are
    any (an integrated GPU is not one of Ray's GPUs), in the driver's order. Distinct ids
    give distinct adapters, so no two workers of a node share a GPU.

    Raises:
        InvalidArgumentError: fewer adapters than the id needs.
    """
    hardware = [a for a in adapters if str(a.info.get("adapter_type", "")).lower() != "cpu"]
    discrete = [a for a in hardware if "discrete" in str(a.info.get("adapter_type", "")).lower()]
    candidates = discrete or hardware
    if gpu_id >= len(candidates):
        names = ", ".join(str(a.info.get("device", "?")) for a in candidates) or "none"
        raise InvalidArgumentError(
            f"Ray assigned GPU {gpu_id} to this worker but the WebGPU driver lists "
            f"{len(candidates)} GPU adapter(s) on {socket.gethostname()}: {names}"
        )
    return candidates[gpu_id]


def _open_wgpu_device_for_gpu(gpu_id: int) -> Any:
    """A wgpu device on the adapter of Ray's GPU ``gpu_id``, with the features and limits
    `backends.wgpu.device.open_device` asks for."""
    # imported here: the wgpu backend needs the optional wgpu package
    from oidn_gpu.backends.wgpu import device as wgpu_device

    by_backend: dict[str, list[Any]] = {}
    for adapter in wgpu_device.enumerate_adapters():
        by_backend.setdefault(str(adapter.info.get("backend_type", "")), []).append(adapter)
    # one API's list (Vulkan on Linux): the GL backend lists the same GPUs again
    preferred = max(by_backend.values(), key=len) if by_backend else []
    for name in ("Vulkan", "Metal", "D3D12"):
        if by_backend.get(name):
            preferred = by_backend[name]
            break
    adapter = select_gpu_adapter(preferred, gpu_id)
    available = set(adapter.features)
    limits = dict(adapter.limits)
    return adapter.request_device_sync(
        label=f"oidn-gpu farm GPU {gpu_id}",
        required_features=[f for f in wgpu_device.OPTIONAL_FEATURES if f in available],
        required_limits={n: limits[n] for n in wgpu_device.MAX_LIMITS if n in limits},
    )


class FrameWorker:
    """One farm worker: denoises the frames it is given with Denoisers kept across frames.

    Ray runs it as an actor (`denoise_sequence` wraps the class with ``ray.remote``); it is
    a plain class so that a subclass can add work per frame (override `denoise`).

    Args:
        denoiser_kwargs: options of `oidn_gpu.Denoiser` (hdr/srgb are set per frame).
        options: where to find the images in the files.
        lightmap: RTLightmap filter.
        software: the ``Software`` attribute written into outputs.
        blas_threads: BLAS threads of this worker (its CPU slots), so that the reference
            backends of several workers on one node do not oversubscribe its cores.
    """

    def __init__(
        self,
        denoiser_kwargs: Mapping[str, Any],
        options: InputOptions,
        *,
        lightmap: bool = False,
        software: str = "oidn-gpu",
        blas_threads: int = 1,
    ) -> None:
        threadpoolctl = require("threadpoolctl", RAY_EXTRA)
        require("OpenImageIO", "images")  # fail at start, not on every frame
        self._blas_limits = threadpoolctl.threadpool_limits(limits=blas_threads)
        self._options = options
        self._lightmap = lightmap
        self._software = software
        kwargs = dict(denoiser_kwargs)
        self._where = f"{socket.gethostname()} pid {os.getpid()}"
        gpu_ids = _assigned_gpu_ids()
        if gpu_ids:
            self._where += f" GPU {gpu_ids[0]}"
            if _requested_backend(kwargs) != "reference" and "device" not in kwargs:
                kwargs["device"] = _open_wgpu_device_for_gpu(gpu_ids[0])
                kwargs["backend"] = "wgpu"
        else:
            self._where += f" {blas_threads} CPU" + ("s" if blas_threads != 1 else "")
        self._pool = _DenoiserPool(kwargs, lightmap)

    def ready(self) -> str:
        """Where this worker runs (host, process, GPU or CPUs); answers once it started."""
        return self._where

    def denoise(self, job: FrameJob, skip_existing: bool = False) -> FrameOutcome:
        """Denoise one frame and write its outputs atomically; errors are returned."""
        start = time.perf_counter()
        try:
            if skip_existing and output_is_complete(job):
                return FrameOutcome("skipped", time.perf_counter() - start)
            used = denoise_frame(
                job,
                self._pool,
                self._options,
                lightmap=self._lightmap,
                progress=None,
                software=self._software,
            )
        except Exception as err:
            return FrameOutcome(
                "failed",
                time.perf_counter() - start,
                error=_message(err),
                details=traceback.format_exc().rstrip(),
            )
        return FrameOutcome("done", time.perf_counter() - start, used=used)

    def close(self) -> None:
        """Release the Denoisers (and their GPU resources) and the BLAS thread limit."""
        self._pool.close()
        self._blas_limits.restore_original_limits()


def _assigned_gpu_ids() -> list[int]:
    """The GPUs Ray assigned to this worker; none when the class is used outside Ray."""
    ray = import_ray()
    return [int(i) for i in ray.get_gpu_ids()] if ray.is_initialized() else []


def _requested_backend(kwargs: Mapping[str, Any]) -> str:
    backend = str(kwargs.get("backend", "auto"))
    if backend == "auto":
        return os.environ.get(BACKEND_ENV_VAR) or "auto"
    return backend


# --- resources -----------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerPlan:
    """How many workers, and the Ray resources of each."""

    count: int
    num_cpus: int
    num_gpus: int

    def describe(self) -> str:
        each = f"{self.num_gpus} GPU + " if self.num_gpus else ""
        return f"{self.count} worker(s), each {each}{self.num_cpus} CPU"


def plan_workers(
    resources: Mapping[str, float],
    backend: str,
    workers: int | None = None,
    cpus_per_worker: int = 1,
) -> WorkerPlan:
    """One worker per GPU of the cluster for GPU backends, else one per ``cpus_per_worker``
    CPUs (the reference backend, or a cluster without GPUs).

    Args:
        resources: ``ray.cluster_resources()``.
        backend: the requested backend (``auto`` uses the GPUs when the cluster has some).
        workers: force the number of workers.
        cpus_per_worker: CPU slots (and BLAS threads) of each CPU worker.

    Raises:
        InvalidArgumentError: bad counts, or a cluster with no CPU.
    """
    if workers is not None and workers < 1:
        raise InvalidArgumentError(f"workers must be at least 1, got {workers}")
    if cpus_per_worker < 1:
        raise InvalidArgumentError(f"cpus_per_worker must be at least 1, got {cpus_per_worker}")
    gpus = int(resources.get("GPU", 0))
    cpus = int(resources.get("CPU", 0))
    if backend != "reference" and gpus > 0:
        return WorkerPlan(workers or gpus, num_cpus=1, num_gpus=1)
    if cpus < 1:
        raise InvalidArgumentError(
            f"the Ray cluster has no CPU to run workers on (resources: {dict(resources)})"
        )
    return WorkerPlan(workers or max(1, cpus // cpus_per_worker), cpus_per_worker, 0)


# --- the driver ----------------------------------------------------------------------------


class _Report:
    """Progress on the driver: a tqdm bar on a terminal, one line per frame otherwise."""

    def __init__(
        self, total: int, show_progress: bool | None, quiet: bool, verbose: bool, stream: TextIO
    ) -> None:
        self._stream = stream
        self._total = total
        self._quiet = quiet
        self.verbose = verbose
        self._finished = 0
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
        if self._bar is not None:
            self._bar.write(text, file=self._stream)
        else:
            print(text, file=self._stream, flush=True)

    def frame(self, result: FarmFrameResult) -> None:
        self._finished += 1
        if result.status == "failed":
            self.message(f"error: {result.job.color}: {result.error}", error=True)
        if self._bar is not None:
            self._bar.update(1)
            return
        if result.status == "failed":
            return
        verb = "denoised" if result.status == "done" else "skipped"
        text = f"[{self._finished}/{self._total}] {verb} {result.job.color}"
        if result.status == "done":
            text += f" -> {result.job.output} in {result.elapsed_s:.2f} s on {result.worker}"
            if self.verbose:
                text += f" ({result.used})"
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


class _Scheduler:
    """Streams frames to workers, retries, requeues the frames of dead workers."""

    def __init__(
        self,
        ray: Any,
        handles: list[Any],
        jobs: Sequence[FrameJob],
        *,
        retries: int,
        skip_existing: bool,
        report: _Report,
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

    def cancel(self) -> None:
        for ref in self._in_flight:
            self._ray.cancel(ref)

    # -- assignment --

    def _free_workers(self) -> list[int]:
        return [w for w in self._ready if self._load[w] < FRAMES_IN_FLIGHT_PER_WORKER]

    def _assign(self) -> None:
        waiting: list[_Frame] = []
        for frame in self._retry:
            free = self._free_workers()
            untried_free = [w for w in free if w not in frame.tried_on]
            if untried_free:
                self._submit(frame, min(untried_free, key=self._load.__getitem__))
            elif free and all(w in frame.tried_on for w in self._ready):
                # every live worker has had it: any of them may try again
                self._submit(frame, min(free, key=self._load.__getitem__))
            else:
                waiting.append(frame)  # until a worker it has not failed on is free
        self._retry = waiting
        while self._fresh:
            free = self._free_workers()
            if not free:
                break
            self._submit(self._fresh.popleft(), min(free, key=self._load.__getitem__))

    def _submit(self, frame: _Frame, worker: int) -> None:
        ref = self._handles[worker].denoise.remote(frame.job, self._skip_existing)
        self._in_flight[ref] = (frame, worker)
        self._load[worker] += 1

    # -- answers --

    def _probe_answered(self, ref: Any) -> None:
        worker = self._probes.pop(ref)
        try:
            where = self._ray.get(ref)
        except self._ray.exceptions.RayActorError as err:
            self._gone[worker] = _ray_error_message(err)
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
            frame.error = f"its worker died ({_ray_error_message(err)})"
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
            outcome = FrameOutcome("failed", error=_ray_error_message(err))
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
            f"worker {worker + 1} died ({_ray_error_message(err)}); its frames go back to the queue"
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
            worker=worker,
            failed_attempts=frame.failed,
            lost_attempts=frame.lost,
            index=frame.index,
        )
        self.results.append(result)
        self._report.frame(result)
        if self._on_frame is not None:
            self._on_frame(result)

    def _fail_remaining(self) -> None:
        why = "; ".join(sorted(set(self._gone.values()))) or "no worker could be started"
        for frame in [*self._retry, *self._fresh]:
            self._finish(
                frame, "failed", "", error=frame.error or f"no worker left to run it ({why})"
            )
        self._retry.clear()
        self._fresh.clear()


def _ray_error_message(err: BaseException) -> str:
    """The first meaningful line of a Ray error (they carry multi-line reports)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    for line in reversed(lines):  # a creation error ends with "SomeError: message"
        if ": " in line and line.split(":", 1)[0].endswith(("Error", "Exception")):
            return line
    return lines[0] if lines else type(err).__name__


def _start_ray(ray: Any, address: str | None) -> bool:
    """Connect to ``address`` (or RAY_ADDRESS, or a cluster started on this machine), or
    start a local instance; returns whether we did (and so shut it down afterwards)."""
    if ray.is_initialized():
        return False
    os.environ.setdefault(RAY_USAGE_STATS_ENV, "0")
    ray.init(address=address, log_to_driver=False)
    return True


def denoise_sequence(
    jobs: Sequence[FrameJob],
    denoiser_kwargs: Mapping[str, Any] | None = None,
    options: InputOptions | None = None,
    *,
    address: str | None = None,
    workers: int | None = None,
    cpus_per_worker: int = 1,
    retries: int = DEFAULT_RETRIES,
    lightmap: bool = False,
    skip_existing: bool = False,
    show_progress: bool | None = None,
    verbose: bool = False,
    quiet: bool = False,
    stream: TextIO | None = None,
    software: str = "oidn-gpu",
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
        denoiser_kwargs: options of `oidn_gpu.Denoiser` (``backend``, ``quality``, ...).
        options: where to find the images in the files.
        address: a Ray cluster (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``); None
            uses RAY_ADDRESS, a cluster started on this machine, or a new local instance.
        workers: the number of workers; default one per GPU (GPU backends on a cluster
            with GPUs), else one per ``cpus_per_worker`` CPUs.
        cpus_per_worker: CPUs (and BLAS threads) of each worker without a GPU.
        retries: how many more times a failing frame is tried (on other workers).
        lightmap: RTLightmap filter.
        skip_existing: skip frames whose output exists and decodes at the input's size.
        show_progress: True/False, or None for "a bar when ``stream`` is a terminal".
        verbose: the inputs used per frame, retries and tracebacks.
        quiet: only errors.
        stream: where messages go (stderr).
        software: the ``Software`` attribute written into outputs.
        worker_class: `FrameWorker` or a subclass (extra work per frame).
        on_frame: called on the driver with each frame's final result, as it comes.

    Returns:
        The per-frame results in frame order, the workers and their troubles.

    Raises:
        MissingDependencyError: Ray is not installed.
        InvalidArgumentError: bad ``retries``/``workers``/``cpus_per_worker``.
        KeyboardInterrupt: after stopping the workers; outputs are complete or absent.
    """
    if retries < 0:
        raise InvalidArgumentError(f"retries must not be negative, got {retries}")
    ray = import_ray()
    stream = sys.stderr if stream is None else stream
    kwargs = dict(denoiser_kwargs or {})
    options = options or InputOptions()
    jobs = [_absolute(job) for job in jobs]
    summary = FarmSummary()
    if not jobs:
        return summary
    started = _start_ray(ray, address)
    report = _Report(len(jobs), show_progress, quiet, verbose, stream)
    handles: list[Any] = []
    scheduler = None
    start = time.perf_counter()
    try:
        plan = plan_workers(
            ray.cluster_resources(), _requested_backend(kwargs), workers, cpus_per_worker
        )
        if verbose:
            report.message(f"starting {plan.describe()}")
        actor = ray.remote(worker_class)
        run_id = uuid.uuid4().hex[:8]
        handles = [
            actor.options(
                name=f"oidn-gpu-{run_id}-worker-{i + 1}",
                num_cpus=plan.num_cpus,
                num_gpus=plan.num_gpus,
                max_restarts=retries + 1,
                max_task_retries=0,  # the driver retries, on another worker
            ).remote(
                kwargs,
                options,
                lightmap=lightmap,
                software=software,
                blas_threads=plan.num_cpus,
            )
            for i in range(plan.count)
        ]
        scheduler = _Scheduler(
            ray,
            handles,
            jobs,
            retries=retries,
            skip_existing=skip_existing,
            report=report,
            summary=summary,
            on_frame=on_frame,
        )
        scheduler.run()
    except KeyboardInterrupt:
        summary.interrupted = True
        if scheduler is not None:
            scheduler.cancel()
        raise
    finally:
        summary.elapsed_s = time.perf_counter() - start
        if scheduler is not None:
            summary.results.extend(sorted(scheduler.results, key=lambda r: r.index))
        report.close()
        for handle in handles:
            ray.kill(handle)
        if started:
            ray.shutdown()
    return summary


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
