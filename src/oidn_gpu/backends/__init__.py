"""Backends: executors that run a U-Net on packed network inputs.

``reference`` (NumPy, everywhere) lives in `backends.reference`; ``wgpu``
(WGSL on Vulkan, Metal, D3D12 and lavapipe) in `backends.wgpu`, imported only
when asked for. `resolve_backend` turns ``"auto"`` into a concrete choice:
wgpu when an adapter that is a real GPU exists, else the NumPy reference (a CPU
software adapter such as lavapipe is slower than NumPy, so ``auto`` never picks
it; ask for ``backend="wgpu"`` to use it).
"""

from __future__ import annotations

import functools
import os
from typing import Any

from oidn_gpu.errors import InvalidArgumentError

BACKENDS = ("auto", "reference", "wgpu")
# Environment override of what "auto" picks (e.g. OIDN_GPU_BACKEND=reference).
BACKEND_ENV_VAR = "OIDN_GPU_BACKEND"


@functools.lru_cache(maxsize=1)
def _gpu_adapter_available() -> bool:
    """True when wgpu is installed and finds an adapter that is not a CPU rasterizer."""
    try:
        from oidn_gpu.backends.wgpu import device as wgpu_device
    except ImportError:
        return False
    try:
        return wgpu_device.has_hardware_adapter()
    except Exception:  # any driver failure means "no usable GPU"
        return False


def resolve_backend(backend: str) -> str:
    """The concrete backend for a requested name.

    Raises:
        InvalidArgumentError: unknown backend name.
    """
    if backend not in BACKENDS:
        raise InvalidArgumentError(
            f"unknown backend '{backend}'; expected 'auto', 'reference' or 'wgpu'"
        )
    if backend != "auto":
        return backend
    forced = os.environ.get(BACKEND_ENV_VAR)
    if forced:
        if forced not in BACKENDS or forced == "auto":
            raise InvalidArgumentError(
                f"{BACKEND_ENV_VAR}='{forced}' is not a backend; expected 'reference' or 'wgpu'"
            )
        return forced
    return "wgpu" if _gpu_adapter_available() else "reference"


def create_executor(
    model: Any,
    *,
    backend: str = "auto",
    precision: str = "auto",
    kernel: str = "auto",
    gemm: Any = None,
    device: Any = None,
) -> Any:
    """An executor (see `backends.base.NetworkExecutor`) for ``model`` on ``backend``.

    Raises:
        InvalidArgumentError: unknown backend, or GPU-only options given to ``reference``.
        MissingDependencyError: the backend's optional dependency is not installed.
    """
    name = resolve_backend(backend)
    if name == "reference":
        if precision not in ("auto", "fp32"):
            raise InvalidArgumentError(
                f"the reference backend computes in fp32 only; got precision '{precision}'"
            )
        from oidn_gpu.backends.reference import ReferenceExecutor

        return ReferenceExecutor(model)
    from oidn_gpu.backends.wgpu.executor import WgpuExecutor

    return WgpuExecutor(model, precision=precision, kernel=kernel, gemm=gemm, device=device)
