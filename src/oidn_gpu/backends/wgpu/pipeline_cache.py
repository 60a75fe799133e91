"""The per-device compute pipeline cache, shared by every executor on that device.

Pipelines are keyed by ``Kernel.key`` (deterministic for a spec) and by whether
the module was built trusted, i.e. without wgpu's runtime bounds checks and loop
bounding (``wgpuDeviceCreateShaderModuleTrusted``). A kernel is built trusted
when its generator marks it ``trusted`` and checks are not forced on, either by
the executor's ``shader_checks=True`` or by ``OIDN_GPU_SHADER_CHECKS=1``.

Compiling is what a fresh process's first image waits for on a GPU driver that
compiles at pipeline creation (NVIDIA's Vulkan driver), so kernels compile on a
pool of threads: `PipelineCache.prepare` submits kernels and returns their futures
at once (``wait=False``) or when all are compiled, and `PipelineCache.get` waits
only for the pipeline it asks for, whether pending (submitted, still compiling) or
not yet submitted (compiled on the calling thread). wgpu-py's calls into
wgpu-native release Python's GIL, and wgpu-native creates shader modules and
pipelines of one device from several threads at once (docs/benchmarks.md, "a fresh
process's first image"). ``OIDN_GPU_COMPILE_THREADS``
sets the pool's size (default: the CPU count, at most `MAX_COMPILE_THREADS`).

wgpu-native 29 (wgpu-py 0.32) neither implements ``createComputePipelineAsync``
(wgpu-py calls the blocking ``wgpuDeviceCreateComputePipeline`` in its place) nor
exports a pipeline cache: its header names the ``PipelineCache`` feature but no
function creates one, fills one or reads its data, so pipelines persist across
processes only in the driver's own cache (NVIDIA's ``~/.nv/GLCache`` or
``$XDG_CACHE_HOME/nvidia``, Mesa's ``$XDG_CACHE_HOME/mesa_shader_cache``).

A compile error becomes a `ShaderCompileError` carrying the kernel name, its key
and the compiler's annotated message. Each compile is logged at DEBUG level on the
``oidn_gpu.wgpu`` logger (``phase`` ``"compile"``, ``elapsed_ms``).

``OIDN_GPU_DUMP_SHADERS=dir`` writes every compiled kernel's WGSL to ``dir``.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from oidn_gpu.backends.gpu_device import GpuDevice
from oidn_gpu.backends.wgpu.device import shader_checks_forced
from oidn_gpu.errors import InvalidArgumentError, ShaderCompileError, UnsupportedDeviceError
from oidn_gpu.kernels.spec import Kernel

DUMP_SHADERS_ENV = "OIDN_GPU_DUMP_SHADERS"
COMPILE_THREADS_ENV = "OIDN_GPU_COMPILE_THREADS"
# A first image compiles about 20 kernels; more threads than that find nothing to do.
MAX_COMPILE_THREADS = 16
_LOG = logging.getLogger("oidn_gpu.wgpu")


def compile_threads() -> int:
    """The compile pool's size: ``OIDN_GPU_COMPILE_THREADS``, else the CPU count (at most
    `MAX_COMPILE_THREADS`).

    Raises:
        InvalidArgumentError: the variable is not a positive integer.
    """
    text = os.environ.get(COMPILE_THREADS_ENV, "").strip()
    if not text:
        return max(1, min(MAX_COMPILE_THREADS, os.cpu_count() or 1))
    try:
        threads = int(text)
    except ValueError:
        threads = 0
    if threads < 1:
        raise InvalidArgumentError(
            f"{COMPILE_THREADS_ENV}={text!r} is not a thread count; expected a positive integer"
        )
    return threads


class KernelCompileError(ShaderCompileError):
    """A `ShaderCompileError` with structured fields."""

    def __init__(self, kernel: Kernel, compiler_message: str) -> None:
        self.kernel_name = kernel.name
        self.key = kernel.key
        self.compiler_message = compiler_message
        first_line = kernel.source.splitlines()[0] if kernel.source else ""
        super().__init__(
            f"kernel '{kernel.name}' failed to compile (key {kernel.key}; {first_line}):\n"
            f"{compiler_message}"
        )


def _use_trusted(kernel: Kernel, shader_checks: bool | None) -> bool:
    if not kernel.trusted:
        return False
    if shader_checks is None:
        shader_checks = shader_checks_forced()
    return not shader_checks


class PipelineCache:
    """Compiled compute pipelines of one device, by kernel key and trust."""

    def __init__(self, device: GpuDevice) -> None:
        self._device = device
        self._lock = threading.Lock()
        self._ready: dict[tuple[str, bool], Any] = {}
        self._pending: dict[tuple[str, bool], Future[Any]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self.compiled_count = 0

    # -- public ----------------------------------------------------------------------

    def get(self, kernel: Kernel, *, shader_checks: bool | None = None) -> Any:
        """The pipeline of ``kernel``, compiling it now if needed.

        Raises:
            ShaderCompileError: the WGSL does not compile (`KernelCompileError`).
            UnsupportedDeviceError: the kernel needs a feature the device lacks.
        """
        key = (kernel.key, _use_trusted(kernel, shader_checks))
        with self._lock:
            pipeline = self._ready.get(key)
            pending = self._pending.get(key)
        if pipeline is not None:
            return pipeline
        if pending is not None:
            return pending.result()
        return self._compile_and_store(kernel, key)

    def prepare(
        self, kernels: Iterable[Kernel], *, shader_checks: bool | None = None, wait: bool = True
    ) -> list[Future[Any]]:
        """Compile ``kernels`` concurrently; return their futures (already done if ``wait``).

        Raises (when ``wait``):
            ShaderCompileError: the first kernel that failed to compile.
        """
        futures: list[Future[Any]] = []
        seen: set[tuple[str, bool]] = set()
        for kernel in kernels:
            key = (kernel.key, _use_trusted(kernel, shader_checks))
            if key in seen:
                continue
            seen.add(key)
            futures.append(self._submit(kernel, key))
        if wait:
            for future in futures:
                future.result()
        return futures

    def is_ready(self, kernel: Kernel, *, shader_checks: bool | None = None) -> bool:
        with self._lock:
            return (kernel.key, _use_trusted(kernel, shader_checks)) in self._ready

    def __len__(self) -> int:
        with self._lock:
            return len(self._ready)

    def clear(self) -> None:
        """Forget every pipeline (they are released when no executor holds them)."""
        with self._lock:
            self._ready.clear()

    def shutdown(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    # -- internals -------------------------------------------------------------------

    def _submit(self, kernel: Kernel, key: tuple[str, bool]) -> Future[Any]:
        with self._lock:
            if key in self._ready:
                done: Future[Any] = Future()
                done.set_result(self._ready[key])
                return done
            pending = self._pending.get(key)
            if pending is not None:
                return pending
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    compile_threads(), thread_name_prefix="oidn-gpu-compile"
                )
            future = self._pool.submit(self._compile, kernel, key[1])
            self._pending[key] = future
        future.add_done_callback(lambda f, key=key: self._settle(key, f))
        return future

    def _settle(self, key: tuple[str, bool], future: Future[Any]) -> None:
        with self._lock:
            self._pending.pop(key, None)
            if future.exception() is None:
                self._ready[key] = future.result()

    def _compile_and_store(self, kernel: Kernel, key: tuple[str, bool]) -> Any:
        pipeline = self._compile(kernel, key[1])
        with self._lock:
            self._ready.setdefault(key, pipeline)
            return self._ready[key]

    def _compile(self, kernel: Kernel, trusted: bool) -> Any:
        caps = self._device.capabilities
        if not caps.supports_kernel_features(kernel.features):
            raise UnsupportedDeviceError(
                f"kernel '{kernel.name}' needs features {list(kernel.features)} but the device "
                f"has {sorted(caps.features)}"
            )
        _dump(kernel)
        label = f"oidn/{kernel.key}"
        start = time.perf_counter()
        try:
            module = self._device.create_shader_module(label, kernel.source, trusted=trusted)
            pipeline = self._device.create_compute_pipeline(label, module, kernel.entry_point)
        except ShaderCompileError:
            raise
        except Exception as err:  # wgpu's GPUValidationError / GPUError carry the message
            if type(err).__name__.startswith("GPU") or isinstance(err, RuntimeError):
                raise KernelCompileError(kernel, str(err)) from None
            raise
        elapsed_ms = (time.perf_counter() - start) * 1e3
        with self._lock:
            self.compiled_count += 1
        _LOG.debug(
            "compiled %s in %.1f ms",
            kernel.name,
            elapsed_ms,
            extra={"phase": "compile", "elapsed_ms": elapsed_ms},
        )
        return pipeline


def _dump(kernel: Kernel) -> None:
    folder = os.environ.get(DUMP_SHADERS_ENV)
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", kernel.key)[:180]
    with open(os.path.join(folder, f"{safe}.wgsl"), "w", encoding="utf-8") as f:
        f.write(kernel.source)


# The cache lives on the device's handle (the wgpu device object itself). Its pipelines and
# its `GpuDevice` refer back to that device, so a module-level weak-key mapping would never
# let a device go; as an attribute, device and cache form a cycle that the garbage collector
# frees together.
_CACHE_ATTRIBUTE = "_oidn_gpu_pipeline_cache"
_caches_lock = threading.Lock()


def pipeline_cache(device: GpuDevice) -> PipelineCache:
    """The pipeline cache shared by every executor of ``device``'s underlying device."""
    with _caches_lock:
        cache = getattr(device.handle, _CACHE_ATTRIBUTE, None)
        if cache is None:
            cache = PipelineCache(device)
            setattr(device.handle, _CACHE_ATTRIBUTE, cache)
        return cache
