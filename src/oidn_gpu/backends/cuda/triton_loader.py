"""Triton, imported on first use: the kernel modules (`triton_kernels` with its helpers,
`io_kernels`, `fused_kernels`, `row_kernels`), whether Triton imports, and whether its
CPU interpreter runs them (``TRITON_INTERPRET=1``, tests without a GPU)."""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from typing import Any

from oidn_gpu.backends.cuda import driver_launch
from oidn_gpu.backends.phases import timed_phase

_LOG = logging.getLogger(__name__)

INTERPRET_ENV_VAR = "TRITON_INTERPRET"


_KERNELS: Any = None
_MORE_KERNELS: dict[str, Any] = {}  # the modules that build on `triton_kernels`' helpers
_KERNELS_LOCK = threading.Lock()


def kernels() -> Any:
    """The `triton_kernels` module, imported on first use (importing Triton takes a few
    tenths of a second, kept off a first frame served by the cuDNN bridge), with the
    fused network tail's and the row conv's kernels (`fused_kernels`, `row_kernels`)."""
    global _KERNELS
    with _KERNELS_LOCK:
        if _KERNELS is None:
            with timed_phase(_LOG, "import Triton and the kernel modules"):
                import oidn_gpu.backends.cuda.fused_kernels as fused_kernels
                import oidn_gpu.backends.cuda.io_kernels as io_kernels
                import oidn_gpu.backends.cuda.row_kernels as row_kernels
                import oidn_gpu.backends.cuda.triton_kernels as triton_kernels

            _MORE_KERNELS.update(fused=fused_kernels, rows=row_kernels, io=io_kernels)
            _KERNELS = triton_kernels
        return _KERNELS


def triton_status(*, load: bool = True) -> str | None:
    """None when Triton imports, else why not (the reason the cuDNN path runs).

    With ``load=False`` only looks Triton up (no import): its import is then checked
    when the kernels are first needed.
    """
    if not load and _KERNELS is None:
        return (
            None if importlib.util.find_spec("triton") is not None else ("triton is not installed")
        )
    return kernels().UNAVAILABLE


def interpreting() -> bool:
    """Whether Triton kernels run through its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get(INTERPRET_ENV_VAR, "0") not in ("", "0")


def fused_kernels() -> Any:
    """The `fused_kernels` module (imported with `triton_kernels`, by `kernels`)."""
    kernels()
    return _MORE_KERNELS["fused"]


def io_kernels() -> Any:
    """The `io_kernels` module: the input pass and autoexposure (imported by `kernels`)."""
    kernels()
    return _MORE_KERNELS["io"]


def row_kernels() -> Any:
    """The `row_kernels` module (imported with `triton_kernels`, by `kernels`)."""
    kernels()
    return _MORE_KERNELS["rows"]


# The kernel modules a frame launches from, by the short names of `launchers`.
KERNEL_MODULES = {
    "triton": ("oidn_gpu.backends.cuda.triton_kernels", kernels),
    "io": ("oidn_gpu.backends.cuda.io_kernels", io_kernels),
    "rows": ("oidn_gpu.backends.cuda.row_kernels", row_kernels),
    "fused": ("oidn_gpu.backends.cuda.fused_kernels", fused_kernels),
}
_NAMESPACES: dict[str, Any] = {}


def launchers(module: str) -> Any:
    """The kernels of a kernel module (`KERNEL_MODULES`: ``"triton"``, ``"io"``,
    ``"rows"``, ``"fused"``) as a frame launches them, ``launchers("io").input_pass_kernel[
    grid](...)``: once compiled kernels are loaded through the CUDA driver
    (`driver_launch`), its kernels there launch without Triton (and without importing
    it); else the module itself."""
    if not driver_launch.LAUNCHES.serving():
        return KERNEL_MODULES[module][1]()
    namespace = _NAMESPACES.get(module)  # a launch's path: no lock once it is made
    if namespace is not None:
        return namespace
    with _KERNELS_LOCK:
        namespace = _NAMESPACES.get(module)
        if namespace is None:
            name, accessor = KERNEL_MODULES[module]
            namespace = driver_launch.KernelNamespace(driver_launch.LAUNCHES, name, accessor)
            _NAMESPACES[module] = namespace
        return namespace


class CompileStopped(Exception):  # noqa: N818 - a signal between threads, not an error
    """Raised inside a background compile asked to stop (`runner.CudaDenoiser`)."""
