"""An alpha's coverage fit on the wgpu runner's device (`GpuDenoiser.fit_coverage_host`).

`CoverageFit` runs `image.coverage.fit_coverage` of host arrays as the two kernels of
`kernels.coverage`: the alpha and the guide are uploaded as they are (strided views kept,
a float16 guide widened on the GPU), both passes and the copy of the result into a
readback buffer go in one submission, and the ``H x W`` float32 result is read back. The
whole image is fitted; where the alpha is constant the fit returns it up to float32
rounding. `CoverageFit.fit_images` fits images already on the device (an RGBA upload's
alpha plane, the frame's albedo) without a readback, and `CoverageFit.clip` clips one
plane into another: `GpuDenoiser.run_with_alpha`'s alpha. Its kernels are compiled on
first use (once per guide dtype) and its buffers are the runner's staging buffers, kept
between calls of one size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from oidn_gpu.backends.gpu_device import BufferUsage
from oidn_gpu.backends.wgpu.frames import F32_BYTES, GpuImage
from oidn_gpu.backends.wgpu.staging import StagingBuffers
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.coverage import COVERAGE_RADIUS
from oidn_gpu.kernels import coverage as gpu_coverage
from oidn_gpu.kernels.coverage import CLIP_PARAMS
from oidn_gpu.kernels.spec import Kernel

AB_BYTES = 4 * F32_BYTES  # a window's fit (a0, a1, a2, b)
# Clip bind groups kept: a frame clips at most twice (an alpha without albedo, then the
# result), so a few cover one size's frames.
CLIP_GROUPS_KEPT = 4
PARAMS_USAGE = BufferUsage.UNIFORM | BufferUsage.COPY_DST
READBACK_USAGE = BufferUsage.MAP_READ | BufferUsage.COPY_DST


class CoverageFit:
    """The coverage fit's kernels and bind groups of one runner.

    Args:
        device: the runner's `GpuDevice`.
        executor: its executor (for the device's pipeline cache).
        staging: the runner's buffers (the fit's buffers are some of them).
    """

    def __init__(self, device: Any, executor: Any, staging: StagingBuffers) -> None:
        self._device = device
        self.executor = executor
        self._staging = staging
        self._pipelines: dict[str, tuple[Kernel, Any, Kernel, Any]] = {}
        # The buffers the last bind groups hold, and those groups (fit, apply).
        self._groups: tuple[tuple[Any, ...], Any, Any] | None = None
        self._clip_pipeline: tuple[Kernel, Any] | None = None
        self._clip_groups: dict[tuple[Any, ...], Any] = {}

    def kernels(self, dtype: str) -> tuple[Kernel, Any, Kernel, Any]:
        """The fit and apply kernels for a guide of ``dtype``, compiled once."""
        entry = self._pipelines.get(dtype)
        if entry is None:
            cache = self.executor.pipeline_cache
            fit, apply = gpu_coverage.generate_fit(dtype), gpu_coverage.generate_apply(dtype)
            cache.prepare([fit, apply])
            entry = self._pipelines[dtype] = (fit, cache.get(fit), apply, cache.get(apply))
        return entry

    def fit_coverage(self, alpha: np.ndarray, guide: np.ndarray) -> np.ndarray:
        """`image.coverage.fit_coverage` on the GPU: ``alpha`` ``H x W`` (or ``H x W x 1``),
        ``guide`` ``H x W x C`` (or ``H x W``; its first three channels, a guide of fewer
        read as its first channel three times), float16 or float32; returns the fitted
        alpha, float32 ``H x W``."""
        alpha, guide = _host_images(alpha, guide)
        height, width = alpha.shape[:2]
        if height == 0 or width == 0:
            return np.zeros((height, width), np.float32)
        uploads: list[Any] = []
        alpha_image = self._staging.upload("coverage-alpha", alpha, uploads)
        guide_image = self._staging.upload("coverage-guide", guide, uploads)
        encoder = self._device.create_command_encoder("oidn/coverage")
        fitted = self._encode_fit(encoder, alpha_image, guide_image, clip=False)
        out_bytes = height * width * F32_BYTES
        readback = self._staging.get("coverage-readback", out_bytes, READBACK_USAGE)
        encoder.copy_buffer(fitted.buffer, 0, readback, 0, out_bytes)
        self._device.submit([encoder.finish()])
        result = np.empty((height, width), np.float32)
        self._device.read_mapped(readback, result)
        # The GPU is done with the uploads: request their mapping for the next call now.
        for buffer in uploads:
            self._device.map_for_write(buffer, wait=False)
        return result

    def fit_images(self, alpha: GpuImage, guide: GpuImage, *, clip: bool = False) -> GpuImage:
        """The fit of an alpha plane (one float32 channel, any strides: an RGBA image's
        alpha) to a guide already on the device, queued (not waited for): the fitted
        alpha, a dense ``H x W x 1`` float32 image of the staging buffers (overwritten by
        the next fit). ``clip``: the alpha read clipped to 0..1 and the fit clipped to
        0..1, as ``alpha="denoise"`` fits it."""
        encoder = self._device.create_command_encoder("oidn/coverage")
        fitted = self._encode_fit(encoder, alpha, guide, clip=clip)
        self._device.submit([encoder.finish()])
        return fitted

    def clip(self, source: GpuImage, destination: GpuImage) -> None:
        """Queue ``source`` (one float32 channel, any strides) clipped to 0..1 into
        ``destination`` (one float32 channel, any strides; another buffer)."""
        kernel, pipeline = self._clip_kernel()
        params = self._staging.get("alpha-clip-params", CLIP_PARAMS.size, PARAMS_USAGE)
        self._device.write_buffer(
            params,
            0,
            kernel.pack_params(
                **_plane("src", source).params("src"),
                **_plane("dst", destination).params("dst"),
                height=source.height,
                width=source.width,
            ),
        )
        key = (source.buffer, destination.buffer, params, pipeline)
        group = self._clip_groups.get(key)
        if group is None:
            group = self._device.create_bind_group(
                "oidn/alpha-clip", pipeline, [source.buffer, destination.buffer, params]
            )
            if len(self._clip_groups) >= CLIP_GROUPS_KEPT:  # buffers of an earlier size
                self._clip_groups.clear()
            self._clip_groups[key] = group
        encoder = self._device.create_command_encoder("oidn/alpha-clip")
        encoder.dispatch(
            pipeline, group, kernel.grid(0, source.height, source.width), label="oidn/alpha-clip"
        )
        self._device.submit([encoder.finish()])

    def _clip_kernel(self) -> tuple[Kernel, Any]:
        if self._clip_pipeline is None:
            kernel = gpu_coverage.generate_clip()
            cache = self.executor.pipeline_cache
            cache.prepare([kernel])
            self._clip_pipeline = (kernel, cache.get(kernel))
        return self._clip_pipeline

    def _encode_fit(
        self, encoder: Any, alpha_image: GpuImage, guide_image: GpuImage, *, clip: bool
    ) -> GpuImage:
        """Encode both passes of the fit of ``alpha_image`` to ``guide_image`` (the params
        written first); returns the fitted alpha (dense, in the staging buffers)."""
        height, width = alpha_image.height, alpha_image.width
        fit, fit_pipeline, apply, apply_pipeline = self.kernels(guide_image.dtype)
        ext_h, ext_w = height + 2 * COVERAGE_RADIUS, width + 2 * COVERAGE_RADIUS
        ab = self._staging.get("coverage-ab", ext_h * ext_w * AB_BYTES)
        fitted = self._staging.get("coverage-fitted", height * width * F32_BYTES)
        params = self._staging.get(
            "coverage-params", gpu_coverage.COVERAGE_PARAMS.size, PARAMS_USAGE
        )
        layouts = {**alpha_image.params("alpha"), **guide_image.params("guide")}
        self._device.write_buffer(
            params,
            0,
            fit.pack_params(**layouts, height=height, width=width, clip=int(clip)),
        )
        fit_group, apply_group = self._bind_groups(
            (alpha_image.buffer, guide_image.buffer, ab, fitted, params),
            fit_pipeline,
            apply_pipeline,
        )
        encoder.dispatch(
            fit_pipeline, fit_group, fit.grid(0, ext_h, ext_w), label="oidn/coverage/fit"
        )
        encoder.dispatch(
            apply_pipeline, apply_group, apply.grid(0, height, width), label="oidn/coverage/apply"
        )
        return GpuImage(fitted, height, width, 1)

    def _bind_groups(
        self, buffers: tuple[Any, ...], fit_pipeline: Any, apply_pipeline: Any
    ) -> tuple[Any, Any]:
        """The bind groups of both passes over ``buffers`` (alpha, guide, fits, fitted
        alpha, params), made again only when a buffer or a pipeline changed."""
        key = (*buffers, fit_pipeline, apply_pipeline)
        cached = self._groups
        if cached is None or any(a is not b for a, b in zip(cached[0], key, strict=True)):
            alpha, guide, ab, fitted, params = buffers
            fit_group = self._device.create_bind_group(
                "oidn/coverage/fit", fit_pipeline, [alpha, guide, ab, params]
            )
            apply_group = self._device.create_bind_group(
                "oidn/coverage/apply", apply_pipeline, [ab, guide, fitted, params]
            )
            cached = self._groups = (key, fit_group, apply_group)
        return cached[1], cached[2]

    def clear(self) -> None:
        """Forget the kernels and bind groups (the runner releases the buffers)."""
        self._pipelines.clear()
        self._groups = None
        self._clip_pipeline = None
        self._clip_groups = {}


def _plane(what: str, image: GpuImage) -> GpuImage:
    """``image``, checked to be one float32 channel (`CoverageFit.clip`'s planes)."""
    if image.channels != 1 or image.dtype != "float32":
        raise InvalidArgumentError(
            f"the {what} plane to clip has {image.channels} {image.dtype} channels; "
            "expected one float32 channel"
        )
    return image


def _host_images(alpha: Any, guide: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha, guide)`` as the kernels read them: the alpha float32 ``H x W x 1``, the
    guide float16 or float32 ``H x W x 3`` (its first three channels) or ``H x W x 1``
    (its first channel, for a guide of one or two); views where the arrays allow."""
    alpha = np.asarray(alpha, dtype=np.float32)
    if alpha.ndim == 3 and alpha.shape[2] == 1:
        alpha = alpha[:, :, 0]
    if alpha.ndim != 2:
        raise InvalidArgumentError(
            f"the alpha to fit has shape {alpha.shape}; expected H x W or H x W x 1"
        )
    guide = np.asarray(guide)
    if guide.ndim == 2:
        guide = guide[:, :, None]
    if guide.ndim != 3 or guide.shape[:2] != alpha.shape or guide.shape[2] == 0:
        raise InvalidArgumentError(
            f"the coverage guide has shape {guide.shape}; expected {alpha.shape} x C"
        )
    if guide.dtype not in (np.float16, np.float32):
        guide = guide.astype(np.float32)
    guide = guide[:, :, :3] if guide.shape[2] >= 3 else guide[:, :, :1]
    return alpha[:, :, None], guide
