"""Whole denoises on an NVIDIA GPU: input pass, network, output pass, GPU autoexposure, CUDA graphs.

`CudaDenoiser` runs OIDN's filter semantics for one `CudaExecutor` (the
counterpart of the wgpu backend's ``GpuDenoiser``). One frame is, per tile of
an `image.tiling.TilePlan`:

1. the input pass (`io_kernels.input_pass_kernel`, or `torch_ops.input_pass`
   on the cuDNN path): the tile's rectangle of the float32 (or float16) images,
   any pixel and row strides, 1-3 channels broadcast as OIDN does, scaled by the
   device scalar ``input_scale``, sanitized, transfer-encoded (main) or clamped
   (albedo, normal) into the padded NHWC network input; zero elsewhere (OIDN's
   padding);
2. the network (`CudaExecutor.forward`), whose final conv applies the output
   pass (inverse transfer, clamps, 1-channel average, snorm, output scale
   ``1 / input_scale``) and writes the tile's kept rectangle of the float32
   output image; channels past ``out_channels`` (alpha) are left untouched.

With ``autoexposure=True`` the input scale is computed on the GPU first
(`autoexposure`: Triton kernels for the bin averages and ``key / 2^mean(log2)``,
OIDN's algorithm over the whole image) and never leaves the device; else the given
``mode.input_scale`` is written to the device scalar before the frame.

The first frame of an input configuration (image shapes, strides and device
addresses, mode, plan) runs eagerly; from its second use it is captured as a CUDA
graph and replayed: a frame is one launch. A graph reads the caller's tensors in
place, so torch tensors on the device are never copied to the host or staged: a
repeated call with the same tensors (a render loop) replays at once, without
checking and describing them again (`requests.LastRequest`), nor looking its
frame up while no other frame was queued since (`_replay_again`); other
tensors capture another graph
(the last `GRAPH_CACHE_SIZE` are kept). With ``out=`` the graph writes straight
into the caller's tensor; without it, into a buffer of the denoiser whose copy
is returned.
`denoise_staged` (the public API's path for device tensors) first copies the
tensors on the device into the denoiser's own buffers (those the NumPy path
uploads into) and runs the frame on them, so fresh tensors every call replay one
graph: a device-to-device copy per image instead of a capture.

On an executor with a cuDNN bridge (``engine="auto"`` on a GPU) a frame whose
kernel configuration (image dtypes and channels, output channels, transfer, HDR,
snorm, autoexposure: never the size) has no compiled Triton kernels yet runs on
cuDNN. Once the call has returned, a background thread has a child process
(`compile_worker`) compile them into Triton's disk cache, then runs the same
frame on scratch images on a side stream, which loads them; later frames of that
configuration run on Triton. Closing the denoiser, or the interpreter's exit,
stops a compile (the child is killed).

`denoise` takes NumPy arrays and `denoise_staged` device tensors through the
denoiser's own buffers (`host_images.HostImages`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu.backends.base import Progress
from oidn_gpu.backends.cuda import torch_ops
from oidn_gpu.backends.cuda.autoexposure import autoexposure
from oidn_gpu.backends.cuda.bridge import CompileBridge
from oidn_gpu.backends.cuda.executor import CudaExecutor, FinalTarget
from oidn_gpu.backends.cuda.host_images import HostImages
from oidn_gpu.backends.cuda.host_results import PinnedResults
from oidn_gpu.backends.cuda.images import (
    DeviceImage,
    DeviceScalar,
    describe,
    hwc_view,
)
from oidn_gpu.backends.cuda.input_pass import input_pass
from oidn_gpu.backends.cuda.options import TILE_LIMITS
from oidn_gpu.backends.cuda.requests import FrameKey, LastRequest
from oidn_gpu.backends.cuda.triton_loader import CompileStopped
from oidn_gpu.backends.frame_runner import (
    ROLES,
    FrameRequest,
    FrameRunner,
    HostFrame,
    check_out_channels,
    run_frame,
)
from oidn_gpu.backends.host_runner import report_progress
from oidn_gpu.backends.phases import timed_phase
from oidn_gpu.backends.plan import WHOLE_IMAGE, plan_tiles
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.image.tiling import TilePlan

_LOG = logging.getLogger(__name__)

__all__ = ["CudaDenoiser", "DeviceScalar"]

GRAPH_CACHE_SIZE = 4
# NumPy images reach the device through pinned buffers filled by torch's CPU threads
# ("staged"), or through CUDA's own copies from pageable memory ("direct").
HOST_TRANSFERS = ("staged", "direct")


@dataclass
class _Frame:
    """One captured frame: its graph (None on the CPU), images and owned buffers."""

    graph: Any
    run: Any  # the callable the graph replays (run eagerly where graphs do not exist)
    output: Any  # the output tensor the frame writes ([H, W, C] float32)
    # what the graph's addresses point into, kept alive while the graph is: the
    # executor's buffers for the tile size (it may evict them from its own cache)
    keep: Any = None
    runs: int = 0  # eager runs so far (captured on the second use)


@dataclass(frozen=True)
class _Work:
    """What one frame's passes read and write (`run_frame` over `CudaDenoiser`'s passes)."""

    images: list[DeviceImage]
    output: DeviceImage
    mode: Any
    plan: TilePlan
    engine: str
    scale: Any  # the device scalar of the input scale
    stop: Callable[[], bool] | None = None  # a background compile's: asked before each kernel


class CudaDenoiser(HostImages, FrameRunner[DeviceImage, _Frame, np.ndarray]):
    """Runs whole denoises (input pass, network, output pass per tile) on one executor.

    The frame order and the LRU of per-configuration frames (captured as CUDA graphs
    on their second use) are `FrameRunner`'s; this class supplies the CUDA primitives.

    Args:
        executor: the network executor; its device runs everything.
        use_graphs: capture each frame as a CUDA graph (default on a GPU).
        host_transfer: ``"staged"`` (pinned buffers) or ``"direct"`` (CUDA's own
            copies from pageable memory, for comparison).
    """

    closed_message = "the cuda denoiser is closed"

    def __init__(
        self,
        executor: CudaExecutor,
        *,
        use_graphs: bool | None = None,
        host_transfer: str = "staged",
    ) -> None:
        super().__init__(GRAPH_CACHE_SIZE)
        if host_transfer not in HOST_TRANSFERS:
            raise InvalidArgumentError(
                f"host_transfer {host_transfer!r} is unknown; expected one of {HOST_TRANSFERS}"
            )
        self.host_transfer = host_transfer
        self.executor = executor
        self._torch = torch_ops.torch
        self.device = executor.device
        self._cuda = self.device.type == "cuda"
        self.use_graphs = self._cuda if use_graphs is None else bool(use_graphs and self._cuda)
        self._scale = self._torch.ones(1, dtype=self._torch.float32, device=self.device)
        self._pool = self._torch.cuda.graph_pool_handle() if self.use_graphs else None
        self._host: dict[str, Any] = {}  # pinned host buffers by role
        self._results = PinnedResults(self._torch, pinned=self._cuda)  # NumPy results
        self._dev: dict[str, Any] = {}  # device copies of NumPy inputs by role
        self._uploaded: dict[str, Any] = {}  # the last host frame's device copies by role
        self._bridge = CompileBridge(self)  # frames on cuDNN while Triton compiles
        self._last_stream: Any = None  # the stream of the last staged call
        self._side: Any = None  # the stream of `beside`, made on first use
        self._last_scale: DeviceScalar | None = None  # its autoexposure, read on demand
        self._last_request = LastRequest()  # the last denoise_tensors call, checked
        self._last_key: tuple[Any, Any, Any] = (None, None, None)  # its request, engine, key
        # the last call's request and captured frame while nothing else ran since
        # (`denoise_tensors` replays it at once)
        self._replay: tuple[Any, _Frame] | None = None

    def input_scale(self) -> float:
        """The input scale of the last frame (its autoexposure when it computed one)."""
        return float(self._scale.item())

    # ------------------------------------------------------------------ frame body

    def _autoexposure(self, color: DeviceImage, scale_out: Any, engine: str) -> None:
        """Write OIDN's autoexposure scale of ``color`` into the device scalar ``scale_out``."""
        autoexposure(color, scale_out, engine)

    def _tile(
        self,
        images: list[DeviceImage],
        tile: Any,
        plan: TilePlan,
        mode: Any,
        output: DeviceImage,
        scale: Any,
        engine: str,
        stop: Any = None,
    ) -> None:
        ex = self.executor
        prep = ex.prepare(plan.tile_h, plan.tile_w, engine)
        inp = ex.input_view(prep, plan.tile_h, plan.tile_w)
        if engine == "triton":
            input_pass(images, tile, mode, scale, inp)
        else:
            torch_ops.input_pass([hwc_view(i) for i in images], scale, mode, tile, inp)
        target = FinalTarget(
            output.tensor,
            output.offset,
            output.pixel_stride,
            output.row_stride,
            output.channels,
            tile.src_y,
            tile.src_x,
            tile.out_h,
            tile.out_w,
            tile.out_y,
            tile.out_x,
            mode,
            scale,
        )
        ex.forward(inp, prep=prep, target=target, engine=engine, stop=stop)

    def _body(
        self,
        images: list[DeviceImage],
        output: DeviceImage,
        mode: Any,
        plan: TilePlan,
        autoexposure: bool,
        engine: str,
        scale: Any = None,
        stop: Any = None,
    ) -> None:
        """One frame (`run_frame`): autoexposure, then per tile input pass, network and
        output pass. ``stop`` (a background compile's) is asked before each kernel."""
        work = _Work(
            images, output, mode, plan, engine, self._scale if scale is None else scale, stop
        )
        run_frame(self, work, len(plan.tiles), autoexposure=autoexposure)

    def autoexposure_pass(self, frame: _Work) -> None:
        """`TilePasses.autoexposure_pass`: the scale written into the frame's device scalar."""
        self._autoexposure(frame.images[0], frame.scale, frame.engine)

    def tile_pass(self, frame: _Work, index: int) -> None:
        """`TilePasses.tile_pass`: the input pass, then the network with the output pass
        fused into its final conv."""
        if frame.stop is not None and frame.stop():
            raise CompileStopped
        self._tile(
            frame.images,
            frame.plan.tiles[index],
            frame.plan,
            frame.mode,
            frame.output,
            frame.scale,
            frame.engine,
            frame.stop,
        )

    # ------------------------------------------------------------------ entry points

    def denoise_tensors(
        self,
        main: Any,
        albedo: Any = None,
        normal: Any = None,
        *,
        mode: Any,
        plan: TilePlan | None = None,
        out: Any = None,
        out_channels: int | None = None,
        autoexposure: bool = False,
        start_compiles: bool = True,
    ) -> Any:
        """Denoise device tensors on the current stream; returns the output tensor.

        Args:
            main: the main input (color, or the aux image filtered alone), ``[H, W]``
                or ``[H, W, C]`` (C 1..4, a 4th channel is not read) float32/float16
                torch tensor on the executor's device, any row and pixel strides.
            albedo, normal: auxiliary images given alongside color (network order).
            mode: an `image.process.Mode`; its ``input_scale`` is used unless
                ``autoexposure``.
            plan: a `TilePlan` for this image size (default: `plan.plan_tiles` of the
                whole image, one tile up to the kernels' size limit).
            out: optional float32 ``[H, W, C]`` tensor written in place (channels past
                ``out_channels`` untouched); default a new ``[H, W, out_channels]``.
            out_channels: channels written (default: the main image's, at most 3).
            autoexposure: compute OIDN's autoexposure scale on the GPU (HDR).
            start_compiles: start the bridge's background Triton compiles now (else the
                caller calls `start_compiles` when its own host work is done).

        Returns:
            ``out``, or a new float32 tensor. Nothing is synchronized: the work is
            queued on the current stream, as torch operations are.
        """
        self._uploaded = {}  # the device call may not leave the NumPy frame's copies
        self._check_open()
        tensors, options = (main, albedo, normal, out), (mode, plan, out_channels, autoexposure)
        request = self._last_request.find(tensors, options)
        if request is None:  # not the last call's tensors and options: check them
            request = self._tensor_request(tensors, mode, plan, out_channels, autoexposure)
            self._last_request.remember(tensors, options, request)
        self._check_executor()
        replay = self._replay
        if replay is not None and replay[0] is request:
            frame = self._replay_again(replay[1])
        else:
            frame = super()._run_device(request, None)
            if frame.graph is not None and self.executor.last_engine == self.executor.engine:
                self._replay = (request, frame)
        if start_compiles:
            self.start_compiles()  # after the frame is queued: its host work comes first
        if out is not None:
            return out
        return frame.output.clone()

    def _replay_again(self, frame: _Frame) -> _Frame:
        """The last call's frame once more (a render loop): what `_run_device` would do for
        it, less the lookups. Its graph was the last one this denoiser queued (every other
        frame's lookup clears ``_replay``), of the executor's own engine (never a cuDNN
        frame while Triton compiles: that engine is final), so the frame cache's order,
        the engine and the device scalar's input scale (written only by frames and their
        lookups) are already this call's."""
        self.executor.last_engine = self.executor.engine
        frame.graph.replay()
        return frame

    def _tensor_request(
        self,
        tensors: tuple[Any, ...],
        mode: Any,
        plan: TilePlan | None,
        out_channels: int | None,
        autoexposure: bool,
    ) -> FrameRequest[DeviceImage]:
        """The checked request of `denoise_tensors`'s arguments (the default plan filled in)."""
        *inputs, out = tensors
        given = [
            (n, t) for n, t in zip(ROLES, inputs, strict=True) if t is not None or n == ROLES[0]
        ]
        images = [describe(tensor, name) for name, tensor in given]
        channels = out_channels if out_channels is not None else images[0].channels
        check_out_channels(channels)
        out_image = None if out is None else self._out_image(out, images[0], channels)
        request = FrameRequest(
            tuple(images), tuple(n for n, _ in given), out_image, channels, mode, plan, autoexposure
        )
        return self._checked(request)

    def _out_image(self, out: Any, main: DeviceImage, channels: int) -> DeviceImage:
        """Describe the caller's ``out`` tensor, checked against the main image."""
        torch = self._torch
        if not isinstance(out, torch.Tensor) or out.dtype != torch.float32:
            raise InvalidArgumentError("out must be a float32 torch tensor")
        out_image = describe(out, "output", max_channels=4)
        if (out_image.height, out_image.width) != (main.height, main.width):
            raise InvalidArgumentError(
                f"output size {out_image.height}x{out_image.width} differs from the "
                f"input's {main.height}x{main.width}"
            )
        if out_image.channels < channels:
            raise InvalidArgumentError(
                f"output has {out_image.channels} channels; {channels} are written"
            )
        return dataclasses.replace(out_image, channels=channels)

    def _check_executor(self) -> None:
        if self.executor.closed:
            raise InvalidOperationError("the cuda executor of this denoiser is closed")

    def _check_images(self, images: list[DeviceImage]) -> None:
        ex = self.executor
        if 3 * len(images) != ex.input_channels:
            raise InvalidArgumentError(
                f"the network takes {ex.input_channels} input channels but {len(images)} "
                "image(s) were given"
            )
        size = (images[0].height, images[0].width)
        for image in images[1:]:
            if (image.height, image.width) != size:
                raise InvalidArgumentError(
                    f"image size {image.height}x{image.width} differs from the main input's "
                    f"{size[0]}x{size[1]}"
                )
        for image in images:
            if image.tensor.device != self.device:
                raise InvalidArgumentError(
                    f"image on {image.tensor.device}; the denoiser runs on {self.device}"
                )

    # ------------------------------------------------------------------ FrameRunner primitives

    def _run_device(self, request: FrameRequest[DeviceImage], progress: Progress | None) -> _Frame:
        """`FrameRunner._run_device` of a checked request (the default plan filled in)."""
        return super()._run_device(self._checked(request), progress)

    def _checked(self, request: FrameRequest[DeviceImage]) -> FrameRequest[DeviceImage]:
        """``request`` checked against the executor, its default plan filled in."""
        images, out_image, plan = request.images, request.output, request.plan
        self._check_executor()
        self._check_images(list(images))
        height, width = images[0].height, images[0].width
        if plan is None:
            plan = plan_tiles(self.executor.model, height, width, WHOLE_IMAGE, TILE_LIMITS)
            request = request._replace(plan=plan)
        if (plan.height, plan.width) != (height, width):
            raise InvalidArgumentError(
                f"tile plan is for {plan.height}x{plan.width}; the images are {height}x{width}"
            )
        if (
            out_image is not None
            and plan.is_tiled
            and any(i.tensor.data_ptr() == out_image.tensor.data_ptr() for i in images)
        ):
            raise InvalidArgumentError(
                "in-place denoising with several tiles needs a separate output tensor"
            )
        return request

    def _frame_entry(
        self, request: FrameRequest[DeviceImage]
    ) -> tuple[Hashable, Callable[[], _Frame]]:
        """The key and builder of the frame of this configuration (its engine: Triton,
        or cuDNN while the bridge compiles); the fixed input scale is written now."""
        self._replay = None  # another frame may be queued, or the cache change: look up again
        images, out_image, channels = list(request.images), request.output, request.out_channels
        mode, plan, autoexposure = request.mode, request.plan, request.autoexposure
        engine = self._bridge.engine_for(images, channels, mode, autoexposure, out_image, plan)
        last, last_engine, key = self._last_key
        if request is not last or engine != last_engine:  # else a repeated call's key
            key = FrameKey(
                (
                    tuple(i.key() for i in images),
                    out_image.key() if out_image is not None else None,
                    mode.transfer,
                    bool(mode.hdr),
                    bool(mode.snorm),
                    channels,
                    autoexposure,
                    plan,
                    engine,
                )
            )
            self._last_key = (request, engine, key)
        if not autoexposure:
            self._scale.fill_(float(np.float32(mode.input_scale)))
        self.executor.last_engine = engine

        def build() -> _Frame:
            return self._build_frame(request, engine)

        return key, build

    def _build_frame(self, request: FrameRequest[DeviceImage], engine: str) -> _Frame:
        """A frame run eagerly on first use (captured as a CUDA graph on the second)."""
        torch = self._torch
        images, plan = list(request.images), request.plan
        owned = None
        target = request.output
        if target is None:
            height, width = images[0].height, images[0].width
            owned = torch.empty(
                (height, width, request.out_channels), dtype=torch.float32, device=self.device
            )
            target = describe(owned, "output")
        with timed_phase(_LOG, "prepare the frame's launches"):
            prepared = self.executor.prepare(plan.tile_h, plan.tile_w, engine)
        output = target

        def run() -> None:
            self._body(images, output, request.mode, plan, request.autoexposure, engine)

        keep = (prepared, self.executor.weight_tensors())
        return _Frame(None, run, owned if owned is not None else target.tensor, keep)

    def _reuse_frame(self, frame: _Frame) -> None:
        if frame.graph is None and self.use_graphs:
            self._capture(frame)

    def _launch(self, frame: _Frame, autoexposure: bool, progress: Progress | None) -> None:
        """One graph replay (or the eager run): ``progress`` hears 1.0 once it is queued."""
        if frame.graph is not None:
            frame.graph.replay()
        else:
            frame.run()
        report_progress(progress, 1.0)

    def _capture(self, frame: _Frame) -> None:
        torch = self._torch
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(stream)
        # thread_local: a background compile may load modules and allocate meanwhile
        with torch.cuda.graph(
            graph, pool=self._pool, stream=side, capture_error_mode="thread_local"
        ):
            frame.run()
        stream.wait_stream(side)
        frame.graph = graph

    def _upload_frame(self, frame: HostFrame, slot: str) -> list[DeviceImage]:
        self._follow(self._stream())
        tensors = self._upload(list(frame.arrays))
        self._uploaded = dict(zip(frame.roles, tensors, strict=True))
        return [describe(t, role) for t, role in zip(tensors, frame.roles, strict=True)]

    def host_inputs(self) -> dict[str, Any]:
        """The device copies of the last NumPy frame's images by role (``"main"``,
        ``"albedo"``, ``"normal"``: ``[H, W, C]`` tensors on the current stream), valid
        until this denoiser's next call; empty before one or after a device call."""
        return dict(self._uploaded)

    def queued(self) -> Any:
        """`BesideRunner.queued`: an event recorded on the current stream (None on the
        CPU)."""
        if not self._cuda:
            return None
        event = self._torch.cuda.Event()
        event.record(self._torch.cuda.current_stream(self.device))
        return event

    @contextlib.contextmanager
    def beside(self, start: Any = None) -> Iterator[Callable[[Any], Any]]:
        """`BesideRunner.beside`: the block's work queued on a side stream of the device
        that starts at ``start`` (an event of `queued`; default: after all the current
        stream has queued); the current stream waits for it after the block. The function
        given marks a tensor made inside as used on the current stream (so that its memory
        is not reused before that use)."""
        if not self._cuda:
            yield _same
            return
        torch = self._torch
        current = torch.cuda.current_stream(self.device)
        if self._side is None:
            self._side = torch.cuda.Stream(self.device)
        side = self._side
        if start is None:
            side.wait_stream(current)
        else:
            side.wait_event(start)
        try:
            with torch.cuda.stream(side):
                yield lambda tensor: _used_on(tensor, current)
        finally:
            current.wait_stream(side)

    def _mark(self) -> Any:
        return self.queued()

    def _queue_beside(self, work: Callable[[], None], mark: Any) -> None:
        """On a side stream from ``mark`` (`beside`): ``work`` writes only into buffers
        of the denoiser, which the current stream waits for before it reads them."""
        with self.beside(mark):
            work()

    def _output_image(self, frame: HostFrame, slot: str) -> DeviceImage:
        out = self._buffer(self._dev, "out", frame.shape, np.float32, pinned=False)
        return describe(out, "output")

    def _read_back(
        self, frame: HostFrame, output: DeviceImage, slot: str, upload_ms: float, submit_ms: float
    ) -> np.ndarray:
        stream = self._stream()
        pooled = None
        if frame.output is None and self.host_transfer == "staged":
            pooled = self._results.take(frame.shape)
        if pooled is not None:  # straight into a pinned result array: no second copy
            tensor, result = pooled
            tensor.copy_(output.tensor, non_blocking=self._cuda)
            if self._cuda:
                stream.synchronize()
            return result
        result = np.empty(frame.shape, np.float32) if frame.output is None else frame.output
        target = result if frame.target is None else frame.target
        self._download(output.tensor, target, stream)
        return result

    def _result(self, pending: np.ndarray) -> np.ndarray:
        self.start_compiles()  # after the result is back: a compile competes for the GIL
        return pending

    def _stream(self) -> Any:
        """The current stream (None on the CPU)."""
        return self._torch.cuda.current_stream(self.device) if self._cuda else None

    # ------------------------------------------------------------------ lifetime

    def resources(self) -> tuple[int, int]:
        """(live buffers, bytes) owned by the denoiser (the executor's are separate)."""
        tensors = [*self._host.values(), *self._dev.values(), *self._results.tensors()]
        tensors += [f.output for f in self._frames.values()]
        return len(tensors), sum(int(t.numel() * t.element_size()) for t in tensors)

    def _drain(self) -> None:
        """At `close`: stop the compiles, wait for the frames queued (the graphs go next)."""
        self.stop_compiles()
        if self._cuda:
            self._torch.cuda.synchronize(self.device)

    def _release(self) -> None:
        self._last_request.clear()
        self._last_key = (None, None, None)
        self._replay = None
        self._host.clear()
        self._uploaded = {}
        self._results.clear()
        self._dev.clear()

    # ------------------------------------------------------------------ the cuDNN bridge

    @property
    def _warming(self) -> dict[tuple[Any, ...], Any]:
        """Kernel configurations being compiled (`CompileBridge.warming`)."""
        return self._bridge.warming

    def start_compiles(self) -> None:
        """Start the background compiles that earlier bridge frames asked for."""
        self._bridge.start()

    def stop_compiles(self, timeout: float = 60.0) -> None:
        """Stop background compiles at their next kernel and wait for them (at close, and
        at interpreter exit: a compiler thread must not outlive the process's teardown)."""
        self._bridge.stop(timeout)

    def wait_compiled(self, timeout: float | None = None) -> bool:
        """Wait for background Triton compiles; True when none is left running."""
        return self._bridge.wait(timeout)


def _same(tensor: Any) -> Any:
    return tensor


def _used_on(tensor: Any, stream: Any) -> Any:
    """``tensor``, its memory kept until the work ``stream`` has queued is done."""
    tensor.record_stream(stream)
    return tensor
