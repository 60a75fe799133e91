"""`HostImages`: a `CudaDenoiser`'s images that are not the caller's device tensors.

`denoise` takes NumPy arrays (any strides, float32 or float16, kept as given):
each image is copied into a pinned host buffer by torch's CPU threads and
uploaded asynchronously while the next one is copied; the frame graph runs on
the device copies, and the result comes back in row bands, each copied out by
torch's CPU threads while the next band transfers. Torch's copies run in its
native thread pool: Python copy threads cost more in wake-ups and GIL hand-offs
than the copies themselves (bench/cuda_host_copies.py, docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from oidn_gpu.backends.cuda.images import DeviceImage, DeviceScalar, host_copy, staged_source
from oidn_gpu.backends.frame_runner import host_frame
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.image.tiling import TilePlan

DOWNLOAD_BANDS = 4  # the result comes back in this many row bands


class HostImages:
    """`CudaDenoiser`'s NumPy images (pinned upload buffers, banded downloads) and its
    staged device tensors (copied into its own buffers): the device copies, host buffers
    and streams of the denoiser that inherits it."""

    def denoise(
        self,
        main: np.ndarray,
        albedo: np.ndarray | None = None,
        normal: np.ndarray | None = None,
        *,
        mode: Any,
        plan: TilePlan | None = None,
        out_channels: int | None = None,
        autoexposure: bool = False,
        output: np.ndarray | None = None,
        alpha: Callable[[Any, Any], Any] | None = None,
    ) -> np.ndarray:
        """Denoise host images; returns ``[H, W, out_channels]`` float32 (or fills ``output``).

        Each image (float16 or float32) is staged in a pinned buffer by torch's CPU
        threads and uploaded while the next is staged, the frame runs on the GPU, and
        the result is read back in row bands, each copied out while the next transfers
        (torch's CPU thread count, ``torch.set_num_threads``, sets the copy rate).
        ``output`` (float32 or float16) may be one of the inputs (in place) and may have
        a 4th channel, left untouched.

        With ``alpha``, ``main`` is ``[H, W, 4]``, a colour and its alpha, uploaded as one
        image, and the result is ``[H, W, out_channels + 1]``: its last channel is
        ``alpha(plane, albedo)`` of the uploaded alpha plane (an ``[H, W]`` tensor) and
        albedo (a tensor, or None), a float32 ``[H, W]`` tensor computed on the device
        beside the colour's network (queued on a side stream), read back with the colour.
        """
        self._check_open()
        host = host_frame(
            (main, albedo, normal),
            out_channels=out_channels,
            output=output,
            convert=False,
            with_alpha=alpha is not None,
        )
        beside = None if alpha is None else _alpha_into_output(host.roles, alpha)
        pending = self._submit_host(
            host, mode, plan, autoexposure=autoexposure, progress=None, beside=beside
        )
        return self._result(pending)

    def denoise_staged(
        self,
        main: Any,
        albedo: Any = None,
        normal: Any = None,
        *,
        mode: Any,
        plan: TilePlan | None = None,
        out_channels: int | None = None,
        autoexposure: bool = False,
    ) -> Any:
        """Denoise device tensors through the denoiser's own buffers; returns its output.

        Each image (``[H, W]`` or ``[H, W, C]``, C 1..3, any strides; float16 kept,
        float32, float64 and bfloat16 read as float32, rounded as NumPy's ``astype``)
        is copied on the device (torch ``copy_``) into the buffer the NumPy path
        uploads into, and the frame runs on those: its CUDA graph is keyed on the
        buffers, so fresh tensors every call cost one device-to-device copy each, not
        a capture. Queued on the current stream; after a call on another stream the
        buffers are reused only once that stream's earlier work is done.

        Returns:
            The denoiser's float32 ``[H, W, out_channels]`` output buffer, overwritten
            by its next call. With ``autoexposure`` the scale is `last_input_scale`.
        """
        self._check_open()
        self._uploaded = {}  # its copies overwrite the NumPy frame's
        # Triton launches and graph captures go to the current device: make it ours.
        with self._torch.cuda.device(self.device) if self._cuda else contextlib.nullcontext():
            return self._denoise_staged(
                main,
                albedo,
                normal,
                mode=mode,
                plan=plan,
                out_channels=out_channels,
                autoexposure=autoexposure,
            )

    def _denoise_staged(
        self,
        main: Any,
        albedo: Any,
        normal: Any,
        *,
        mode: Any,
        plan: TilePlan | None,
        out_channels: int | None,
        autoexposure: bool,
    ) -> Any:
        torch = self._torch
        tensors = []
        for name, tensor in (("main", main), ("albedo", albedo), ("normal", normal)):
            if tensor is not None:
                tensors.append(staged_source(tensor, name, self.device))
        stream = torch.cuda.current_stream(self.device) if self._cuda else None
        self._follow(stream)
        staged = []
        for index, tensor in enumerate(tensors):
            dtype = np.float16 if tensor.dtype == torch.float16 else np.float32
            buffer = self._buffer(self._dev, f"in{index}", tuple(tensor.shape), dtype, pinned=False)
            buffer.copy_(tensor)
            staged.append(buffer)
        height, width = staged[0].shape[:2]
        channels = out_channels if out_channels is not None else staged[0].shape[2]
        if not 1 <= channels <= 3:
            raise InvalidArgumentError(f"out_channels is {channels}; expected 1, 2 or 3")
        out = self._buffer(self._dev, "out", (height, width, channels), np.float32, pinned=False)
        self.denoise_tensors(
            *staged, mode=mode, plan=plan, out=out, out_channels=channels, autoexposure=autoexposure
        )
        self._last_stream = stream
        if autoexposure:
            self._last_scale = DeviceScalar(self._scale.clone(), stream)
        return out

    def last_input_scale(self) -> DeviceScalar:
        """The autoexposure scale of the last `denoise_staged` with ``autoexposure``,
        kept on the device until ``float()`` reads it."""
        if self._last_scale is None:
            raise InvalidOperationError("no staged denoise computed an autoexposure yet")
        return self._last_scale

    def _follow(self, stream: Any) -> None:
        """Order work on ``stream`` after the last staged call's stream (device-side: the
        buffers are reused only once what was queued there, copies out included, ran)."""
        last = self._last_stream
        if last is not None and stream is not None and last != stream:
            stream.wait_stream(last)

    def _buffer(
        self, store: dict[str, Any], role: str, shape: tuple[int, ...], dtype: Any, pinned: bool
    ) -> Any:
        torch = self._torch
        dtype = torch.float16 if dtype == np.float16 else torch.float32
        buf = store.get(role)
        if buf is None or tuple(buf.shape) != shape or buf.dtype != dtype:
            if pinned:
                buf = torch.empty(shape, dtype=dtype, pin_memory=self._cuda)
            else:
                buf = torch.empty(shape, dtype=dtype, device=self.device)
            store[role] = buf
        return buf

    def _upload(self, arrays: list[np.ndarray]) -> list[Any]:
        """The device copies of the images, queued on the current stream: each upload
        overlaps the host copy of the next image."""
        torch = self._torch
        devs = [
            self._buffer(self._dev, f"in{i}", a.shape, a.dtype, pinned=False)
            for i, a in enumerate(arrays)
        ]
        if self.host_transfer == "direct":
            for dev, array in zip(devs, arrays, strict=True):
                array = np.ascontiguousarray(array)
                dev.copy_(torch.from_numpy(array if array.flags.writeable else array.copy()))
            return devs
        for i, (dev, array) in enumerate(zip(devs, arrays, strict=True)):
            host = self._buffer(self._host, f"in{i}", array.shape, array.dtype, pinned=True)
            host_copy(host, array)
            dev.copy_(host, non_blocking=True)
        return devs

    def _download(self, dev: Any, target: np.ndarray, stream: Any) -> None:
        """Read ``dev`` back into ``target`` in row bands: each band's copy-out overlaps
        the transfer of the next."""
        torch = self._torch
        if self.host_transfer == "direct":
            target[...] = dev.cpu().numpy()
            return
        height = dev.shape[0]
        host = self._buffer(self._host, "out", tuple(dev.shape), np.float32, pinned=True)
        count = max(1, min(DOWNLOAD_BANDS, height))
        bands = [(height * i // count, height * (i + 1) // count) for i in range(count)]
        events = []
        for y0, y1 in bands:
            host[y0:y1].copy_(dev[y0:y1], non_blocking=True)
            if self._cuda:
                event = torch.cuda.Event()
                event.record(stream)
                events.append(event)
        for index, (y0, y1) in enumerate(bands):
            if self._cuda:
                events[index].synchronize()
            host_copy(target[y0:y1], host[y0:y1])


def _alpha_into_output(
    roles: tuple[str, ...], alpha: Callable[[Any, Any], Any]
) -> Callable[[list[DeviceImage], DeviceImage], None]:
    """The work `HostImages.denoise` queues beside a frame with an alpha: ``alpha`` of
    the main image's 4th channel and the albedo, written into the output's last channel."""

    def write(images: list[DeviceImage], output: DeviceImage) -> None:
        by_role = dict(zip(roles, images, strict=True))
        albedo = by_role.get("albedo")
        plane = by_role["main"].tensor[:, :, 3]
        output.tensor[:, :, -1].copy_(alpha(plane, None if albedo is None else albedo.tensor))

    return write
