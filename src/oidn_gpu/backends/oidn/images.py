"""Images as Intel OIDN takes them: a pointer, a format, a size and byte strides.

Host arrays are handed to OIDN where they are (OIDN's shared images): float32 and
float16, 1 to 3 channels, any positive pixel and row strides (an RGBA image's RGB
view, a crop); other layouts (a transposed view) are copied first. On a GPU device
that cannot read host memory, each image goes through an OIDN buffer of its own
(`StagingBuffers`), as OIDN's own examples do. Torch tensors on OIDN's CUDA device
are handed over by their device pointers (`tensor_image`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu.backends.base import image_as_hwc
from oidn_gpu.backends.oidn import capi

FORMAT_FLOAT = 1  # OIDN_FORMAT_FLOAT; FLOAT2 and FLOAT3 follow
FORMAT_HALF = 257  # OIDN_FORMAT_HALF; HALF2 and HALF3 follow


@dataclass(frozen=True)
class ImageDesc:
    """What OIDN is told about one image (equal descriptors: nothing to set again).

    Attributes:
        address: the first pixel (host or device memory); 0 with ``buffer``.
        format: OIDN's ``OIDNFormat``.
        width, height: pixels.
        pixel_stride, row_stride: bytes.
        buffer: an OIDN buffer holding the image instead (`StagingBuffers`), else None.
    """

    address: int
    format: int
    width: int
    height: int
    pixel_stride: int
    row_stride: int
    buffer: Any = None

    @property
    def byte_size(self) -> int:
        return self.row_stride * self.height


def image_format(is_half: bool, channels: int) -> int:
    return (FORMAT_HALF if is_half else FORMAT_FLOAT) + channels - 1


def _fits(shape: tuple[int, ...], strides: tuple[int, ...], item: int) -> bool:
    """Whether OIDN reads this layout as it is: channels adjacent, pixel and row strides
    positive and at least a pixel / a row of pixels."""
    _, width, channels = shape
    return strides[2] == item and strides[1] >= channels * item and strides[0] >= width * strides[1]


def host_image(array: Any, name: str) -> tuple[np.ndarray, ImageDesc]:
    """``(the array OIDN reads, its descriptor)`` of a host image (``[H, W]`` or
    ``[H, W, C]``, C 1..3); the array must stay alive until OIDN has run."""
    arr = image_as_hwc(array, name)
    if arr.dtype not in (np.float32, np.float16):
        arr = arr.astype(np.float32)
    if not _fits(arr.shape, arr.strides, arr.itemsize) or not arr.dtype.isnative:
        arr = np.ascontiguousarray(arr)
    height, width, channels = arr.shape
    desc = ImageDesc(
        arr.ctypes.data,
        image_format(arr.dtype == np.float16, channels),
        width,
        height,
        arr.strides[1],
        arr.strides[0],
    )
    return arr, desc


def tensor_image(tensor: Any, name: str) -> tuple[Any, ImageDesc]:
    """`host_image` of a torch tensor on OIDN's CUDA device (float16 kept, other dtypes
    converted to float32 on the device, odd layouts made contiguous there)."""
    import torch  # only for a caller's tensors

    t = tensor if tensor.dim() == 3 else tensor.unsqueeze(2)
    if t.dtype not in (torch.float32, torch.float16):
        t = t.float()
    item = t.element_size()
    strides = tuple(s * item for s in t.stride())
    if not _fits(tuple(t.shape), strides, item):
        t = t.contiguous()
        strides = tuple(s * item for s in t.stride())
    height, width, channels = t.shape
    desc = ImageDesc(
        t.data_ptr(),
        image_format(t.dtype == torch.float16, channels),
        width,
        height,
        strides[1],
        strides[0],
    )
    return t, desc


class StagingBuffers:
    """OIDN buffers on a GPU device for host images it cannot read: one per image name,
    kept while the size holds (`capi`'s ``oidnNewBuffer``, written and read by OIDN)."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self._buffers: dict[str, tuple[int, Any]] = {}

    def stage(self, name: str, array: np.ndarray, desc: ImageDesc, *, write: bool) -> ImageDesc:
        """The descriptor of ``name``'s buffer holding ``array`` (written when ``write``)."""
        lib, ffi = self.device.oidn.lib, self.device.oidn.ffi
        dense = np.ascontiguousarray(array)
        size = dense.nbytes
        held = self._buffers.get(name)
        if held is None or held[0] != size:
            if held is not None:
                lib.oidnReleaseBuffer(held[1])
            held = self._buffers[name] = (size, lib.oidnNewBuffer(self.device.handle, size))
            self.device.check("allocate a buffer")
        if write:
            lib.oidnWriteBuffer(held[1], 0, size, ffi.cast("void*", dense.ctypes.data))
            self.device.check("copy an image to the device")
        height, width = dense.shape[:2]
        pixel = dense.strides[1]
        return ImageDesc(0, desc.format, width, height, pixel, width * pixel, buffer=held[1])

    def read(self, desc: ImageDesc, out: np.ndarray) -> None:
        """Copy an output buffer into the C-contiguous host array ``out``."""
        lib, ffi = self.device.oidn.lib, self.device.oidn.ffi
        lib.oidnReadBuffer(desc.buffer, 0, out.nbytes, ffi.cast("void*", out.ctypes.data))
        self.device.check("copy the result from the device")

    def release(self) -> None:
        for _, buffer in self._buffers.values():
            self.device.oidn.lib.oidnReleaseBuffer(buffer)
        self._buffers.clear()


def set_image(oidn: capi.Library, filter_handle: Any, name: str, desc: ImageDesc | None) -> None:
    """Set (or, with None, unset) image ``name`` of an OIDN filter."""
    lib, ffi = oidn.lib, oidn.ffi
    key = name.encode()
    if desc is None:
        lib.oidnUnsetFilterImage(filter_handle, key)
    elif desc.buffer is not None:
        lib.oidnSetFilterImage(
            filter_handle,
            key,
            desc.buffer,
            desc.format,
            desc.width,
            desc.height,
            0,
            desc.pixel_stride,
            desc.row_stride,
        )
    else:
        lib.oidnSetSharedFilterImage(
            filter_handle,
            key,
            ffi.cast("void*", desc.address),
            desc.format,
            desc.width,
            desc.height,
            0,
            desc.pixel_stride,
            desc.row_stride,
        )
