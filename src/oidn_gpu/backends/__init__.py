"""Backends: executors that run a U-Net, and tile runners that denoise whole images.

Every backend is registered in `base.REGISTRY` (name -> where its `Backend`
object lives) and imported only when asked for: ``reference`` (NumPy, everywhere)
in `backends.reference`, ``wgpu`` (WGSL on Vulkan, Metal, D3D12 and lavapipe) in
`backends.wgpu`, ``cuda`` (Triton on NVIDIA GPUs) in `backends.cuda`, ``oidn`` (Intel
OIDN's own devices through pyoidn) in `backends.oidn`. `resolve_backend` turns ``"auto"``
into a concrete choice (`auto_choice`: the backend of the highest rank on this machine
whose probe allows it, and why); `plan.plan_denoise` makes the one denoise plan every
runner takes.
"""

from __future__ import annotations

from typing import Any

from oidn_gpu.backends.base import (
    AUTO,
    BACKEND_ENV_VAR,
    REGISTRY,
    AutoChoice,
    Availability,
    Backend,
    BackendOptions,
    DenoiseImages,
    NetworkExecutor,
    TileLimits,
    TileRunner,
    auto_choice,
    auto_order,
    backend_names,
    check_backend,
    get_backend,
    make_options,
    probe,
    register_backend,
    resolve_backend,
    tile_limits,
    unregister_backend,
)


def create_executor(model: Any, *, backend: str = AUTO, **options: Any) -> NetworkExecutor:
    """An executor (see `backends.base.NetworkExecutor`) for ``model`` on ``backend``.

    ``options`` are the backend's `Backend.Options` fields (wgpu: precision, kernel,
    gemm, device).

    Raises:
        InvalidArgumentError: unknown backend, or options the backend rejects.
        MissingDependencyError: the backend's optional dependency is not installed.
    """
    name = resolve_backend(backend, options)
    typed = make_options(name, requested=backend, **options)
    return get_backend(name).create_executor(model, typed)


__all__ = [
    "AUTO",
    "BACKEND_ENV_VAR",
    "REGISTRY",
    "AutoChoice",
    "Availability",
    "Backend",
    "BackendOptions",
    "DenoiseImages",
    "NetworkExecutor",
    "TileLimits",
    "TileRunner",
    "auto_choice",
    "auto_order",
    "backend_names",
    "check_backend",
    "create_executor",
    "get_backend",
    "make_options",
    "probe",
    "register_backend",
    "resolve_backend",
    "tile_limits",
    "unregister_backend",
]
