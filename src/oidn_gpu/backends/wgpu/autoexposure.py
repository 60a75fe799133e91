"""OIDN's autoexposure on the GPU for the wgpu runner: into the frame uniform, no readback.

`AutoexposurePass` encodes the two autoexposure kernels (`kernels.autoexposure`:
per-bin averages of the colour image, then the log-average scale written into the
frame uniform) before a frame's first tile. Its kernels are compiled once per
colour dtype, its bind groups (and their uniforms) kept per (image, frame uniform)
in an LRU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oidn_gpu.backends.gpu_device import BufferUsage
from oidn_gpu.backends.lru import LruCache
from oidn_gpu.backends.wgpu.frames import F32_BYTES, GpuImage
from oidn_gpu.backends.wgpu.resources import BUFFER, ResourceTracker
from oidn_gpu.backends.wgpu.staging import StagingBuffers
from oidn_gpu.kernels import autoexposure as gpu_autoexposure
from oidn_gpu.kernels.spec import Kernel

BINDINGS_KEPT = 4  # (image, frame) combinations whose bind groups are kept


class AutoexposurePass:
    """The autoexposure kernels and bind groups of one runner.

    Args:
        device: the runner's `GpuDevice`.
        executor: its executor (for the device's pipeline cache).
        resources: the runner's tracker (every uniform made here is tracked there).
        staging: the runner's buffers (the bins buffer is one of them).
        retire: releases buffers once the queue finished the work submitted so far.
    """

    def __init__(
        self,
        device: Any,
        executor: Any,
        resources: ResourceTracker,
        staging: StagingBuffers,
        retire: Callable[[list[Any]], None],
    ) -> None:
        self._device = device
        self.executor = executor
        self._resources = resources
        self._staging = staging
        self._retire = retire
        self._generated: dict[str, tuple[Kernel, Kernel]] = {}
        self._pipelines: dict[str, tuple[Kernel, Any, Kernel, Any]] = {}
        # (image, frame, dtype) -> (bins group, scale group, uniforms, bins buffer)
        self._bindings: LruCache[tuple[Any, ...], tuple[Any, Any, list[Any], Any]] = LruCache(
            BINDINGS_KEPT, lambda entry: self._retire(entry[2])
        )

    def _generate(self, dtype: str) -> tuple[Kernel, Kernel]:
        """The bins and scale kernels for a colour image of ``dtype`` (generated once)."""
        kernels = self._generated.get(dtype)
        if kernels is None:
            bins = gpu_autoexposure.generate_bins(gpu_autoexposure.AutoexposureSpec(dtype))
            kernels = self._generated[dtype] = (bins, gpu_autoexposure.generate_scale())
        return kernels

    def compile_ahead(self, dtype: str) -> None:
        """Start compiling the kernels of ``dtype`` on the compile threads (`kernels` then
        waits for them)."""
        if dtype not in self._pipelines:
            self.executor.pipeline_cache.prepare(self._generate(dtype), wait=False)

    def kernels(self, dtype: str) -> tuple[Kernel, Any, Kernel, Any]:
        """The bins and scale kernels for a colour image of ``dtype``, compiled once."""
        entry = self._pipelines.get(dtype)
        if entry is None:
            cache = self.executor.pipeline_cache
            bins, scale = self._generate(dtype)
            entry = (bins, cache.get(bins), scale, cache.get(scale))
            self._pipelines[dtype] = entry
        return entry

    def encode(self, encoder: Any, color: GpuImage, frame: Any, dtype: str = "float32") -> None:
        """Encode the autoexposure of ``color`` into ``frame`` (before the first tile's passes)."""
        bins_kernel, bins_pipeline, scale_kernel, scale_pipeline = self.kernels(dtype)
        bins_h, bins_w = gpu_autoexposure.bin_grid(color.height, color.width)
        key = (color, id(frame), dtype)
        cached = self._bindings.get(key)
        if cached is None:
            bins = self._staging.get("autoexposure-bins", bins_h * bins_w * F32_BYTES)
            # Bind groups of another bin count hold the bins buffer just replaced.
            for old in [k for k, v in self._bindings.items() if v[3] is not bins]:
                self._retire(self._bindings.pop(old)[2])
            bins_params = bins_kernel.pack_params(
                **color.params("color"),
                height=color.height,
                width=color.width,
                bins_h=bins_h,
                bins_w=bins_w,
            )
            scale_params = scale_kernel.pack_params(bins_h=bins_h, bins_w=bins_w)
            uniforms = [
                self._resources.track(
                    BUFFER,
                    self._device.create_buffer_with_data(
                        f"oidn/autoexposure/{name}/params", data, BufferUsage.UNIFORM
                    ),
                )
                for name, data in (("bins", bins_params), ("scale", scale_params))
            ]
            bins_group = self._device.create_bind_group(
                "oidn/autoexposure/bins", bins_pipeline, [color.buffer, bins, uniforms[0]]
            )
            scale_group = self._device.create_bind_group(
                "oidn/autoexposure/scale", scale_pipeline, [bins, frame, uniforms[1]]
            )
            cached = (bins_group, scale_group, uniforms, bins)
            self._bindings.put(key, cached)
        encoder.dispatch(
            bins_pipeline,
            cached[0],
            bins_kernel.grid(0, bins_h, bins_w),
            label="oidn/autoexposure/bins",
        )
        encoder.dispatch(
            scale_pipeline, cached[1], scale_kernel.grid(0, 1, 1), label="oidn/autoexposure/scale"
        )

    def clear(self) -> None:
        """Forget the kernels and bind groups (the tracker releases the uniforms)."""
        self._generated.clear()
        self._pipelines.clear()
        self._bindings.clear()
