"""The CUDA network executor: the fused graph as Triton kernels (or torch/cuDNN) on torch tensors.

Built like every backend from a `ValidatedModel`: the graph is fused
(`graph.passes.optimize` with ``channel_align=1``: each decoder source has its
own K loop, so no channel alignment is needed), every node must then be a conv
launch (`layout.launches`), and `graph.plan` assigns the activation buffers:
one flat device buffer per planned slot, values viewed as NHWC ``[H, W, C_stored]``
fp16/bf16 tensors inside them (`layout.value_bytes`).

Engines:

- ``triton`` (default where Triton imports): one `triton_kernels.conv3x3_kernel`
  launch per conv (pools, upsamples and concats fused), tiles per layer from
  `tuning` (a cache of ``oidn-gpu tune``, the shipped table, or the default);
  kernels compile once per layer and configuration, never per image size;
  the network's tail (last hidden conv, final conv, output pass) runs as fused kernels
  (`fusion`, the ``fused`` option; `steps` lists what `forward` launches); the
  few-channel full-resolution convs run the row kernel where it has a tile (`row_conv`);
- ``cudnn``: `torch_ops.TorchNetwork` (torch ``conv2d`` on channels-last
  tensors); chosen when Triton is missing or by ``engine="cudnn"``, and reported
  by `info()` (``fallback``).

With ``engine="auto"`` on a GPU the executor also holds the cuDNN network as a *bridge*:
Triton compiles its kernels in the background (`runner.CudaDenoiser` starts that on the
first frame of each configuration), and frames run on cuDNN until they are ready, so a
new process never waits for the compiler. `info()` names the engine of the last frame.

`run` takes and returns NumPy arrays (the `NetworkExecutor` protocol);
`forward` works on device tensors and only enqueues work on the current stream
(CUDA-graph capturable); `runner.CudaDenoiser` uses it for whole denoises.
With ``TRITON_INTERPRET=1`` the Triton engine runs on CPU tensors through
Triton's interpreter (tests without a GPU).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from oidn_gpu.backends.base import (
    ExecutorBase,
    ExecutorInfo,
    ExecutorResources,
    check_network_input,
)
from oidn_gpu.backends.cuda import (
    driver_launch,
    fusion,
    kernel_report,
    layout,
    row_conv,
    shipped_kernels,
    torch_ops,
    triton_loader,
)
from oidn_gpu.backends.cuda.engine_choice import pick_device, pick_engine
from oidn_gpu.backends.cuda.fusion import FusedTail
from oidn_gpu.backends.cuda.layout import ConvLaunch
from oidn_gpu.backends.cuda.options import CudaOptions
from oidn_gpu.backends.cuda.triton_loader import CompileStopped, interpreting
from oidn_gpu.backends.cuda.tuning import (
    RowsConfig,
    TailConfig,
    TileConfig,
    Tuner,
    block_k_for,
    candidates,
    default_config,
    rows_eligible,
    rows_key,
    shipped_config,
    shipped_rows,
    signature,
)
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.graph.passes import optimize
from oidn_gpu.graph.plan import Plan, plan, size_alignment
from oidn_gpu.image.tiling import TILE_OVERLAP_BASE
from oidn_gpu.model.unet import tile_overlap


@dataclass(frozen=True)
class FinalTarget:
    """Where and how the final conv writes: an fp32 image rectangle, optionally the output pass.

    Strides and offset are in float32 elements. Buffer pixels ``[keep_y, keep_y +
    keep_h) x [keep_x, keep_x + keep_w)`` go to image pixels from ``(dst_y, dst_x)``.
    ``mode`` None stores the raw network output (no output pass).
    """

    image: Any
    offset: int
    pixel_stride: int
    row_stride: int
    channels: int
    keep_y: int
    keep_x: int
    keep_h: int
    keep_w: int
    dst_y: int
    dst_x: int
    mode: Any = None
    scale: Any = None


@dataclass
class Prepared:
    """Shape-dependent state of the Triton engine: plan, slot buffers, value views, tiles."""

    plan: Plan
    slots: list[Any]
    views: dict[str, Any]
    configs: dict[str, TileConfig | RowsConfig] = field(default_factory=dict)
    tail: TailConfig | None = None  # the fused tail's tile (when the tail is fused)
    scratch: Any = None  # the fused tail's per-program rectangles

    @property
    def byte_size(self) -> int:
        slots = sum(int(s.numel()) for s in self.slots)
        if self.scratch is None or any(
            self.scratch.untyped_storage().data_ptr() == s.untyped_storage().data_ptr()
            for s in self.slots
        ):
            return slots
        return slots + int(self.scratch.numel() * self.scratch.element_size())


def transfer_id(transfer: Any) -> int:
    """The kernels' id of an `image.transfer.Transfer` (0 linear, 1 sRGB, 2 PU, 3 log)."""
    return {"linear": 0, "srgb": 1, "pu": 2, "log": 3}[transfer.value]


