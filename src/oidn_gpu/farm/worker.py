"""The farm's worker: a Ray actor that denoises the frames it is given.

`FrameWorker` keeps a `sequence._DenoiserPool` (the model, plans and compiled kernels)
for its lifetime and runs `sequence.denoise_frame`, the single-process code, on each frame;
errors come back as a `FrameOutcome` so that the driver can retry the frame elsewhere.
On a node with GPUs it opens the WebGPU adapter, or the CUDA device, of the GPU that Ray
assigned to it.
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oidn_gpu.backends import BACKEND_ENV_VAR, resolve_backend
from oidn_gpu.errors import InvalidArgumentError, require
from oidn_gpu.sequence import (
    FrameJob,
    FrameNote,
    InputOptions,
    OutputOptions,
    _DenoiserPool,
    _message,
    denoise_frame,
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


def select_gpu_adapter(adapters: Sequence[Any], gpu_id: int) -> Any:
    """The WebGPU adapter for the GPU that Ray assigned to this worker.

    Vulkan sees every GPU of the node whatever ``CUDA_VISIBLE_DEVICES`` says, so the
    worker picks the ``gpu_id``-th hardware adapter itself: discrete adapters if there are
    any (an integrated GPU is not one of Ray's GPUs), in the order the graphics driver
    lists them. Distinct ids
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


def cuda_device_for_gpu(gpu_id: int, environ: Mapping[str, str]) -> str:
    """The torch device name of Ray's GPU ``gpu_id`` in this process.

    Ray sets ``CUDA_VISIBLE_DEVICES`` to the GPUs it assigned to a worker, so CUDA numbers
    them from 0 in that list's order; where the variable is unset (Ray told not to set
    it), every GPU is visible and Ray's id is CUDA's index.

    Raises:
        InvalidArgumentError: ``CUDA_VISIBLE_DEVICES`` hides the GPU Ray assigned.
    """
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return f"cuda:{gpu_id}"
    ids = [v.strip() for v in visible.split(",") if v.strip()]
    if str(gpu_id) not in ids:
        raise InvalidArgumentError(
            f"Ray assigned GPU {gpu_id} to this worker but CUDA_VISIBLE_DEVICES is "
            f"'{visible}' on {socket.gethostname()}; expected a list that holds {gpu_id}"
        )
    return f"cuda:{ids.index(str(gpu_id))}"


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
        output: what OpenEXR outputs hold besides the beauty.
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
        output: OutputOptions | None = None,
        blas_threads: int = 1,
    ) -> None:
        threadpoolctl = require("threadpoolctl", RAY_EXTRA)
        require("OpenImageIO", "images")  # fail at start, not on every frame
        self._blas_limits = threadpoolctl.threadpool_limits(limits=blas_threads)
        self._options = options
        self._lightmap = lightmap
        self._software = software
        self._output = output
        kwargs = dict(denoiser_kwargs)
        self._where = f"{socket.gethostname()} pid {os.getpid()}"
        gpu_ids = _assigned_gpu_ids()
        if gpu_ids:
            self._where += f" GPU {gpu_ids[0]}"
            # CUDA sees only this worker's GPU (Ray sets CUDA_VISIBLE_DEVICES); WebGPU sees
            # them all, so the wgpu backend gets a device on this worker's adapter
            backend = resolve_backend(str(kwargs.get("backend", "auto")))
            if backend == "wgpu" and "device" not in kwargs:
                kwargs["device"] = _open_wgpu_device_for_gpu(gpu_ids[0])
                kwargs["backend"] = backend
            elif backend == "cuda" and "device" not in kwargs:
                kwargs["device"] = cuda_device_for_gpu(gpu_ids[0], os.environ)
                visible = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
                self._where += f" ({kwargs['device']}, CUDA_VISIBLE_DEVICES={visible})"
        else:
            self._where += f" {blas_threads} CPU" + ("s" if blas_threads != 1 else "")
        self._pool = _DenoiserPool(kwargs, lightmap)

    def ready(self) -> str:
        """Where this worker runs (host, process, GPU or CPUs); answers once it started."""
        return self._where

    def denoise(self, job: FrameJob, skip_existing: bool = False) -> FrameOutcome:
        """Denoise one frame and write its outputs atomically; errors are returned."""
        start = time.perf_counter()
        warned: list[str] = []
        try:
            if skip_existing and output_is_complete(job):
                return FrameOutcome("skipped", time.perf_counter() - start)
            done = denoise_frame(
                job,
                self._pool,
                self._options,
                lightmap=self._lightmap,
                progress=None,
                software=self._software,
                warn=warned.append,
                output=self._output,
            )
        except Exception as err:
            return FrameOutcome(
                "failed",
                time.perf_counter() - start,
                warnings=tuple(warned),
                error=_message(err),
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
        )

    def close(self) -> None:
        """Release the Denoisers (and their GPU resources) and the BLAS thread limit."""
        self._pool.close()
        self._blas_limits.restore_original_limits()


def _assigned_gpu_ids() -> list[int]:
    """The GPUs Ray assigned to this worker; none when the class is used outside Ray."""
    ray = import_ray()
    return [int(i) for i in ray.get_gpu_ids()] if ray.is_initialized() else []


def requested_backend(kwargs: Mapping[str, Any]) -> str:
    """The backend in Denoiser options, with ``OIDN_GPU_BACKEND`` for ``auto``."""
    backend = str(kwargs.get("backend", "auto"))
    if backend == "auto":
        return os.environ.get(BACKEND_ENV_VAR) or "auto"
    return backend
