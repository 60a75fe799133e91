"""`CudaTemporalSession`: the temporal mode of one animation on the cuda backend's GPU.

The history state and the previous frame's guide stay on the device between frames. Per
frame (`frame`, host arrays) the images are copied into pinned host buffers by torch's
CPU threads and uploaded asynchronously, each upload overlapping the next copy; then, on
the current stream, five Triton kernels (`temporal_kernels`) and the denoise:

1. pack the signal and the guide;
2. reproject the previous state (pass 1a) and count the pixels that kept their history:
   that count is the one number read back mid-frame (the camera-cut test; a cut runs
   pass 1a again with no history);
3. the light-change rejection (pass 1b), writing the accumulated color, albedo and normal
   as contiguous images, with pass 1c (``disocclusion_margin``: a row dilation kernel,
   then the columns in the same kernel);
4. `oidn_gpu.Denoiser.denoise` of those device tensors (its device path: no host copy);
5. stabilize (pass 2), writing the output and the next state over the previous one;

and the output comes back in row bands, each copied out while the next one transfers.
`frame_on_device` is the same frame from device tensors to a device tensor (nothing
crosses the bus but the count).

`prefetch` stages a later frame's images while this one runs: a worker thread copies
them into the other of two sets of pinned buffers and uploads them on a side stream
(`TemporalDenoiser.denoise_many` calls it with the next frame), so that frame's
`frame` finds them on the device and only waits for the side stream.

Where no CUDA GPU is present the kernels run on CPU tensors through Triton's interpreter
(``TRITON_INTERPRET=1``, the tests).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from oidn_gpu.backends.base import TemporalFrame, TemporalResult
from oidn_gpu.backends.cuda import temporal_kernels as tk
from oidn_gpu.backends.cuda.images import host_copy
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.temporal import passes as tp

DOWNLOAD_BANDS = 4  # the output comes back in this many row bands
_ROLES = ("color", "albedo", "normal", "motion", "depth")


class CudaTemporalSession:
    """A `TemporalSession` with its history on a torch device (a CUDA GPU; the CPU under
    Triton's interpreter), denoising with ``frames`` (the frame path of a cuda
    `oidn_gpu.Denoiser` on that device, a `backends.temporal_seam.FrameSource`)."""

    name = "cuda"

    def __init__(self, frames: Any, device: Any) -> None:
        import torch

        self._torch = torch
        self.frames = frames
        self.device = torch.device(device)
        self._cuda = self.device.type == "cuda"
        self._host: dict[str, Any] = {}  # the output's pinned buffer
        self._dev: dict[str, Any] = {}  # device buffers by role
        # two sets of (pinned, device) input buffers by role, and what each holds: None
        # (free) or (the prefetched TemporalFrame, the Future of its staging)
        self._slots: list[dict[str, Any]] = [{}, {}]
        self._pending: list[tuple[TemporalFrame, Future] | None] = [None, None]
        self._worker: ThreadPoolExecutor | None = None
        self._side: Any = None  # the side stream of prefetched uploads
        self._size: tuple[int, int] | None = None  # of the stored history
        self._closed = False

    # -- frames ---------------------------------------------------------------------------

    def frame(self, frame: TemporalFrame, params: Any, *, restart: bool) -> TemporalResult:
        """`TemporalSession.frame`: host arrays in, the output read back once."""
        images = self._staged(frame)
        output, fraction, cut = self.frame_on_device(*images, params, restart=restart, copy=False)
        return TemporalResult(self._read_back(output), fraction, cut)

    def prefetch(self, frame: TemporalFrame) -> None:
        """Start staging ``frame``'s images for a later `frame` call of the same object
        (see the module docstring); at most two are kept, the oldest dropped."""
        if self._closed:
            raise InvalidOperationError("the temporal session is closed")
        slot = self._free_slot()
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="oidn-temporal-stage")
            if self._cuda:
                self._side = self._torch.cuda.Stream(self.device)
        staging = self._worker.submit(self._stage_frame, self._slots[slot], frame)
        self._pending[slot] = (frame, staging)

    def _free_slot(self) -> int:
        """A set of input buffers that no staging holds (the older of two pending
        prefetches is dropped for it)."""
        for slot, pending in enumerate(self._pending):
            if pending is None:
                return slot
        self._pending[0][1].result()
        self._pending[0], self._pending[1] = self._pending[1], None
        self._slots.reverse()
        return 1

    def _staged(self, frame: TemporalFrame) -> list[Any]:
        """The frame's images on the device: prefetched, else staged now into a free set
        of buffers."""
        for slot, pending in enumerate(self._pending):
            if pending is not None and pending[0] is frame:
                self._pending[slot] = None
                images, event = pending[1].result()
                if event is not None:
                    self._torch.cuda.current_stream(self.device).wait_event(event)
                return images
        store = self._slots[self._free_slot()]
        return [self._stage(store, role, getattr(frame, role)) for role in _ROLES]

    def _stage_frame(self, store: dict[str, Any], frame: TemporalFrame) -> tuple[list, Any]:
        """On the worker thread: the frame's images staged on the side stream, and the
        event that follows their uploads."""
        if not self._cuda:
            return [self._stage(store, role, getattr(frame, role)) for role in _ROLES], None
        torch = self._torch
        with torch.cuda.device(self.device), torch.cuda.stream(self._side):
            images = [self._stage(store, role, getattr(frame, role)) for role in _ROLES]
            event = torch.cuda.Event()
            event.record(self._side)
        return images, event

    def frame_on_device(
        self,
        color: Any,
        albedo: Any,
        normal: Any,
        motion: Any,
        depth: Any,
        params: Any,
        *,
        restart: bool,
        copy: bool = True,
    ) -> tuple[Any, float, bool]:
        """The next frame from tensors on the session's device: ``(output, history
        fraction, cut)`` (`TemporalResult`'s meanings), the output a ``[H, W, 3]`` float32
        tensor on the device (the session's own buffer, valid until the next frame, when
        ``copy`` is False).

        ``color``, ``albedo``, ``normal`` ``[H, W, 3]``, ``motion`` ``[H, W, 2]``, ``depth``
        ``[H, W]`` (``albedo``, ``normal``, ``depth``: None where not given); a dtype or
        layout other than contiguous float32 is converted on the device.
        """
        if self._closed:
            raise InvalidOperationError("the temporal session is closed")
        color, albedo, normal, motion, depth = (
            self._on_device(name, image)
            for name, image in zip(_ROLES, (color, albedo, normal, motion, depth), strict=True)
        )
        height, width = color.shape[:2]
        buf = self._buffers(height, width)
        signal, guide = buf["signal"], buf["guide_next"]
        tk.pack(color, albedo, normal, depth, signal, guide)
        has_history = not restart and self._size == (height, width)
        fraction = self._reproject(motion, signal, buf, params, has_history)
        cut = has_history and 1.0 - fraction > params.cut_threshold
        if cut:
            self._reproject(motion, signal, buf, params, False)
            fraction = 0.0
        repro = buf["repro"]
        tk.reject(
            signal,
            repro,
            buf["lum"],
            buf["acc_color"],
            buf["acc_albedo"],
            buf["acc_normal"],
            params,
            rows=buf["near_rows"],
        )
        denoised = self.frames.denoise(
            buf["acc_color"],
            None if albedo is None else buf["acc_albedo"],
            None if normal is None else buf["acc_normal"],
        )
        denoised = denoised.to(self._torch.float32).contiguous()
        tk.stabilize(denoised, repro, buf["out"], buf["state"], params)
        # the state is the new one now: this frame's guide becomes the previous guide
        buf["guide"], buf["guide_next"] = buf["guide_next"], buf["guide"]
        self._dev["guide"], self._dev["guide_next"] = buf["guide"], buf["guide_next"]
        self._size = (height, width)
        return (buf["out"].clone() if copy else buf["out"]), fraction, cut

    def _reproject(
        self, motion: Any, signal: Any, buf: dict[str, Any], params: Any, has_history: bool
    ) -> float:
        """Pass 1a into ``buf["repro"]``: the fraction of pixels that kept their history
        (read back only when there is a history to keep)."""
        kept = buf["kept"]
        kept.zero_()
        tk.gather(
            motion,
            buf["guide_next"],
            buf["guide"],
            signal,
            buf["state"],
            buf["repro"],
            buf["lum"],
            kept,
            params,
            has_history=has_history,
        )
        if not has_history:
            return 0.0
        return int(kept.item()) / (motion.shape[0] * motion.shape[1])

    # -- buffers --------------------------------------------------------------------------

    def _buffers(self, height: int, width: int) -> dict[str, Any]:
        """The device buffers of this size (a new size drops the stored history)."""
        torch = self._torch
        shapes = {
            "signal": tp.SIGNAL_CHANNELS,
            "guide": tp.GUIDE_CHANNELS,
            "guide_next": tp.GUIDE_CHANNELS,
            "state": tp.STATE_CHANNELS,
            "repro": tp.REPROJECTION_CHANNELS,
            "acc_color": 3,
            "acc_albedo": 3,
            "acc_normal": 3,
            "out": 3,
        }
        first = self._dev.get("state")
        if first is None or tuple(first.shape[:2]) != (height, width):
            self._size = None
            for role, channels in shapes.items():
                self._dev[role] = torch.empty(
                    (height, width, channels), dtype=torch.float32, device=self.device
                )
            self._dev["lum"] = torch.empty(
                (2, height, width), dtype=torch.float32, device=self.device
            )
            self._dev["near_rows"] = torch.empty(
                (height, width), dtype=torch.float32, device=self.device
            )
            self._dev["kept"] = torch.zeros(1, dtype=torch.int32, device=self.device)
        return self._dev

    def _on_device(self, name: str, image: Any) -> Any:
        if image is None:
            return None
        torch = self._torch
        if not isinstance(image, torch.Tensor) or image.device != self.device:
            where = image.device if isinstance(image, torch.Tensor) else type(image).__name__
            raise InvalidArgumentError(
                f"the temporal {name} image is on {where}; expected a tensor on {self.device}"
            )
        return image.to(torch.float32).contiguous()

    def _pinned(self, store: dict[str, Any], role: str, shape: tuple[int, ...]) -> Any:
        torch = self._torch
        buf = store.get(role)
        if buf is None or tuple(buf.shape) != shape:
            buf = torch.empty(shape, dtype=torch.float32, pin_memory=self._cuda)
            store[role] = buf
        return buf

    def _stage(self, store: dict[str, Any], role: str, array: np.ndarray | None) -> Any:
        """The host array on the device through the pinned buffer of ``store`` (queued on
        the current stream: the upload overlaps the next host copy)."""
        if array is None:
            return None
        host = self._pinned(store, role, array.shape)
        host_copy(host, np.asarray(array, np.float32))
        if not self._cuda:
            return host
        dev = store.get(f"dev_{role}")
        if dev is None or dev.shape != host.shape:
            dev = store[f"dev_{role}"] = self._torch.empty_like(host, device=self.device)
        dev.copy_(host, non_blocking=True)
        return dev

    def _read_back(self, output: Any) -> np.ndarray:
        """The output as a new host array, in row bands: each band's copy-out overlaps the
        transfer of the next."""
        torch = self._torch
        result = np.empty(tuple(output.shape), np.float32)
        if not self._cuda:
            host_copy(result, output)
            return result
        height = output.shape[0]
        host = self._pinned(self._host, "out", tuple(output.shape))
        count = max(1, min(DOWNLOAD_BANDS, height))
        bands = [(height * i // count, height * (i + 1) // count) for i in range(count)]
        stream = torch.cuda.current_stream(self.device)
        events = []
        for y0, y1 in bands:
            host[y0:y1].copy_(output[y0:y1], non_blocking=True)
            events.append(torch.cuda.Event())
            events[-1].record(stream)
        for (y0, y1), event in zip(bands, events, strict=True):
            event.synchronize()
            host_copy(result[y0:y1], host[y0:y1])
        return result

    def close(self) -> None:
        """Release the device history and the buffers (after any staging under way);
        idempotent."""
        self._closed = True
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None
        self._pending = [None, None]
        for store in (self._host, self._dev, *self._slots):
            store.clear()
        self._size = None