class CudaExecutor(ExecutorBase):
    """Runs one model's network on an NVIDIA GPU (implements `NetworkExecutor`).

    Args:
        model: a `ValidatedModel` (``.graph``, ``.convs``).
        options: the backend's checked options (`backend.CudaOptions`: device, precision,
            engine); without them the three keywords of those names make them (and are
            checked there), else those keywords must be left unset.
        device: a torch device or index; default the current CUDA device (the CPU
            under ``TRITON_INTERPRET=1`` when no GPU is present).
        precision: ``"fp16"`` (default) or ``"bf16"`` activations and weights;
            accumulation is fp32 either way.
        engine: ``"auto"`` (Triton when it imports, else cuDNN), ``"triton"``, ``"cudnn"``.
        tune: time tile candidates per layer shape (cached on disk); default only
            when ``OIDN_GPU_CUDA_TUNING`` asks for it (``on`` or a cache path).
        bridge: also build the cuDNN network to serve frames while the Triton kernels
            compile; default for ``engine="auto"`` on a GPU without tuning.
        shape_cache_size: how many input sizes keep their buffers.
        fused: how the network's tail (last hidden conv, final conv, output pass) runs
            (`fusion.FUSIONS`): ``"project"`` (True), ``"tail"`` or ``"off"`` (False: the
            oracle); default ``OIDN_GPU_CUDA_FUSED``, else ``project`` (fp16), ``off`` (bf16).
        rows: run the few-channel full-resolution convs on the row kernel where this GPU
            has a measured tile (`row_conv`); default ``OIDN_GPU_CUDA_ROWS``, else on.

    Raises:
        MissingDependencyError: torch is missing, or ``engine="triton"`` without Triton.
        InvalidArgumentError: bad options, missing weights, no CUDA device.
    """

    def __init__(
        self,
        model: Any,
        *,
        options: CudaOptions | None = None,
        device: Any = None,
        precision: str | None = None,
        engine: str | None = None,
        tune: bool | None = None,
        bridge: bool | None = None,
        shape_cache_size: int = 2,
        fused: bool | str | None = None,
        rows: bool | None = None,
    ) -> None:
        torch = torch_ops.torch
        self._torch = torch
        loose = {"device": device, "precision": precision, "engine": engine}
        if options is None:  # checked once, by the options
            options = CudaOptions(**{k: v for k, v in loose.items() if v is not None})
        elif any(v is not None for v in loose.values()):
            raise InvalidArgumentError(
                "CudaExecutor takes options= or the keywords device, precision and engine, not both"
            )
        self.options = options
        device, precision, engine = options.device, options.compute_precision, options.engine
        if shape_cache_size < 1:
            raise InvalidArgumentError(f"shape_cache_size {shape_cache_size} must be at least 1")
        self.device = pick_device(torch, device)
        on_gpu = self.device.type == "cuda"
        self._capability = torch.cuda.get_device_capability(self.device) if on_gpu else None
        choice = pick_engine(self.device, engine, tune, bridge)
        self.engine, self.fallback, self.bridge = choice.engine, choice.fallback, choice.bridge
        launched_by_driver = driver_launch.enabled()
        if self.bridge and self._capability is not None and not interpreting():
            # the shipped kernels are read (for `driver_launch`) or unpacked into Triton's
            # cache (where Triton loads them) while the network is built
            major, minor = self._capability
            if launched_by_driver:
                shipped_kernels.read_shipped_soon(major * 10 + minor)
            else:
                shipped_kernels.install_shipped_soon(major * 10 + minor)
        self.last_engine: str | None = None  # the engine of the last frame
        self.precision = precision
        self.model = model  # a background compile rebuilds the network from it
        self.dtype = torch.float16 if precision == "fp16" else torch.bfloat16
        self.graph = optimize(model.graph, channel_align=1)
        layout.check_weights(self.graph, model.convs)
        self.launches = layout.launches(self.graph)
        self.fusion = fusion.fusion_of(fused, precision)
        self.rows = row_conv.rows_of(rows)
        self.tail = fusion.fused_tail(self.launches) if self.fusion != "off" else None
        # what `forward` launches, in order: conv launches and the fused tail
        self.steps: tuple[ConvLaunch | FusedTail, ...] = (
            (*self.launches[:-2], self.tail) if self.tail is not None else self.launches
        )
        self.input_channels = self.graph.input_channels
        self.output_channels = self.graph.output_channels
        self.input_stored = layout.stored_channels(self.input_channels)
        self.alignment = size_alignment(self.graph)
        spec = getattr(model, "spec", None)
        self.tile_overlap = tile_overlap(spec) if spec is not None else TILE_OVERLAP_BASE
        self._cache_size = shape_cache_size
        self._prepared: OrderedDict[tuple[int, int], Prepared] = OrderedDict()
        self._info: tuple[Any, ExecutorInfo] | None = None  # `info`'s last answer, its state
        self._weights: dict[str, tuple[Any, Any]] = {}
        self._torch_net = None
        self._lock = threading.Lock()  # the prepared shapes (a bridge compiles in a thread)
        if self.engine == "triton":
            self._pack_weights(model.convs)
        self._torch_net_lock = threading.Lock()
        self._closed = False
        if self.engine == "cudnn":  # a bridge builds it for its first frame (`_torch_network`)
            self._torch_network()
        self._dummy = torch.ones(1, dtype=torch.float32, device=self.device)
        self._tune_tiles = choice.tune
        # The tuning cache is read whenever it exists (``oidn-gpu tune`` writes it).
        self._tuner = Tuner(self._device_key()) if self.engine == "triton" else None

    # ------------------------------------------------------------------ setup

    def _pack_weights(self, convs: Any) -> None:
        """The Triton kernels' weights and biases on the device (and the fused tail's
        projected final-conv weights)."""
        torch = self._torch
        for launch in self.launches:
            weight, bias = layout.pack_weights(launch, convs[launch.name])
            self._weights[launch.name] = (
                torch.as_tensor(weight, device=self.device).to(self.dtype).contiguous(),
                torch.as_tensor(bias, device=self.device),
            )
        if self.tail is not None and self.fusion == "project":
            hidden, final = self.tail.layers
            proj = fusion.project_weights(final, convs[final.name], hidden.out_stored)
            self._weights["project"] = (
                torch.as_tensor(proj, device=self.device).to(self.dtype).contiguous(),
                self._weights[final.name][1],
            )

    def _device_key(self) -> str:
        # The Triton version without importing Triton (which a bridge does off the
        # first frame's path).
        from importlib.metadata import PackageNotFoundError, version

        try:
            triton_version = version("triton")
        except PackageNotFoundError:
            triton_version = "unknown"
        name = (
            self._torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
        )
        return f"{name}|triton {triton_version}|{self.precision}"

    @property
    def device_name(self) -> str:
        if self.device.type == "cuda":
            return self._torch.cuda.get_device_name(self.device)
        return "cpu (Triton interpreter)" if self.engine == "triton" else "cpu (torch)"

    # ------------------------------------------------------------------ plans

    def prepare(self, height: int, width: int, engine: str | None = None) -> Prepared | None:
        """The buffers and tiles of ``height x width`` for ``engine`` (default the
        executor's): built on first use (and tuned, when tuning was asked for); None
        for cuDNN, which allocates as it runs."""
        self._check_open()
        if height % self.alignment or width % self.alignment or height < 1 or width < 1:
            raise InvalidArgumentError(
                f"network input size {height}x{width} must be a positive multiple of "
                f"{self.alignment} in both dimensions"
            )
        if (engine or self.engine) != "triton":
            return None
        key = (height, width)
        with self._lock:
            if key in self._prepared:
                self._prepared.move_to_end(key)
                return self._prepared[key]
            prepared = self._allocate(height, width)
            for launch in self.launches:
                prepared.configs[launch.name] = self.tile_config(prepared, launch)
            if self.tail is not None and self.fusion == "tail":
                self.set_tail_config(prepared, fusion.tail_config(self))
            elif self.tail is not None:
                fusion.prepare_project(self, prepared)
            if self._tune_tiles:
                self._tune(prepared)
            if self.rows and not interpreting() and row_conv.balance_of():
                row_conv.balance(self, prepared, fusion.row_launches(self, prepared))
            while len(self._prepared) >= self._cache_size:
                self._prepared.popitem(last=False)
            self._prepared[key] = prepared
            return prepared

    def _allocate(self, height: int, width: int) -> Prepared:
        torch = self._torch
        execution = plan(self.graph, height, width, value_bytes=layout.value_bytes(self.graph))
        slots = [
            torch.empty(size, dtype=torch.uint8, device=self.device)
            for size in execution.slot_bytes
        ]
        views = {}
        for name, shape in execution.shapes.items():
            slot = slots[execution.slot_of[name]]
            if name == self.graph.output:
                count = shape.height * shape.width * layout.OUTPUT_CHANNELS
                views[name] = (
                    slot[: count * 4]
                    .view(torch.float32)
                    .view(shape.height, shape.width, layout.OUTPUT_CHANNELS)
                )
            else:
                stored = layout.stored_channels(shape.channels)
                count = shape.height * shape.width * stored
                views[name] = (
                    slot[: count * 2].view(self.dtype).view(shape.height, shape.width, stored)
                )
        return Prepared(execution, slots, views)

    def layer_signature(self, prep: Prepared, launch: ConvLaunch) -> str:
        """The layer's tile signature: its shape and resolution level, not the image size."""
        height = layout.conv_shapes(prep.plan, launch)[0]
        full = prep.plan.shapes[self.graph.input].height
        return signature(launch, round(math.log2(full / height)))

    def tile_config(self, prep: Prepared, launch: ConvLaunch) -> TileConfig:
        """The tile of ``launch``: with the ``rows`` option a row-kernel tile (the tuning
        cache's ``rows:`` entry, else the shipped one) where there is one; else the tuning
        cache's, else the shipped table's for this GPU, else the default (see `tuning`)."""
        key = self.layer_signature(prep, launch)
        cached = self._tuner.cached(rows_key(key)) if self._tuner is not None else None
        rowed = cached or shipped_rows(self._capability, key)
        if self.rows and rows_eligible(launch) and rowed:
            return rowed
        cached = self._tuner.cached(key) if self._tuner is not None else None
        return cached or shipped_config(self._capability, key) or default_config(launch)

    def _tune(self, prep: Prepared) -> None:
        import triton.testing

        torch = self._torch
        assert self._tuner is not None
        for view in prep.views.values():  # time on random data, never on zeros
            view.copy_(torch.rand_like(view, dtype=torch.float32).to(view.dtype))
        target = self._raw_target(prep)
        for launch in self.launches:
            key = self.layer_signature(prep, launch)
            if isinstance(prep.configs[launch.name], RowsConfig):
                continue  # the row kernel's shipped tile

            def time_ms(config: TileConfig, launch: ConvLaunch = launch) -> float:
                def call() -> None:
                    self._launch(prep, launch, config, target if launch.final else None)

                call()
                torch.cuda.synchronize(self.device)
                return float(triton.testing.do_bench(call, warmup=5, rep=25, return_mode="median"))

            prep.configs[launch.name] = self._tuner.choose(key, candidates(launch), time_ms)
        if self.tail is not None and self.fusion == "tail":
            fusion.tune_tail(self, prep, target)

    def fused_kernels(self) -> Any:
        """The `fused_kernels` module's kernels (`triton_loader.launchers`)."""
        return triton_loader.launchers("fused")

    def row_kernels(self) -> Any:
        """The `row_kernels` module's kernels (`triton_loader.launchers`)."""
        return triton_loader.launchers("rows")

    def set_tail_config(self, prep: Prepared, config: TailConfig) -> None:
        """Use ``config`` for the ``tail`` fusion of ``prep`` (`fusion.set_tail_config`)."""
        fusion.set_tail_config(self, prep, config)

    def tuned(self) -> dict[str, TileConfig]:
        """The tuning cache's choices for this GPU, Triton version and precision."""
        return self._tuner.choices() if self._tuner is not None else {}

    def prewarm(self, shapes: Iterable[tuple[int, int]]) -> None:
        """Plan, allocate, compile and tune for each ``(H, W)``."""
        for height, width in shapes:
            prep = self.prepare(int(height), int(width))
            x = self._torch.zeros(
                (int(height), int(width), self.input_stored), dtype=self.dtype, device=self.device
            )
            self.forward(x, prep=prep)

    # ------------------------------------------------------------------ execution

    def _raw_target(self, prep: Prepared) -> FinalTarget:
        out = prep.views[self.graph.output]
        height, width = out.shape[:2]
        return FinalTarget(out, 0, 3, 3 * width, 3, 0, 0, height, width, 0, 0)

    def input_view(self, prep: Prepared | None, height: int, width: int) -> Any:
        """The NHWC ``[H, W, C_stored]`` network input buffer to fill before `forward`."""
        if prep is not None:
            return prep.views[self.graph.input]
        return self._torch.empty(
            (height, width, self.input_stored), dtype=self.dtype, device=self.device
        )

    def forward(
        self,
        x: Any,
        *,
        prep: Prepared | None = None,
        target: FinalTarget | None = None,
        engine: str | None = None,
        stop: Any = None,
    ) -> Any:
        """Enqueue the network on the current stream.

        Args:
            x: ``[H, W, C_stored]`` NHWC input (channels past ``input_channels`` zero);
                for the Triton engine, normally `input_view` of ``prep``.
            prep: the prepared shape (default: `prepare` of x's size).
            target: where the final layer writes (with or without the output pass);
                None gives the raw ``[H, W, 3]`` float32 output in the plan's buffer.
            engine: ``"triton"`` or ``"cudnn"`` (the bridge); default the executor's.
            stop: asked before each launch; True raises `CompileStopped` (a background
                compile being stopped).

        Returns:
            The raw output tensor when ``target`` is None, else None.
        """
        self._check_open()
        height, width = int(x.shape[0]), int(x.shape[1])
        engine = engine or self.engine
        if engine != "triton":
            return self._forward_torch(x, target)
        prep = prep if prep is not None else self.prepare(height, width)
        assert prep is not None
        source = prep.views[self.graph.input]
        if x.data_ptr() != source.data_ptr():
            source.copy_(x)
        raw = target is None
        target = target if target is not None else self._raw_target(prep)
        for step in self.steps:
            if stop is not None and stop():
                raise CompileStopped
            self.launch_step(prep, step, target)
        return prep.views[self.graph.output] if raw else None

    def launch_step(
        self, prep: Prepared, step: ConvLaunch | FusedTail, target: FinalTarget
    ) -> None:
        """Enqueue one of `steps` (a conv, or the fused tail) with the tiles of ``prep``."""
        if isinstance(step, FusedTail) and self.fusion == "project":
            fusion.launch_project(self, prep, target)
        elif isinstance(step, FusedTail):
            assert prep.tail is not None
            fusion.launch_tail(self, prep, prep.tail, target)
        else:
            self._launch(prep, step, prep.configs[step.name], target if step.final else None)

    def _torch_network(self) -> torch_ops.TorchNetwork:
        """The network as torch operations (cuDNN), built on first use: a bridged executor
        whose kernels are compiled already never builds it."""
        with self._torch_net_lock:
            if self._torch_net is None:
                self._check_open()
                self._torch_net = torch_ops.TorchNetwork(
                    self.launches, self.model.convs, self.graph.input, self.device, self.dtype
                )
            return self._torch_net

    def _forward_torch(self, x: Any, target: FinalTarget | None) -> Any:
        inp = x[..., : self.input_channels].permute(2, 0, 1).unsqueeze(0)
        out = self._torch_network().forward(inp)[0].permute(1, 2, 0)  # [H, W, 3] float32
        if target is None:
            return out
        torch_ops.write_target(out, target)
        return None

    def _launch(
        self,
        prep: Prepared,
        launch: ConvLaunch,
        config: TileConfig | RowsConfig,
        target: FinalTarget | None,
    ) -> None:
        if isinstance(config, RowsConfig):
            return row_conv.launch(self, prep, launch, config)
        height, width = layout.conv_shapes(prep.plan, launch)
        sources = [prep.views[s.value] for s in launch.sources]
        a = sources[0]
        b = sources[1] if len(sources) > 1 else a
        src_a = launch.sources[0]
        src_b = launch.sources[1] if len(sources) > 1 else src_a
        weight, bias = self._weights[launch.name]
        block_a, taps_a = block_k_for(config.block_k, src_a.stored)
        block_b, taps_b = block_k_for(config.block_k, src_b.stored)
        if launch.pool:
            grid_m = -(-(height // 2) * (width // 2) // (config.block_m // 4))
        elif launch.parity:
            grid_m = -(-(height // 2) * (width // 2) // config.block_m)
        else:
            grid_m = -(-height * width // config.block_m)
        block_n = 16 if launch.final else config.block_n
        grid_n = -(-launch.out_stored // block_n) if not launch.final else 1
        grid = (grid_m, grid_n, 4 if launch.parity else 1)
        if launch.final:
            assert target is not None
            out = target.image
            final_args, flags = self._final_args(target)
        else:
            out = prep.views[launch.value]
            final_args = (self._dummy, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            flags = dict(OUTPUT_PASS=False, TRANSFER=0, HDR=True, SNORM=False, OUT_CHANNELS=3)
        triton_loader.launchers("triton").conv3x3_kernel[grid](
            a,
            b,
            weight,
            bias,
            out,
            height,
            width,
            src_a.stored,
            src_b.stored,
            launch.a_tap_rows,
            launch.b_base,
            launch.b_tap_rows,
            launch.weight_cols,
            launch.out_stored,
            *final_args,
            HAS_B=len(sources) > 1,
            PARITY=launch.parity,
            UP_A=src_a.upsample,
            UP_B=src_b.upsample if len(sources) > 1 else False,
            RELU=launch.relu,
            POOL=launch.pool,
            FINAL=launch.final,
            BLOCK_M=config.block_m,
            BLOCK_N=block_n,
            BLOCK_K_A=block_a,
            BLOCK_K_B=block_b,
            TAPS_A=taps_a,
            TAPS_B=taps_b,
            num_warps=config.num_warps,
            num_stages=config.num_stages,
            **flags,
        )

    def _final_args(self, target: FinalTarget) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The final conv's image geometry arguments and output-pass flags."""
        mode = target.mode
        args = (
            target.scale if target.scale is not None else self._dummy,
            target.offset,
            target.pixel_stride,
            target.row_stride,
            target.keep_y,
            target.keep_x,
            target.keep_h,
            target.keep_w,
            target.dst_y,
            target.dst_x,
        )
        flags = dict(
            OUTPUT_PASS=mode is not None,
            TRANSFER=transfer_id(mode.transfer) if mode is not None else 0,
            HDR=bool(mode.hdr) if mode is not None else True,
            SNORM=bool(mode.snorm) if mode is not None else False,
            OUT_CHANNELS=target.channels,
        )
        return args, flags

    def run(self, x: np.ndarray) -> np.ndarray:
        """Network output ``[3, H, W]`` float32 of ``x [C_in, H, W]`` (host arrays)."""
        self._check_open()
        x = check_network_input(x, self.input_channels, self.alignment)
        torch = self._torch
        height, width = x.shape[1:]
        prep = self.prepare(height, width)
        self.last_engine = self.engine
        inp = self.input_view(prep, height, width)
        host = torch.from_numpy(x).permute(1, 2, 0)
        inp[..., : self.input_channels].copy_(host.to(self.device, non_blocking=False))
        inp[..., self.input_channels :].zero_()
        out = self.forward(inp, prep=prep)
        return np.ascontiguousarray(out.permute(2, 0, 1).cpu().numpy(), dtype=np.float32)

    # ------------------------------------------------------------------ introspection

    def kernel_names(self) -> dict[str, str]:
        """Layer -> kernel description (tile per layer for the largest prepared shape)."""
        prep = next(reversed(self._prepared.values())) if self._prepared else None
        return kernel_report.kernel_names(self, prep, self.last_engine or self.engine)

    def info(self) -> ExecutorInfo:
        """Backend ``'cuda'``, the GPU, precision and the kernel per layer (of the engine
        that ran the last frame: ``cudnn, while Triton compiles`` on a bridge frame)."""
        prep = next(reversed(self._prepared.values())) if self._prepared else None
        state = kernel_report.info_state(self, prep)
        if self._info is None or self._info[0] != state:  # else the same answer as last time
            engine = self.last_engine or self.engine
            if engine != self.engine:
                engine = f"{engine}, while Triton compiles"
            engine += f" (fallback: {self.fallback})" if self.fallback else ""
            names = kernel_report.kernel_names(self, prep, self.last_engine or self.engine)
            info = ExecutorInfo(
                "cuda", f"{self.device_name} [{engine}]", self.precision, MappingProxyType(names)
            )
            self._info = (state, info)
        return self._info[1]

    def resources(self) -> ExecutorResources:
        """Prepared sizes, live buffers (slots and weights) and their bytes."""
        weights = [t for pair in self._weights.values() for t in pair]
        count = sum(len(p.slots) for p in self._prepared.values()) + len(weights)
        size = sum(p.byte_size for p in self._prepared.values())
        size += sum(int(t.numel() * t.element_size()) for t in weights)
        return ExecutorResources(tuple(self._prepared), count, size)

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

    def weight_tensors(self) -> tuple[Any, ...]:
        """The device tensors of the packed weights (kept alive by captured graphs)."""
        pairs = list(self._weights.values())
        if self._torch_net is not None:
            pairs += self._torch_net.weights.values()
        return tuple(t for pair in pairs for t in pair)

    def close(self) -> None:
        """Release every buffer; later calls raise `InvalidOperationError`."""
        self._prepared.clear()
        self._weights = {}
        self._torch_net = None
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidOperationError("the cuda executor is closed")
