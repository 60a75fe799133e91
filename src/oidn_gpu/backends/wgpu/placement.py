"""The wgpu backend on one GPU of a machine with several (a render farm's worker).

Vulkan sees every GPU of the node whatever ``CUDA_VISIBLE_DEVICES`` says, so a
worker that Ray gave GPU ``i`` opens a device on the ``i``-th hardware adapter
itself (`select_gpu_adapter`, `open_device_for_gpu`). Imports wgpu: `WgpuBackend`
imports this module only when a farm places it.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

from oidn_gpu.backends.wgpu import device as wgpu_device
from oidn_gpu.errors import InvalidArgumentError


def select_gpu_adapter(adapters: Sequence[Any], gpu_id: int) -> Any:
    """The WebGPU adapter of GPU ``gpu_id`` (as Ray numbers a node's GPUs).

    Discrete adapters if there are any (an integrated GPU is not one of Ray's GPUs),
    else every hardware adapter, in the order the graphics driver lists them. Distinct
    ids give distinct adapters, so no two workers of a node share a GPU.

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


def open_device_for_gpu(gpu_id: int) -> Any:
    """A wgpu device on the adapter of GPU ``gpu_id``, with the features and limits
    `backends.wgpu.device.open_device` asks for."""
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
