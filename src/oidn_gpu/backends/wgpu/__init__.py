"""WebGPU backend (wgpu-py over wgpu-native): device, pipeline cache, executor, denoise pipeline.

Its modules need wgpu (a missing one raises `MissingDependencyError` naming the
``wgpu`` extra), except `backend`, the registry entry, which imports wgpu only
to probe or run. Nothing outside ``backends/wgpu`` imports wgpu.

Public names (imported lazily, so ``import oidn_gpu.backends.wgpu.device`` stays cheap):

- `open_device`, `GpuDevice`, `Capabilities` (device.py)
- `pipeline_cache`, `PipelineCache` (pipelines.py)
- `WgpuExecutor`, `ExecutionProfile`, `LayerTiming` (executor.py)
- `GpuDenoiser`, `GpuImage`, `TileRect` (pipeline.py)
- `run_bench`, `BenchResult` (bench.py)
"""

from __future__ import annotations

from typing import Any

from oidn_gpu.errors import require

_EXPORTS = {
    "open_device": "device",
    "GpuDevice": "device",
    "Capabilities": "device",
    "AdapterInfo": "device",
    "pipeline_cache": "pipelines",
    "PipelineCache": "pipelines",
    "WgpuExecutor": "executor",
    "ExecutionProfile": "executor",
    "LayerTiming": "executor",
    "WgpuExecutorInfo": "executor",
    "WgpuResources": "executor",
    "GpuDenoiser": "pipeline",
    "GpuImage": "pipeline",
    "TileRect": "pipeline",
    "run_bench": "bench",
    "BenchResult": "bench",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'oidn_gpu.backends.wgpu' has no attribute {name!r}")
    import importlib

    require("wgpu", "wgpu")

    return getattr(importlib.import_module(f"oidn_gpu.backends.wgpu.{module}"), name)
