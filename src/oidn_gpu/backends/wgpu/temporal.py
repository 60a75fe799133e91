"""The temporal mode's passes as WGSL compute (the wgpu backend's `TemporalPasses`).

Each pass uploads its host arrays into buffers of the pass's own (kept while the image
size stays), runs one kernel of `oidn_gpu.kernels.temporal` and reads the result back:
the history lives on the host between frames, so each frame pays its uploads and
readbacks. WGSL may assume that no value is NaN or infinite, so the host hands the kernels
finite values only: non-finite motion becomes a motion far off screen (rejected, as the
NumPy passes reject it), and non-finite denoised pixels are passed through on the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from oidn_gpu.backends.gpu_device import STORAGE_USAGE, BufferUsage
from oidn_gpu.backends.wgpu.device import open_device
from oidn_gpu.kernels import temporal as kt
from oidn_gpu.temporal import passes as tp

# Non-finite motion is replaced by this: beyond any image's reach, so it is rejected.
FAR_MOTION = kt.FAR_MOTION


class WgpuTemporalPasses:
    """`TemporalPasses` on a wgpu device (a new device when none is given)."""

    name = "wgpu"

    def __init__(self, device: Any = None) -> None:
        self._device = open_device(device)
        self._owns_device = device is None
        self._pipelines: dict[str, Any] = {}
        self._kernels: dict[tuple[str, kt.TemporalSpec], Any] = {}
        self._buffers: dict[str, Any] = {}
        self._size: tuple[int, int] | None = None

    def _kernel(self, which: str, params: tp.TemporalParams) -> Any:
        spec = kt.TemporalSpec(params)
        kernel = self._kernels.get((which, spec))
        if kernel is None:
            generate = {
                "reproject": kt.generate_reproject,
                "changes": kt.generate_changes,
                "near_rows": kt.generate_near_rows,
                "near": kt.generate_near,
                "stabilize": kt.generate_stabilize,
            }[which]
            kernel = self._kernels[which, spec] = generate(spec)
        return kernel

    def _pipeline(self, kernel: Any) -> Any:
        pipeline = self._pipelines.get(kernel.key)
        if pipeline is None:
            module = self._device.create_shader_module(kernel.key, kernel.source, trusted=False)
            pipeline = self._device.create_compute_pipeline(kernel.key, module, kernel.entry_point)
            self._pipelines[kernel.key] = pipeline
        return pipeline

    def _buffers_for(self, height: int, width: int) -> dict[str, Any]:
        if self._size != (height, width):
            self._buffers.clear()
            pixels = height * width
            channels = {
                "motion": 2,
                "guide": tp.GUIDE_CHANNELS,
                "prev_guide": tp.GUIDE_CHANNELS,
                "signal": tp.SIGNAL_CHANNELS,
                "prev_state": tp.STATE_CHANNELS,
                "reprojection": tp.REPROJECTION_CHANNELS,
                "denoised": 3,
                "output": 3,
                "gathered": tp.REPROJECTION_CHANNELS,
                "rows": 1,
            }
            for name, count in channels.items():
                self._buffers[name] = self._device.create_buffer(
                    f"oidn/temporal/{name}", 4 * pixels * count, STORAGE_USAGE
                )
            self._buffers["params"] = self._device.create_buffer(
                "oidn/temporal/params",
                kt.TEMPORAL_PARAMS.size,
                BufferUsage.UNIFORM | BufferUsage.COPY_DST,
            )
            self._device.write_buffer(
                self._buffers["params"], 0, kt.TEMPORAL_PARAMS.pack(width=width, height=height)
            )
            self._size = (height, width)
        return self._buffers

    def _run(
        self,
        kernels: list[tuple[Any, tuple[str, ...]]],
        result: str,
        shape: tuple[int, ...],
        uploads: dict[str, np.ndarray],
    ) -> np.ndarray:
        """Upload, dispatch the kernels in order (each with its buffers), read back."""
        height, width = shape[:2]
        buffers = self._buffers_for(height, width)
        device = self._device
        with device.queue_lock:
            for name, array in uploads.items():
                device.write_buffer(buffers[name], 0, np.ascontiguousarray(array, np.float32))
            encoder = device.create_command_encoder("oidn/temporal")
            for kernel, names in kernels:
                pipeline = self._pipeline(kernel)
                group = device.create_bind_group(
                    kernel.key, pipeline, [buffers[n] for n in names] + [buffers["params"]]
                )
                encoder.dispatch(pipeline, group, kernel.grid(0, height, width), label=kernel.name)
            device.submit([encoder.finish()])
            data = device.read_buffer(buffers[result], 0, 4 * int(np.prod(shape)))
        return np.frombuffer(data, np.float32).reshape(shape).copy()

    def reproject(self, motion, guide, prev_guide, signal, prev_state, params) -> np.ndarray:
        kernel = self._kernel("reproject", params)
        height, width = motion.shape[:2]
        finite_motion = np.nan_to_num(
            np.asarray(motion, np.float32),
            nan=FAR_MOTION,
            posinf=FAR_MOTION,
            neginf=-FAR_MOTION,
        )
        uploads = {
            "motion": finite_motion,
            "guide": guide,
            "prev_guide": prev_guide,
            "signal": signal,
            "prev_state": prev_state,
        }
        shape = (height, width, tp.REPROJECTION_CHANNELS)
        if params.change_sigmas == 0:
            names = ("motion", "guide", "prev_guide", "signal", "prev_state", "reprojection")
            kernels = [(kernel, names)]
        else:
            names = ("motion", "guide", "prev_guide", "signal", "prev_state", "gathered")
            changes = (self._kernel("changes", params), ("signal", "gathered", "reprojection"))
            kernels = [(kernel, names), changes]
        if params.disocclusion_margin > 0:
            kernels += [
                (self._kernel("near_rows", params), ("reprojection", "rows")),
                (self._kernel("near", params), ("signal", "rows", "reprojection")),
            ]
        return self._run(kernels, "reprojection", shape, uploads)

    def stabilize(self, denoised, reprojection, params) -> np.ndarray:
        kernel = self._kernel("stabilize", params)
        den = np.asarray(denoised[:, :, :3], np.float32)
        finite = np.isfinite(den)
        uploads = {"denoised": np.where(finite, den, np.float32(0)), "reprojection": reprojection}
        out = self._run(
            [(kernel, ("denoised", "reprojection", "output"))], "output", den.shape, uploads
        )
        return np.where(finite, out, den)

    def close(self) -> None:
        self._buffers.clear()
        self._pipelines.clear()
        self._kernels.clear()
        self._size = None
        if self._owns_device:
            self._device.close()
            self._owns_device = False
