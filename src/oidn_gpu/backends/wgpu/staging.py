"""The wgpu runner's reusable buffers by name, and the upload of host images into them.

`StagingBuffers` keeps one buffer per name (an input image, the output, the
readback, an upload buffer), made on first use and replaced when its size
changes (the old one is retired: released once the queue is done with it).
`StagingBuffers.upload` copies a host image into its buffer as it is (strides
kept, no conversion): through a persistent mapped upload buffer filled by parallel
copies (``"mapped"``), or through queue writes (``"queue"``, and on devices without
upload buffers such as a recording device); `UPLOAD_VARIABLE` chooses.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from oidn_gpu.backends.gpu_device import STORAGE_USAGE
from oidn_gpu.backends.wgpu.frames import GpuImage
from oidn_gpu.backends.wgpu.resources import BUFFER, ResourceTracker
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.host_copy import parallel_copyto

# How host images reach the GPU: "mapped" (persistent MAP_WRITE staging buffers filled by
# parallel copies, then copied on the GPU) or "queue" (``queue.write_buffer``, which
# allocates and fills a fresh staging buffer per call). Devices without upload buffers
# (a recording device) always use queue writes.
UPLOAD_MODES = ("mapped", "queue")
UPLOAD_VARIABLE = "OIDN_GPU_UPLOAD"


class StagingBuffers:
    """Reusable buffers by name on one device.

    Args:
        device: the runner's `GpuDevice`.
        resources: the runner's tracker (every buffer made here is tracked there).
        retire: releases buffers once the queue finished the work submitted so far.
    """

    def __init__(
        self, device: Any, resources: ResourceTracker, retire: Callable[[list[Any]], None]
    ) -> None:
        self._device = device
        self._resources = resources
        self._retire = retire
        self._buffers: dict[tuple[str, int], Any] = {}
        self.mode = upload_mode()

    def get(
        self, name: str, byte_size: int, usage: int = STORAGE_USAGE, *, upload: bool = False
    ) -> Any:
        """A reusable buffer per name, STORAGE unless ``usage`` says otherwise, or with
        ``upload`` a mapped upload buffer (replaced when the size changes)."""
        key = (name, byte_size)
        buffer = self._buffers.get(key)
        if buffer is None:
            for old_key in [k for k in self._buffers if k[0] == name]:
                self._retire([self.settled(self._buffers.pop(old_key))])
            label = f"oidn/pipeline/{name}"
            made = (
                self._device.create_upload_buffer(label, byte_size)
                if upload
                else self._device.create_buffer(label, byte_size, usage)
            )
            buffer = self._resources.track(BUFFER, made)
            self._buffers[key] = buffer
        return buffer

    def settled(self, buffer: Any) -> Any:
        """``buffer`` with no mapping request in flight (one is completed first), so that
        destroying it leaves no request unanswered."""
        if getattr(buffer, "map_state", None) == "pending":
            self._device.map_for_write(buffer)
        return buffer

    def upload(self, name: str, array: np.ndarray, uploads: list[Any] | None = None) -> GpuImage:
        """Upload a float16/float32 ``[H, W, C]`` image as it is: its bytes from the first
        pixel to the last, strides kept (an RGBA view's alpha travels along), no conversion.

        With mapped uploads the bytes are copied (by several threads for large images)
        into a persistent upload buffer and a GPU copy into the image buffer is submitted
        at once, so it runs while the next image is copied; the upload buffer is appended
        to ``uploads`` (to be mapped again once the frame is done)."""
        height, width, channels = array.shape
        span, pixel_stride, row_stride = element_span(array)
        raw = memoryview(span).cast("B")
        size = max((len(raw) + 3) & ~3, 4)  # buffers and copies are whole 4-byte words
        buffer = self.get(name, size)
        if self.mode == "mapped" and hasattr(self._device, "create_upload_buffer"):
            staging = self.get(f"{name}/upload", size, upload=True)
            source = np.frombuffer(raw, np.uint8)

            def fill(mapped: np.ndarray) -> None:
                parallel_copyto(mapped[: len(source)], source)
                mapped[len(source) :] = 0

            self._device.write_mapped_with(staging, size, fill)
            encoder = self._device.create_command_encoder(f"oidn/pipeline/{name}/upload")
            encoder.copy_buffer(staging, 0, buffer, 0, size)
            self._device.submit([encoder.finish()])
            if uploads is not None:
                uploads.append(staging)
        else:
            aligned = len(raw) - len(raw) % 4  # queue writes are whole 4-byte words
            if aligned:
                self._device.write_buffer(buffer, 0, raw[:aligned])
            if aligned < len(raw):
                self._device.write_buffer(buffer, aligned, bytes(raw[aligned:]).ljust(4, b"\0"))
        return GpuImage(
            buffer,
            height,
            width,
            channels,
            pixel_stride=pixel_stride,
            row_stride=row_stride,
            dtype=str(array.dtype),
        )

    def close(self) -> None:
        """Forget every buffer (the tracker releases them), none left with a mapping pending."""
        for buffer in self._buffers.values():
            self.settled(buffer)
        self._buffers.clear()


def upload_mode() -> str:
    mode = os.environ.get(UPLOAD_VARIABLE, UPLOAD_MODES[0])
    if mode not in UPLOAD_MODES:
        raise InvalidArgumentError(
            f"{UPLOAD_VARIABLE}={mode!r} is not an upload mode; expected one of "
            f"{', '.join(UPLOAD_MODES)}"
        )
    return mode


def element_span(array: np.ndarray) -> tuple[np.ndarray, int, int]:
    """``(flat elements from the first pixel to the last, pixel stride, row stride)``.

    A view with positive strides and adjacent channels (a crop, an RGBA array's RGB)
    is read in place; any other layout is copied to a dense array first.
    """
    height, width, channels = array.shape
    item = array.itemsize
    row_bytes, pixel_bytes, channel_bytes = array.strides
    in_place = (channel_bytes == item or channels == 1) and all(
        s > 0 and s % item == 0 for s in (row_bytes, pixel_bytes)
    )
    if not in_place or height * width == 0:
        array = np.ascontiguousarray(array)
        row_bytes, pixel_bytes = array.strides[:2]
    pixel_stride, row_stride = pixel_bytes // item, row_bytes // item
    count = (height - 1) * row_stride + (width - 1) * pixel_stride + channels
    span = np.lib.stride_tricks.as_strided(array, shape=(count,), strides=(item,), writeable=False)
    return span, pixel_stride, row_stride
