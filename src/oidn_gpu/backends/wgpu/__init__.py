"""WebGPU backend (wgpu-py over wgpu-native): device, pipeline cache, executor, denoise pipeline.

`device.py` imports wgpu (and raises `MissingDependencyError` naming the ``wgpu``
extra without it); so do the modules that open devices (`executor`, `pipeline`,
`bench`). `kernel_choice` needs only the kernels, and `backend` (the registry
entry) imports wgpu only to probe or run. Nothing outside ``backends/wgpu``
imports wgpu.

Public names (imported lazily, so ``import oidn_gpu.backends.wgpu.device`` stays cheap):

- `open_device`, `WgpuDevice`, `GpuDevice`, `Capabilities` (device.py)
- `pipeline_cache`, `PipelineCache` (pipeline_cache.py)
- `WgpuExecutor` (executor.py), `ExecutionProfile`, `LayerTiming` (profiling.py)
- `GpuDenoiser` (runner.py), `GpuImage`, `TileRect` (frames.py)
- `run_bench`, `BenchResult` (bench.py)
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "open_device": "device",
    "GpuDevice": "device",
    "WgpuDevice": "device",
    "Capabilities": "device",
    "AdapterInfo": "device",
    "pipeline_cache": "pipelines",
    "PipelineCache": "pipelines",
    "WgpuExecutor": "executor",
    "ExecutionProfile": "profiling",
    "LayerTiming": "profiling",
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

    return getattr(importlib.import_module(f"oidn_gpu.backends.wgpu.{module}"), name)
