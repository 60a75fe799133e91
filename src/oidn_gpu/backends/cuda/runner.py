"""Whole denoises on an NVIDIA GPU: input pass, network, output pass, GPU autoexposure, CUDA graphs.

`CudaDenoiser` runs OIDN's filter semantics for one `CudaExecutor` (the
counterpart of the wgpu backend's ``GpuDenoiser``). One frame is, per tile of
an `image.tiling.TilePlan`:

1. the input pass (`triton_kernels.input_pass_kernel`, or `torch_ops.input_pass`
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
(`triton_kernels.autoexposure_bins_kernel` for the bin averages, torch
reductions for ``key / 2^mean(log2)``, OIDN's algorithm over the whole image)
and never leaves the device; else the given ``mode.input_scale`` is written to
the device scalar before the frame.

The first frame of an input configuration (image shapes, strides and device
addresses, mode, plan) runs eagerly; from its second use it is captured as a CUDA
graph and replayed: a frame is one launch. A graph reads the caller's tensors in
place, so torch tensors on the device are never copied to the host or staged: a
repeated call with the same tensors (a render loop) replays at once; other
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

`denoise` takes NumPy arrays (any strides, float32 or float16, kept as given):
each image is copied into a pinned host buffer by torch's CPU threads and
uploaded asynchronously while the next one is copied; the frame graph runs on
the device copies, and the result comes back in row bands, each copied out by
torch's CPU threads while the next band transfers. Torch's copies run in its
native thread pool: Python copy threads cost more in wake-ups and GIL hand-offs
than the copies themselves (bench/cuda_host_copies.py, docs/benchmarks.md).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import math
import logging
import threading
import time
import warnings
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu.backends.base import image_as_hwc
from oidn_gpu.backends.cuda import compile_job, torch_ops
from oidn_gpu.backends.cuda.backend import TILE_LIMITS
from oidn_gpu.backends.cuda.executor import (
    CompileStopped,
    CudaExecutor,
    FinalTarget,
    interpreting,
    kernels,
    transfer_id,
)
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.image import autoexposure as ae
from oidn_gpu.image.tiling import MIN_TILE_ALIGNMENT, TilePlan, plan_tiles

_LOG = logging.getLogger(__name__)

GRAPH_CACHE_SIZE = 4
# NumPy images reach the device through pinned buffers filled by torch's CPU threads
# ("staged"), or through CUDA's own copies from pageable memory ("direct").
HOST_TRANSFERS = ("staged", "direct")
INPUT_BLOCK = 128  # pixels per program of the input pass
DOWNLOAD_BANDS = 4  # the result comes back in this many row bands


@dataclass(frozen=True)
class _Image:
    """A device image: tensor, ``(H, W)``, channels read or written, strides in elements."""

    tensor: Any
    height: int
    width: int
    channels: int
    pixel_stride: int
    row_stride: int
    offset: int

    def key(self) -> tuple[Any, ...]:
        return (
            self.tensor.data_ptr(), self.tensor.dtype, self.height, self.width, self.channels,
            self.pixel_stride, self.row_stride, self.offset,
        )  # fmt: skip


def _image(tensor: Any, name: str, *, max_channels: int = 3) -> _Image:
    """Describe a ``[H, W]`` or ``[H, W, C]`` device tensor (C 1..4; a 4th is alpha, untouched)."""
    torch = torch_ops.torch
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgumentError(f"{name} is a {type(tensor).__name__}; expected a torch tensor")
    if tensor.dtype not in (torch.float32, torch.float16):
        raise InvalidArgumentError(
            f"{name} image has dtype {tensor.dtype}; expected torch.float32 or torch.float16"
        )
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(2)
    if tensor.dim() != 3 or not 1 <= tensor.shape[2] <= 4:
        raise InvalidArgumentError(
            f"{name} image has shape {tuple(tensor.shape)}; expected HxW or HxWxC with C 1..4"
        )
    if tensor.shape[2] > 1 and tensor.stride(2) != 1:
        raise InvalidArgumentError(f"{name} image: channels must be contiguous (stride 1)")
    height, width, channels = (int(v) for v in tensor.shape)
    if height < 1 or width < 1:
        raise InvalidArgumentError(f"{name} image size {height}x{width} is empty")
    return _Image(
        tensor, height, width, min(channels, max_channels), int(tensor.stride(1)),
        int(tensor.stride(0)), 0,
    )  # fmt: skip


def index_fits(tile_h: int, tile_w: int) -> bool:
    """Whether a tile's widest activation can be indexed by the kernels' 32-bit offsets
    (the backend's `TILE_LIMITS`, which `plan_denoise` plans within)."""
    return TILE_LIMITS.fits(tile_h, tile_w)


def default_plan(height: int, width: int, overlap: int, max_tile_px: int | None = None) -> TilePlan:
    """OIDN's tile plan here: one tile unless over ``max_tile_px`` or 32-bit indexing."""
    return plan_tiles(
        height, width, overlap=overlap, alignment=MIN_TILE_ALIGNMENT, max_tile_px=max_tile_px,
        fits=index_fits,
    )  # fmt: skip


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


class CudaDenoiser:
    """Runs whole denoises (input pass, network, output pass per tile) on one executor.

    Args:
        executor: the network executor; its device runs everything.
        use_graphs: capture each frame as a CUDA graph (default on a GPU).
        host_transfer: ``"staged"`` (pinned buffers) or ``"direct"`` (CUDA's own
            copies from pageable memory, for comparison).
    """

    def __init__(
        self,
        executor: CudaExecutor,
        *,
        use_graphs: bool | None = None,
        host_transfer: str = "staged",
    ) -> None:
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
        self._frames: OrderedDict[tuple[Any, ...], _Frame] = OrderedDict()
        self._scale = self._torch.ones(1, dtype=self._torch.float32, device=self.device)
        self._pool = self._torch.cuda.graph_pool_handle() if self.use_graphs else None
        self._host: dict[str, Any] = {}  # pinned host buffers by role
        self._dev: dict[str, Any] = {}  # device copies of NumPy inputs by role
        # The cuDNN bridge: kernel configurations compiled for Triton, and compiles running.
        self._warming: dict[tuple[Any, ...], threading.Thread] = {}
        self._warm_lock = threading.Lock()
        self._stop = threading.Event()
        self._children: set[Any] = set()  # compile worker processes running
        self._compile_identity: int | None = None  # see `_ready_key`
        self._last_stream: Any = None  # the stream of the last staged call
        self._last_scale: DeviceScalar | None = None  # its autoexposure, read on demand
        self._closed = False

    def input_scale(self) -> float:
        """The input scale of the last frame (its autoexposure when it computed one)."""
        return float(self._scale.item())

    # ------------------------------------------------------------------ frame body

    def _autoexposure(self, color: _Image, scale_out: Any, engine: str) -> None:
        """Write OIDN's autoexposure scale of ``color`` into the device scalar ``scale_out``."""
        torch = self._torch
        nb_h = math.ceil(color.height / ae.MAX_BIN_SIZE)
        nb_w = math.ceil(color.width / ae.MAX_BIN_SIZE)
        if engine == "triton":
            tk = kernels()
            bins = torch.empty(nb_h * nb_w, dtype=torch.float32, device=self.device)
            tk.autoexposure_bins_kernel[(nb_h, nb_w)](
                color.tensor, color.offset, color.pixel_stride, color.row_stride,
                color.channels, color.height, color.width, nb_h, nb_w, bins,
                MAX_BIN=ae.MAX_BIN_SIZE,
            )  # fmt: skip
            tk.autoexposure_scale_kernel[(1,)](
                bins, nb_h * nb_w, scale_out, KEY=float(ae.KEY), EPS=float(ae.EPS), BLOCK=1024
            )
            return
        bins = torch_ops.autoexposure_bins(_hwc_view(color))
        valid = bins > float(ae.EPS)
        logs = torch.log2(torch.where(valid, bins, torch.ones_like(bins)))
        total = torch.where(valid, logs, torch.zeros_like(logs)).double().sum()
        count = valid.sum()
        mean = total / count.clamp(min=1).double()
        scale = torch.where(count > 0, float(ae.KEY) / torch.exp2(mean), torch.ones_like(mean))
        scale_out.copy_(scale.float().reshape(1))

    def _tile(self, images: list[_Image], tile: Any, plan: TilePlan, mode: Any,
              output: _Image, scale: Any, engine: str, stop: Any = None) -> None:  # fmt: skip
        ex = self.executor
        prep = ex.prepare(plan.tile_h, plan.tile_w, engine)
        inp = ex.input_view(prep, plan.tile_h, plan.tile_w)
        if engine == "triton":
            main = images[0]
            alb = images[1] if len(images) > 1 else main
            nrm = images[2] if len(images) > 2 else main
            grid = (-(-plan.tile_h * plan.tile_w // INPUT_BLOCK),)
            kernels().input_pass_kernel[grid](
                main.tensor, main.offset, main.pixel_stride, main.row_stride, main.channels,
                alb.tensor, alb.offset, alb.pixel_stride, alb.row_stride, alb.channels,
                nrm.tensor, nrm.offset, nrm.pixel_stride, nrm.row_stride, nrm.channels,
                scale, inp, plan.tile_h, plan.tile_w, ex.input_stored,
                tile.in_y, tile.in_x, tile.in_h, tile.in_w, tile.buf_y, tile.buf_x,
                IMAGES=len(images), TRANSFER=transfer_id(mode.transfer), HDR=bool(mode.hdr),
                SNORM=bool(mode.snorm), BLOCK=INPUT_BLOCK, CHANNELS=ex.input_stored,
            )  # fmt: skip
        else:
            torch_ops.input_pass([_hwc_view(i) for i in images], scale, mode, tile, inp)
        target = FinalTarget(
            output.tensor, output.offset, output.pixel_stride, output.row_stride,
            output.channels, tile.src_y, tile.src_x, tile.out_h, tile.out_w,
            tile.out_y, tile.out_x, mode, scale,
        )  # fmt: skip
        ex.forward(inp, prep=prep, target=target, engine=engine, stop=stop)

    def _body(self, images: list[_Image], output: _Image, mode: Any, plan: TilePlan,
              autoexposure: bool, engine: str, scale: Any = None,
              stop: Any = None) -> None:  # fmt: skip
        """One frame: autoexposure, then per tile input pass, network and output pass.
        ``stop`` (a background compile's) is asked before each kernel."""
        scale = self._scale if scale is None else scale
        if autoexposure:
            self._autoexposure(images[0], scale, engine)
        for tile in plan.tiles:
            if stop is not None and stop():
                raise CompileStopped
            self._tile(images, tile, plan, mode, output, scale, engine, stop)

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
            plan: a `TilePlan` for this image size (default: `default_plan`, one tile
                up to the kernels' size limit).
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
        self._check_open()
        if self.executor.closed:
            raise InvalidOperationError("the cuda executor of this denoiser is closed")
        images = [_image(main, "main")]
        for name, tensor in (("albedo", albedo), ("normal", normal)):
            if tensor is not None:
                images.append(_image(tensor, name))
        self._check_images(images)
        height, width = images[0].height, images[0].width
        channels = out_channels if out_channels is not None else images[0].channels
        if not 1 <= channels <= 3:
            raise InvalidArgumentError(f"out_channels is {channels}; expected 1, 2 or 3")
        if plan is None:
            plan = default_plan(height, width, overlap=self.executor.tile_overlap)
        if (plan.height, plan.width) != (height, width):
            raise InvalidArgumentError(
                f"tile plan is for {plan.height}x{plan.width}; the images are {height}x{width}"
            )
        torch = self._torch
        out_image = None
        if out is not None:
            if not isinstance(out, torch.Tensor) or out.dtype != torch.float32:
                raise InvalidArgumentError("out must be a float32 torch tensor")
            out_image = _image(out, "output", max_channels=4)
            written = min(out_image.channels, channels)
            if (out_image.height, out_image.width) != (height, width):
                raise InvalidArgumentError(
                    f"output size {out_image.height}x{out_image.width} differs from the "
                    f"input's {height}x{width}"
                )
            if written < channels:
                raise InvalidArgumentError(
                    f"output has {out_image.channels} channels; {channels} are written"
                )
            out_image = dataclasses.replace(out_image, channels=channels)
            if plan.is_tiled and any(
                i.tensor.data_ptr() == out_image.tensor.data_ptr() for i in images
            ):
                raise InvalidArgumentError(
                    "in-place denoising with several tiles needs a separate output tensor"
                )
        engine = self._engine_for(images, channels, mode, autoexposure, out_image, plan)
        key = (
            tuple(i.key() for i in images),
            out_image.key() if out_image is not None else None,
            mode.transfer, bool(mode.hdr), bool(mode.snorm), channels, autoexposure, plan,
            engine,
        )  # fmt: skip
        if not autoexposure:
            self._scale.fill_(float(np.float32(mode.input_scale)))
        self.executor.last_engine = engine
        frame = self._frame(key, images, out_image, (height, width, channels), mode, plan,
                            autoexposure, engine)  # fmt: skip
        if frame.graph is not None:
            frame.graph.replay()
        else:
            frame.run()
        if start_compiles:
            self.start_compiles()  # after the frame is queued: its host work comes first
        if out is not None:
            return out
        return frame.output.clone()

    # ------------------------------------------------------------------ the cuDNN bridge

    @staticmethod
    def _kernel_config(images: list[_Image], channels: int, mode: Any,
                       autoexposure: bool) -> tuple[Any, ...]:  # fmt: skip
        """What the compiled Triton kernels of a frame depend on (never its size)."""
        return (
            tuple((i.tensor.dtype, i.channels) for i in images), channels, mode.transfer,
            bool(mode.hdr), bool(mode.snorm), autoexposure,
        )  # fmt: skip

    def _ready_key(self, config: tuple[Any, ...]) -> tuple[Any, ...]:
        """Compiled kernels are the process's (Triton's in-memory cache): a configuration
        compiled for one denoiser is ready for every other of the same network, device,
        precision and tiles."""
        if self._compile_identity is None:  # fixed for a bridged executor (no tuning)
            ex = self.executor
            tiles = tuple(sorted(ex.tuned().items()))  # with the shipped table, the tiles
            self._compile_identity = hash((str(self.device), ex.precision, ex.graph, tiles))
        return (self._compile_identity, config)

    def _engine_for(self, images: list[_Image], channels: int, mode: Any, autoexposure: bool,
                    out_image: _Image | None, plan: TilePlan) -> str:  # fmt: skip
        """The engine of this frame: Triton, unless the bridge serves it on cuDNN while
        its kernels compile (started here on the configuration's first frame)."""
        ex = self.executor
        if not ex.bridge or ex.engine != "triton":
            return ex.engine
        config = self._kernel_config(images, channels, mode, autoexposure)
        with self._warm_lock:
            if self._ready_key(config) in _READY:
                return "triton"
            if config not in self._warming:
                self._warming[config] = threading.Thread(
                    target=self._warm, name="oidn-gpu-triton-compile", daemon=True,
                    args=(config, images, out_image, channels, mode, plan, autoexposure),
                )  # fmt: skip
        return "cudnn"

    def start_compiles(self) -> None:
        """Start the background compiles that earlier bridge frames asked for."""
        with self._warm_lock:
            if self._stop.is_set():
                return
            for thread in self._warming.values():
                if thread.ident is None:
                    thread.start()
                    _COMPILING.add(self)

    def stop_compiles(self, timeout: float = 60.0) -> None:
        """Stop background compiles at their next kernel and wait for them (at close, and
        at interpreter exit: a compiler thread must not outlive the process's teardown)."""
        self._stop.set()
        with self._warm_lock:
            threads = [t for t in self._warming.values() if t.ident is not None]
            for child in self._children:
                child.kill()
        for thread in threads:
            thread.join(timeout)

    def _warm(self, config: tuple[Any, ...], images: list[_Image], out_image: _Image | None,
              channels: int, mode: Any, plan: TilePlan, autoexposure: bool) -> None:  # fmt: skip
        """Compile the Triton kernels of a configuration: the frame on scratch images of
        the same dtypes and channels, on a side stream (the caller's tensors may be
        reused or freed meanwhile)."""
        torch = self._torch
        ex = self.executor
        try:
            start = time.perf_counter()
            if self._cuda and not interpreting():
                code = self._compile_in_child(images, channels, mode, plan, autoexposure)
                _LOG.info("cuda: Triton kernels compiled by a child process in %.2f s "
                          "(exit code %s)", time.perf_counter() - start, code)  # fmt: skip
            missing = kernels().UNAVAILABLE
            if missing:
                raise InvalidOperationError(missing)
            stream = torch.cuda.Stream(self.device) if self._cuda else None
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                scratch = [_image(torch.zeros(i.tensor.shape, dtype=i.tensor.dtype,
                                              device=self.device), "scratch")
                           for i in images]  # fmt: skip
                scratch = [dataclasses.replace(s, channels=i.channels)
                           for s, i in zip(scratch, images, strict=True)]  # fmt: skip
                height, width = images[0].height, images[0].width
                out = _image(torch.empty((height, width, channels), dtype=torch.float32,
                                         device=self.device), "output")  # fmt: skip
                scale = torch.ones(1, dtype=torch.float32, device=self.device)
                self._body(scratch, out, mode, plan, autoexposure, "triton", scale,
                           stop=self._stop.is_set)  # fmt: skip
            if stream is not None:
                stream.synchronize()
            _LOG.info("cuda: Triton kernels ready %.2f s after the first frame",
                      time.perf_counter() - start)  # fmt: skip
            ready = True
        except CompileStopped:
            ready = False
        except Exception as err:  # Triton is unusable here: stay on cuDNN, and say why
            ex.fallback = f"Triton kernels failed to compile ({type(err).__name__}: {err})"
            ex.engine = "cudnn"
            ready = True
        with self._warm_lock:
            if ready:
                _READY.add(self._ready_key(config))
            self._warming.pop(config, None)

    def _compile_in_child(self, images: list[_Image], channels: int, mode: Any,
                          plan: TilePlan, autoexposure: bool) -> int | None:  # fmt: skip
        """Compile the frame's kernels into Triton's disk cache in a child process (no GIL
        shared with the caller's frames); the in-process pass after it loads them. A child
        that fails leaves the compile to that pass."""
        ex = self.executor
        model = ex.model
        job = compile_job.CompileJob(
            graph=model.graph, convs=dict(model.convs), spec=getattr(model, "spec", None),
            precision=ex.precision, device_index=self.device.index,
            images=tuple((tuple(i.tensor.shape), str(i.tensor.dtype).split(".")[-1],
                          i.channels) for i in images),
            out_channels=channels, mode=mode, plan=plan, autoexposure=autoexposure,
        )  # fmt: skip
        try:
            child = compile_job.start(job)
        except OSError:
            return None
        with self._warm_lock:
            self._children.add(child)
        try:
            while child.poll() is None:
                if self._stop.wait(0.05):
                    child.kill()
                    child.wait()
                    raise CompileStopped
        finally:
            with self._warm_lock:
                self._children.discard(child)
            compile_job.discard(child)
        return child.returncode

    def wait_compiled(self, timeout: float | None = None) -> bool:
        """Wait for background Triton compiles; True when none is left running."""
        self.start_compiles()
        with self._warm_lock:
            threads = list(self._warming.values())
        for thread in threads:
            thread.join(timeout)
        with self._warm_lock:
            return not self._warming

    def _check_images(self, images: list[_Image]) -> None:
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

    def _frame(self, key: tuple[Any, ...], images: list[_Image], out_image: _Image | None,
               shape: tuple[int, int, int], mode: Any, plan: TilePlan,
               autoexposure: bool, engine: str) -> _Frame:  # fmt: skip
        """The frame of ``key``: run eagerly on first use, captured as a CUDA graph on the
        second."""
        frame = self._frames.get(key)
        if frame is not None:
            self._frames.move_to_end(key)
            if frame.graph is None and self.use_graphs:
                self._capture(frame)
            return frame
        torch = self._torch
        height, width, channels = shape
        owned = None
        if out_image is None:
            owned = torch.empty((height, width, channels), dtype=torch.float32,
                                device=self.device)  # fmt: skip
            out_image = _image(owned, "output")
        prepared = self.executor.prepare(plan.tile_h, plan.tile_w, engine)
        target = out_image

        def run() -> None:
            self._body(images, target, mode, plan, autoexposure, engine)

        while len(self._frames) >= GRAPH_CACHE_SIZE:
            self._frames.popitem(last=False)
        keep = (prepared, self.executor.weight_tensors())
        frame = _Frame(None, run, owned if owned is not None else out_image.tensor, keep)
        self._frames[key] = frame
        return frame

    def _capture(self, frame: _Frame) -> None:
        torch = self._torch
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(stream)
        # thread_local: a background compile may load modules and allocate meanwhile
        with torch.cuda.graph(graph, pool=self._pool, stream=side,
                              capture_error_mode="thread_local"):  # fmt: skip
            frame.run()
        stream.wait_stream(side)
        frame.graph = graph

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
    ) -> np.ndarray:
        """Denoise host images; returns ``[H, W, out_channels]`` float32 (or fills ``output``).

        Each image is staged in a pinned buffer by torch's CPU threads and uploaded
        while the next is staged, the frame runs on the GPU, and the result is read
        back in row bands, each copied out while the next transfers (torch's CPU
        thread count, ``torch.set_num_threads``, sets the copy rate). ``output`` may
        be one of the inputs (in place) and may have a 4th channel, left untouched.
        """
        self._check_open()
        arrays = [_as_hwc(main, "main")]
        for name, array in (("albedo", albedo), ("normal", normal)):
            if array is not None:
                arrays.append(_as_hwc(array, name))
        height, width = arrays[0].shape[:2]
        for array in arrays[1:]:
            if array.shape[:2] != (height, width):
                raise InvalidArgumentError(
                    f"image size {array.shape[0]}x{array.shape[1]} differs from the main "
                    f"input's {height}x{width}"
                )
        channels = out_channels if out_channels is not None else arrays[0].shape[2]
        if not 1 <= channels <= 3:
            raise InvalidArgumentError(f"out_channels is {channels}; expected 1, 2 or 3")
        if output is not None and (
            output.shape[:2] != (height, width) or output.ndim != 3
            or output.shape[2] < channels or output.dtype != np.float32
        ):  # fmt: skip
            raise InvalidArgumentError(
                f"output has shape {output.shape} and dtype {output.dtype}; expected float32 "
                f"({height}, {width}, >= {channels})"
            )
        if output is not None and not output.flags.writeable:
            raise InvalidArgumentError("output array is read-only; expected a writable array")
        stream = self._torch.cuda.current_stream(self.device) if self._cuda else None
        self._follow(stream)
        device_images = self._upload(arrays)
        dev_out = self._buffer(self._dev, "out", (height, width, channels), np.float32,
                               pinned=False)  # fmt: skip
        self.denoise_tensors(
            *device_images, mode=mode, plan=plan, out=dev_out, out_channels=channels,
            autoexposure=autoexposure, start_compiles=False,
        )  # fmt: skip
        result = np.empty((height, width, channels), np.float32) if output is None else None
        target = result if output is None else output[:, :, :channels]
        self._download(dev_out, target, stream)
        self.start_compiles()  # after the result is back: a compile competes for the GIL
        return result if output is None else output

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
        # Triton launches and graph captures go to the current device: make it ours.
        with self._torch.cuda.device(self.device) if self._cuda else contextlib.nullcontext():
            return self._denoise_staged(main, albedo, normal, mode=mode, plan=plan,
                                        out_channels=out_channels, autoexposure=autoexposure)

    def _denoise_staged(self, main: Any, albedo: Any, normal: Any, *, mode: Any,
                        plan: TilePlan | None, out_channels: int | None,
                        autoexposure: bool) -> Any:  # fmt: skip
        torch = self._torch
        tensors = []
        for name, tensor in (("main", main), ("albedo", albedo), ("normal", normal)):
            if tensor is not None:
                tensors.append(_staged_source(tensor, name, self.device))
        stream = torch.cuda.current_stream(self.device) if self._cuda else None
        self._follow(stream)
        staged = []
        for index, tensor in enumerate(tensors):
            dtype = np.float16 if tensor.dtype == torch.float16 else np.float32
            buffer = self._buffer(self._dev, f"in{index}", tuple(tensor.shape), dtype,
                                  pinned=False)  # fmt: skip
            buffer.copy_(tensor)
            staged.append(buffer)
        height, width = staged[0].shape[:2]
        channels = out_channels if out_channels is not None else staged[0].shape[2]
        if not 1 <= channels <= 3:
            raise InvalidArgumentError(f"out_channels is {channels}; expected 1, 2 or 3")
        out = self._buffer(self._dev, "out", (height, width, channels), np.float32,
                           pinned=False)  # fmt: skip
        self.denoise_tensors(*staged, mode=mode, plan=plan, out=out, out_channels=channels,
                             autoexposure=autoexposure)  # fmt: skip
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

    # ------------------------------------------------------------------ host transfers

    def _buffer(self, store: dict[str, Any], role: str, shape: tuple[int, ...], dtype: Any,
                pinned: bool) -> Any:  # fmt: skip
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
        devs = [self._buffer(self._dev, f"in{i}", a.shape, a.dtype, pinned=False)
                for i, a in enumerate(arrays)]  # fmt: skip
        if self.host_transfer == "direct":
            for dev, array in zip(devs, arrays, strict=True):
                array = np.ascontiguousarray(array)
                dev.copy_(torch.from_numpy(array if array.flags.writeable else array.copy()))
            return devs
        for i, (dev, array) in enumerate(zip(devs, arrays, strict=True)):
            host = self._buffer(self._host, f"in{i}", array.shape, array.dtype, pinned=True)
            _host_copy(host, array)
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
            _host_copy(target[y0:y1], host[y0:y1])

    # ------------------------------------------------------------------ lifetime

    def resources(self) -> tuple[int, int]:
        """(live buffers, bytes) owned by the denoiser (the executor's are separate)."""
        tensors = [*self._host.values(), *self._dev.values()]
        tensors += [f.output for f in self._frames.values()]
        return len(tensors), sum(int(t.numel() * t.element_size()) for t in tensors)

    def close(self) -> None:
        """Release the denoiser's graphs and buffers (not the executor); idempotent."""
        if self._closed:
            return
        self._closed = True
        self.stop_compiles()
        if self._cuda:
            self._torch.cuda.synchronize(self.device)
        self._frames.clear()
        self._host.clear()
        self._dev.clear()

    def __enter__(self) -> CudaDenoiser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidOperationError("the cuda denoiser is closed")


_COMPILING: weakref.WeakSet[CudaDenoiser] = weakref.WeakSet()
# Kernel configurations whose Triton kernels this process has compiled (`_ready_key`).
_READY: set[tuple[Any, ...]] = set()


@atexit.register
def _stop_all_compiles() -> None:
    # A compiler thread still in Triton's C++ code when the process tears down its
    # libraries aborts the process: stop each at its next kernel and wait for it.
    for denoiser in list(_COMPILING):
        denoiser.stop_compiles()


class DeviceScalar:
    """A float32 scalar on the device, read (waiting for the work queued before it on
    ``stream``) only when ``float()`` asks."""

    def __init__(self, tensor: Any, stream: Any) -> None:
        self._tensor = tensor
        self._event = None
        if stream is not None:
            self._event = torch_ops.torch.cuda.Event()
            self._event.record(stream)

    def __float__(self) -> float:
        if self._event is not None:
            self._event.synchronize()
        return float(self._tensor.item())


def _staged_source(tensor: Any, name: str, device: Any) -> Any:
    """A tensor `CudaDenoiser.denoise_staged` copies from, as ``[H, W, C]`` (C 1..3)."""
    torch = torch_ops.torch
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgumentError(f"{name} is a {type(tensor).__name__}; expected a torch tensor")
    if tensor.device != device:
        raise InvalidArgumentError(
            f"{name} image is on {tensor.device}; the denoiser runs on {device}"
        )
    if tensor.dtype not in (torch.float16, torch.float32, torch.float64, torch.bfloat16):
        raise InvalidArgumentError(
            f"{name} image has dtype {tensor.dtype}; expected a torch float16, float32, "
            "float64 or bfloat16 tensor"
        )
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(2)
    if tensor.dim() != 3 or not 1 <= tensor.shape[2] <= 3 or min(tensor.shape[:2]) < 1:
        raise InvalidArgumentError(
            f"{name} image has shape {tuple(tensor.shape)}; expected HxW or HxWxC with C 1..3"
        )
    return tensor


def _as_hwc(image: np.ndarray, name: str) -> np.ndarray:
    """``image`` as ``[H, W, C]``; float16 and float32 only."""
    arr = image_as_hwc(image, name)
    if arr.dtype not in (np.float32, np.float16):
        raise InvalidArgumentError(
            f"{name} image has dtype {arr.dtype}; expected float16 or float32"
        )
    return arr


def _host_copy(dst: Any, src: Any) -> None:
    """``dst[...] = src`` between a torch CPU tensor and a NumPy array (either way round)
    on torch's CPU threads; views torch cannot wrap (negative strides) are copied by NumPy."""
    torch = torch_ops.torch
    array = src if isinstance(src, np.ndarray) else dst
    if min(array.strides, default=0) < 0:
        out = dst if isinstance(dst, np.ndarray) else dst.numpy()
        np.copyto(out, src if isinstance(src, np.ndarray) else src.numpy())
        return
    if array is dst:
        torch.from_numpy(dst).copy_(src)
        return
    with warnings.catch_warnings():
        # a read-only source is only read: torch's warning about writes does not apply
        warnings.filterwarnings("ignore", "The given NumPy array is not writable")
        wrapped = torch.from_numpy(src)
    dst.copy_(wrapped)


def _hwc_view(image: _Image) -> Any:
    """The ``[H, W, C]`` view of a described device image (the cuDNN path)."""
    return image.tensor[:, :, : image.channels]
