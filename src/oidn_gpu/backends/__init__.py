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
PRECISIONS = ("auto", "fp16", "fp32")
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


def check_backend_options(
    backend: str,
    *,
    precision: Any,
    kernel: Any,
    gemm: Any,
    device: Any = None,
    requested: str | None = None,
) -> None:
    """Validate the backend-specific options against the concrete ``backend``.

    ``precision`` must be ``"auto"``, ``"fp16"`` or ``"fp32"``. The reference backend
    computes in fp32 with NumPy convolutions, so it refuses ``precision="fp16"``, a
    forced ``kernel`` and ``gemm`` options (also when ``backend="auto"`` picked it: a
    forced GPU kernel that cannot run is an error, not a silent no-op), and a ``device``.
    On wgpu the kernel name, the GEMM options and the type of ``device`` are checked
    here, before any device work.
    ``requested`` is the backend name the caller gave (for the message).

    Raises:
        InvalidArgumentError: an unknown value, or an option the backend does not take.
    """
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise InvalidArgumentError(
            f"unknown precision {precision!r}; expected 'auto', 'fp16' or 'fp32'"
        )
    if backend == "reference":
        chosen = " (chosen by backend='auto')" if requested == "auto" else ""
        if precision == "fp16":
            raise InvalidArgumentError(
                f"the reference backend{chosen} computes in fp32 only; got precision 'fp16'"
            )
        if kernel != "auto" or gemm is not None or device is not None:
            given = (
                f"kernel={kernel!r}"
                if kernel != "auto"
                else f"gemm={gemm!r}"
                if gemm is not None
                else f"device={type(device).__name__}"
            )
            raise InvalidArgumentError(
                f"{given} is an option of the wgpu backend; the reference backend{chosen} runs "
                "NumPy convolutions (leave kernel='auto', gemm=None and device=None, or use "
                "backend='wgpu')"
            )
        return
    if device is not None and not (
        hasattr(device, "create_compute_pipeline") and hasattr(device, "queue")
    ):
        raise InvalidArgumentError(f"device must be a wgpu.GPUDevice, got {type(device).__name__}")
    # The wgpu package imports wgpu (an optional dependency) on import.
    from oidn_gpu.backends.wgpu import kernel_choice

    kernel_choice.validate_kernel(kernel)
    kernel_choice.validate_gemm(gemm)


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
