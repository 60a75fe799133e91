"""The farm's worker: a Ray actor that denoises the frames it is given.

`FrameWorker` keeps a `sequence.DenoiserPool` (the model, plans and compiled kernels)
for its lifetime and runs `sequence.denoise_frame`, the single-process code, on each frame;
errors come back as a `FrameOutcome` so that the driver can retry the frame elsewhere.
On a node with GPUs its backend is placed on the GPU that Ray assigned to it
(`config.DenoiserConfig.on_gpu`).

A worker given ``threads`` CPU slots limits every thread pool of its process to them
(`limit_threads`: BLAS through threadpoolctl, OpenImageIO's ``threads`` and
``exr_threads``, the host-copy pool of `image.host_copy`), so that several workers on
one node do not oversubscribe its cores. Its log records come back with each frame's
outcome (`farm.logs`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from oidn_gpu.config import DenoiserConfig
from oidn_gpu.errors import require
from oidn_gpu.farm.logs import ForwardedRecord, WorkerLogCapture
from oidn_gpu.image.host_copy import limit_copy_threads
from oidn_gpu.sequence import (
    DenoiserPool,
    FrameJob,
    FrameNote,
    SequenceOptions,
    denoise_frame,
    describe_error,
    output_is_complete,
)

RAY_EXTRA = "ray"


def import_ray() -> Any:
    """The ``ray`` module, or `MissingDependencyError` naming ``pip install 'oidn-gpu[ray]'``."""
    return require("ray", RAY_EXTRA)


@dataclass(frozen=True)
class FrameOutcome:
    """What a worker reports for one attempt at one frame.

    Attributes:
        used, layers, notes: as `sequence.FrameOutcome` (the inputs used, in words and as
            data; what a run says once).
        warnings: this frame's warnings (`NonFiniteInputWarning` messages, non-finite
            output pixels).
        nonfinite_pixels: denoised pixels with a NaN or infinite channel.
        details: the traceback of a failure.
        stages: seconds of the frame's stages (`sequence.FrameOutcome.stages`).
        records: what the worker logged during the frame (`farm.logs.forward` logs them
            on the driver).
    """

    status: str  # 'done', 'skipped' or 'failed'
    elapsed_s: float = 0.0
    used: str = ""
    layers: dict[str, Any] = field(default_factory=dict)
    notes: tuple[FrameNote, ...] = ()
    warnings: tuple[str, ...] = ()
    error: str | None = None
    details: str | None = None
    nonfinite_pixels: int = 0
    stages: dict[str, float] = field(default_factory=dict)
    records: tuple[ForwardedRecord, ...] = ()


OIIO_THREAD_ATTRIBUTES = ("threads", "exr_threads")


def limit_threads(threads: int) -> Any:
    """Limit this process's thread pools to ``threads`` (BLAS, OpenImageIO's, the host
    copies'); returns a function that restores them."""
    threadpoolctl = require("threadpoolctl", RAY_EXTRA)
    oiio = require("OpenImageIO", "images")
    blas = threadpoolctl.threadpool_limits(limits=threads)
    before = {name: oiio.get_int_attribute(name) for name in OIIO_THREAD_ATTRIBUTES}
    for name in OIIO_THREAD_ATTRIBUTES:
        oiio.attribute(name, threads)
    copies = limit_copy_threads(threads)

    def restore() -> None:
        blas.restore_original_limits()
        for name, value in before.items():
            oiio.attribute(name, value)
        limit_copy_threads(copies)

    return restore


class FrameWorker:
    """One farm worker: denoises the frames it is given with Denoisers kept across frames.

    Ray runs it as an actor (`denoise_sequence` wraps the class with ``ray.remote``); it is
    a plain class so that a subclass can add work per frame (override `denoise`).

    Args:
        config: the denoiser's options (hdr/srgb are set per frame).
        options: how frames are read and written (``inputs``, ``output``, ``software``).
        blas_threads: threads of this worker's pools (its CPU slots: BLAS, OpenImageIO,
            host copies), so that several workers on one node do not oversubscribe its
            cores (`limit_threads`).
        log_level: the driver's level: records from it on come back with each outcome.
    """

    def __init__(
        self,
        config: DenoiserConfig,
        options: SequenceOptions,
        *,
        blas_threads: int = 1,
        log_level: int = logging.INFO,
    ) -> None:
        self._restore_threads = limit_threads(blas_threads)  # fails at start without OIIO
        self._logs = WorkerLogCapture(log_level)
        self._options = options
        self._where = f"{socket.gethostname()} pid {os.getpid()}"
        gpu_ids = _assigned_gpu_ids()
        if gpu_ids:
            # the backend placed on this worker's GPU (CUDA sees only it: Ray sets
            # CUDA_VISIBLE_DEVICES; WebGPU sees them all and takes that GPU's adapter)
            config, where = config.on_gpu(gpu_ids[0])
            self._where += f" GPU {gpu_ids[0]}" + (f" ({where})" if where else "")
        else:
            self._where += f" {blas_threads} CPU" + ("s" if blas_threads != 1 else "")
        self._pool = DenoiserPool(config)

    def ready(self) -> str:
        """Where this worker runs (host, process, GPU or CPUs); answers once it started."""
        return self._where

    def denoise_logged(self, job: FrameJob, skip_existing: bool = False) -> FrameOutcome:
        """`denoise` with the records logged meanwhile in the outcome (what the driver
        calls)."""
        self._logs.take()  # whatever came before this frame is not its own
        outcome = self.denoise(job, skip_existing)
        return dataclasses.replace(outcome, records=self._logs.take())

    def denoise(self, job: FrameJob, skip_existing: bool = False) -> FrameOutcome:
        """Denoise one frame and write its outputs atomically; errors are returned."""
        start = time.perf_counter()
        warned: list[str] = []
        try:
            if skip_existing and output_is_complete(job):
                return FrameOutcome("skipped", time.perf_counter() - start)
            done = denoise_frame(job, self._pool, self._options, warn=warned.append)
        except Exception as err:
            return FrameOutcome(
                "failed",
                time.perf_counter() - start,
                warnings=tuple(warned),
                error=describe_error(err),
                details=traceback.format_exc().rstrip(),
            )
        elapsed = time.perf_counter() - start
        return FrameOutcome(
            "done",
            elapsed,
            done.used,
            done.layers,
            tuple(done.notes),
            tuple(warned),
            nonfinite_pixels=done.nonfinite_pixels,
            stages=dict(done.stages),
        )

    def close(self) -> None:
        """Release the Denoisers (and their GPU resources) and the thread limits."""
        self._pool.close()
        self._logs.close()
        self._restore_threads()


def _assigned_gpu_ids() -> list[int]:
    """The GPUs Ray assigned to this worker; none when the class is used outside Ray."""
    ray = import_ray()
    return [int(i) for i in ray.get_gpu_ids()] if ray.is_initialized() else []
