"""Images as Intel OIDN takes them: a pointer, a format, a size and byte strides.

On OIDN's CPU device, host arrays are handed to OIDN where they are (OIDN's shared
images): float32 and float16, 1 to 3 channels, any positive pixel and row strides (an
RGBA image's RGB view, a crop); other layouts (a transposed view) are copied first. On
OIDN's GPU devices (CUDA, HIP, SYCL), host arrays go through OIDN buffers in the
device's own memory (`DeviceBuffers`): one per image, kept across frames of the same
size, written with ``oidnWriteBuffer`` before the filter runs and the result read back
with ``oidnReadBuffer``, as OIDN's own examples do. A CUDA device that cannot read host
memory refuses host pointers, and OIDN's default buffers (``oidnNewBuffer``: memory that
host and device both reach) took 112.7 ms per 1080p call on an H200 where a direct
pyoidn loop through device buffers took 14.5 ms. Torch tensors on OIDN's CUDA
device are handed over by their device pointers (`tensor_image`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu.backends.base import image_as_hwc
from oidn_gpu.backends.oidn import capi

FORMAT_FLOAT = 1  # OIDN_FORMAT_FLOAT; FLOAT2 and FLOAT3 follow
FORMAT_HALF = 257  # OIDN_FORMAT_HALF; HALF2 and HALF3 follow
STORAGE_DEVICE = 2  # OIDN_STORAGE_DEVICE (oidn.h): memory of the device alone


@dataclass(frozen=True)
class ImageDesc:
    """What OIDN is told about one image (equal descriptors: nothing to set again).

    Attributes:
        address: the first pixel (host or device memory); 0 with ``buffer``.
        format: OIDN's ``OIDNFormat``.
        width, height: pixels.
        pixel_stride, row_stride: bytes.
        buffer: an OIDN buffer holding the image instead (`DeviceBuffers`), else None.
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


def pixel_bytes(image_format: int) -> int:
    """The bytes of one dense pixel of an OIDN format (`image_format`)."""
    is_half = image_format >= FORMAT_HALF
    channels = image_format - (FORMAT_HALF if is_half else FORMAT_FLOAT) + 1
    return channels * (2 if is_half else 4)


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


class DeviceBuffers:
    """OIDN buffers in a device's own memory (``OIDN_STORAGE_DEVICE``) for host images:
    one per image slot, kept while its byte size holds, so a sequence of frames of one
    size allocates them once and the filter's images stay set (no commit per frame).

    The copies are OIDN's synchronous ``oidnWriteBuffer`` and ``oidnReadBuffer``: the
    caller's arrays are read before `write` returns, the result is on the host when
    `read` returns.
    """

    def __init__(self, device: Any) -> None:
        self.device = device
        self._buffers: dict[str, tuple[int, Any]] = {}

    def buffer(self, slot: str, byte_size: int) -> Any:
        """``slot``'s buffer of ``byte_size`` bytes (the one kept, or a new one)."""
        held = self._buffers.get(slot)
        if held is not None and held[0] == byte_size:
            return held[1]
        lib = self.device.oidn.lib
        if held is not None:
            del self._buffers[slot]
            lib.oidnReleaseBuffer(held[1])
        handle = lib.oidnNewBufferWithStorage(self.device.handle, byte_size, STORAGE_DEVICE)
        self.device.check(f"allocate a {byte_size}-byte buffer for the {slot} image")
        self._buffers[slot] = (byte_size, handle)
        return handle

    def place(self, slot: str, desc: ImageDesc) -> ImageDesc:
        """The descriptor of ``slot``'s buffer holding a dense image of ``desc``'s size and
        format (pixels adjacent, rows adjacent)."""
        pixel = pixel_bytes(desc.format)
        handle = self.buffer(slot, pixel * desc.width * desc.height)
        return ImageDesc(0, desc.format, desc.width, desc.height, pixel, pixel * desc.width, handle)

    def write(self, slot: str, array: np.ndarray, desc: ImageDesc) -> ImageDesc:
        """`place` ``slot``'s buffer and copy the host image ``array`` (described by
        ``desc``) into it."""
        placed = self.place(slot, desc)
        dense = np.ascontiguousarray(array)  # OIDN's copies take one span of bytes
        lib, ffi = self.device.oidn.lib, self.device.oidn.ffi
        lib.oidnWriteBuffer(placed.buffer, 0, dense.nbytes, ffi.cast("void*", dense.ctypes.data))
        self.device.check(f"copy the {slot} image to the device")
        return placed

    def read(self, desc: ImageDesc, out: np.ndarray) -> np.ndarray:
        """The image in ``desc``'s buffer, read into ``out`` where ``out`` is C-contiguous,
        else into a new dense array (returned)."""
        dense = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
        lib, ffi = self.device.oidn.lib, self.device.oidn.ffi
        lib.oidnReadBuffer(desc.buffer, 0, dense.nbytes, ffi.cast("void*", dense.ctypes.data))
        self.device.check("copy the result from the device")
        return dense

    def release(self) -> None:
        """Release every buffer (idempotent)."""
        buffers, self._buffers = self._buffers, {}
        for _, handle in buffers.values():
            self.device.oidn.lib.oidnReleaseBuffer(handle)


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
