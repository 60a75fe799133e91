"""`WgpuExecutor`: runs an OIDN U-Net on a wgpu device (the ``NetworkExecutor`` protocol).

Life of an executor (after oidn-web's ``NativeUNetExecutor``):

1. Construction: resolve precision (``auto`` = fp16 when the device has
   ``shader-f16``), optimize the graph (conv+pool and upsample+concat+conv
   fusion), choose one kernel per node (shape-independent), pack every conv's
   weights once in the layout its kernel reads, and upload them.
2. Compiling: the network's kernels are handed to the device's shared
   `PipelineCache` as soon as they are chosen, so they compile on its threads while
   the weights are packed and uploaded; ``prepare=True`` then waits for them and for
   the input-pack and output-unpack kernels (`prepare()`: later executions never
   compile), ``prepare="background"`` returns at once (an execution waits only for the
   kernels it dispatches: what the denoise pipeline asks for, since a fresh
   process's first image waits for the compiles), ``prepare=False`` compiles each
   kernel on the thread that first needs it.
3. Per input shape, a `plan_cache.ShapePlan` (slot buffers, per-step params
   uniforms and bind groups, created once) in an LRU of ``shape_cache_size``
   entries whose evicted plans are destroyed only after the queue finished.
4. Execution: `run` (host arrays: the dense input is uploaded and packed on the
   GPU), `execute_buffers` (caller-owned dense GPU buffers, packed the same way),
   `execute_packed` / `encode` (an already packed input, no host round trip; the
   denoise pipeline records input pass, network and output pass of a tile into
   one command encoder).
5. `profile_next_execution()`: the next execution writes GPU timestamps around
   each layer's compute pass; `last_profile()` returns per-layer times
   (`profiling.Profiler`), led by an ``input-pack`` entry when the execution
   packed a dense input.
6. `close()`: releases every buffer and query set (idempotent);
   `resources()` is then empty.

Tensor layout on the GPU ("blocked HWC", `kernels.weights`): value ``[C, H, W]``
is stored as ``[H, W, ceil(C/4)*4]`` in fp16 or fp32, zero padded lanes. The
network input uses the executor precision; the network output (3 channels)
is always fp32, i.e. one ``vec4<f32>`` per pixel (RGB + a zero lane).

The executor talks to the GPU only through the `GpuDevice` interface, so the
recorder's `RecordingDevice` stands in for a GPU with no second code path. Its
parts: `nodes` (kernels and packed weights), `plan_cache` (per-shape plans),
`profiling` (timestamps).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from oidn_gpu.backends.base import (
    ExecutorBase,
    ExecutorInfo,
    ExecutorResources,
    check_network_input,
)
from oidn_gpu.backends.gpu_device import CommandEncoder, GpuDevice
from oidn_gpu.backends.phases import timed_phase
from oidn_gpu.backends.wgpu import kernel_choice, nodes
from oidn_gpu.backends.wgpu.device import open_device, shader_checks_forced
from oidn_gpu.backends.wgpu.options import WgpuOptions
from oidn_gpu.backends.wgpu.pipeline_cache import pipeline_cache
from oidn_gpu.backends.wgpu.plan_cache import ShapePlan, ShapePlanCache
from oidn_gpu.backends.wgpu.profiling import ExecutionProfile, LayerTiming, Profiler, TimedLayer
from oidn_gpu.backends.wgpu.resources import BUFFER, ResourceTracker
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.graph import passes as graph_passes
from oidn_gpu.graph.plan import size_alignment
from oidn_gpu.kernels import conv_spatial, io_passes, select
from oidn_gpu.kernels.gemm import GemmOptions, default_options
from oidn_gpu.kernels.spec import Kernel, Precision

DEFAULT_SHAPE_CACHE_SIZE = 2
PREPARE_IN_BACKGROUND = "background"  # the ``prepare`` setting that does not wait
_LOG = logging.getLogger("oidn_gpu.wgpu")
# The profile's name of the pass that packs a dense input (`run`, `execute_buffers`).
INPUT_PACK = "input-pack"
OUTPUT_UNPACK = "output-unpack"  # `execute_buffers` into a caller's dense output
# The network output: one vec4<f32> per pixel (RGB and a zero lane).
OUTPUT_PIXEL_BYTES = 16


@dataclass(frozen=True)
class WgpuExecutorInfo(ExecutorInfo):
    """`ExecutorInfo` plus what the wgpu backend adds (`WgpuExecutor.info`)."""

    adapter_type: str = ""
    backend_type: str = ""
    kernel: str = "auto"
    trusted: bool = False
    features: tuple[str, ...] = ()
    shape_cache_size: int = DEFAULT_SHAPE_CACHE_SIZE
    model: str | None = None
    # layer -> why the requested (or automatic) kernel was replaced by the one that runs
    fallbacks: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class WgpuResources(ExecutorResources):
    """`ExecutorResources` plus live GPU objects by kind and pending deferred work.

    ``pending_operations`` counts retired plans waiting for their queue fence and
    profile readbacks not yet resolved.
    """

    counts: tuple[tuple[str, int], ...] = ()
    pending_operations: int = 0

    def count(self, kind: str) -> int:
        return dict(self.counts).get(kind, 0)

    @property
    def is_empty(self) -> bool:
        return self.buffer_count == 0 and not self.counts and self.pending_operations == 0


def resolve_precision(device: GpuDevice, precision: str | Precision) -> Precision:
    """``auto`` -> fp16 when the device has shader-f16, else fp32 (`select.select_precision`).

    Raises:
        InvalidArgumentError: unknown value.
        UnsupportedDeviceError: fp16 requested without shader-f16.
    """
    return select.select_precision(precision, kernel_choice.device_limits(device.capabilities))


def _check_prepare(prepare: Any) -> None:
    if prepare not in (True, False, PREPARE_IN_BACKGROUND):
        raise InvalidArgumentError(
            f"prepare must be True, False or {PREPARE_IN_BACKGROUND!r}, got {prepare!r}"
        )


def _checked_arguments(
    options: WgpuOptions | None, device: Any, loose: dict[str, Any], shape_cache_size: int
) -> tuple[WgpuOptions, Any]:
    """``(options, device)`` of `WgpuExecutor`: the typed options given, else those made (and
    checked, once) from its keywords; the device stays apart (a `GpuDevice` is no option)."""
    if not isinstance(shape_cache_size, int) or shape_cache_size < 1:
        raise InvalidArgumentError(
            f"shape_cache_size must be a positive int, got {shape_cache_size!r}"
        )
    if options is None:
        return WgpuOptions(**{k: v for k, v in loose.items() if v is not None}), device
    if device is not None or any(v is not None for v in loose.values()):
        raise InvalidArgumentError(
            "WgpuExecutor takes options= or the keywords device, precision, kernel, gemm "
            "and conv_pool, not both"
        )
    return options, options.device


class WgpuExecutor(ExecutorBase):
    """Runs one validated OIDN model on a wgpu device.

    Args:
        model: a `model.unet.ValidatedModel` (``graph``, ``convs``, ``input_channels``).
        options: the backend's checked options (`backend.WgpuOptions`: device, precision,
            kernel, gemm, conv_pool); without them the five keywords of those names
            make them (and are checked there), else those keywords must be left unset.
        device: a `GpuDevice`, a ``wgpu.GPUDevice``, or None to open the default device.
        precision: ``"auto"`` (fp16 when shader-f16 exists), ``"fp16"`` or ``"fp32"``.
        kernel: convolution kernel family, ``"auto"`` or one of `kernel_choice.kernel_names()`.
        gemm: implicit-GEMM tuning options (a mapping or the kernels' options object).
        shape_cache_size: how many per-shape plans to keep (at least 1).
        shader_checks: True builds every kernel with wgpu's runtime checks, False trusts
            kernels marked trusted, None follows ``OIDN_GPU_SHADER_CHECKS``.
        conv_pool, decoder: enable the fusion passes (for tests and experiments).
        prepare: True compiles every kernel now; ``"background"`` starts compiling the
            network's kernels on the device's compile threads and returns (executions
            wait for the kernels they dispatch); False compiles each kernel when first
            used (or by `prepare()`).
        accumulation: how every fp16 convolution sums (``"f32"``, ``"f16-chains"``,
            ``"f16-partials"``, ... `kernels.gemm.Accumulation`) over ``gemm``'s
            per-layer accumulations; None keeps them.

    Attributes:
        precision: the resolved precision.
        gemm: the GEMM options in effect (the caller's, else the device's defaults,
            `kernels.gemm.default_options`), resolved for the precision (``shared_layout``
            ``None`` becomes ``padded-input`` in fp16, else ``padded``, as oidn-web's
            ``executor.gemm``); frozen. The kernels' headers name the options as given.
        subgroups_available: whether the device has the ``subgroup`` feature (the
            subgroup conv runs only then).
        max_spatial_input_blocks: the most input vec4 blocks the spatial conv's halo
            patch holds on this device at this precision (larger layers fall back).
        kernels, weight_buffers: the kernel of every node and the uploaded weights.
    """

    def __init__(
        self,
        model: Any,
        *,
        options: WgpuOptions | None = None,
        device: Any = None,
        precision: str | None = None,
        kernel: str | None = None,
        gemm: Any = None,
        shape_cache_size: int = DEFAULT_SHAPE_CACHE_SIZE,
        shader_checks: bool | None = None,
        conv_pool: bool | None = None,
        decoder: bool = True,
        prepare: bool | str = True,
        accumulation: str | None = None,
    ) -> None:
        loose = {
            "precision": precision,
            "kernel": kernel,
            "gemm": gemm,
            "conv_pool": conv_pool,
            "accumulation": accumulation,
        }
        options, device = _checked_arguments(options, device, loose, shape_cache_size)
        _check_prepare(prepare)
        self.options = options
        # Whether kernels are handed to the compile threads ahead of use (else each
        # compiles on the thread that first needs it, in a fixed order: the recorder's).
        self.compiles_ahead = bool(prepare)
        self._closed = True  # until construction succeeds
        with timed_phase(_LOG, "open the device"):
            self._device = open_device(device)
        self._owns_device = self._device.owned and device is None
        self.precision = resolve_precision(self._device, options.precision)
        self.kernel_setting = options.kernel
        limits = kernel_choice.device_limits(self._device.capabilities)
        # The GEMM options the kernels are made with: the caller's, or this device's defaults.
        self._gemm = options.gemm or default_options(limits, self.precision)
        if options.accumulation is not None:  # how every fp16 layer sums, over the options'
            self._gemm = replace(
                self._gemm,
                accumulation=options.accumulation,
                input_accumulation=None,
                final_accumulation=None,
            )
        # The same, resolved for this precision (as oidn-web's `executor.gemm`); frozen.
        self.gemm: GemmOptions = self._gemm.resolved(self.precision)
        # What the kernel choice knows of the device (read-only)
        self.subgroups_available = bool(limits.subgroups)
        self.max_spatial_input_blocks = conv_spatial.max_input_blocks(self.precision, limits)
        self.shape_cache_size = shape_cache_size
        self.shader_checks = shader_checks
        self._model = model
        self._cache = pipeline_cache(self._device)
        self._resources = ResourceTracker()
        self._profiler = Profiler(self._device, self._resources)
        self._io_kernels: dict[str, Kernel] = {}
        # The conv kernels read each decoder source separately, with its own vec4
        # block padding (and the weights are packed per source the same way), so
        # sources need no channel alignment.
        self.graph = graph_passes.optimize(
            model.graph, conv_pool=options.conv_pool, decoder=decoder, channel_align=1
        )
        self.input_channels = int(model.graph.input_channels)
        self.output_channels = int(self.graph.output_channels)
        self._alignment = size_alignment(self.graph)
        self._nodes: list[nodes.Node] = []
        self._plans: ShapePlanCache | None = None
        self._closed = False
        try:
            self._build(prepare)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ construction

    def _build(self, prepare: bool | str) -> None:
        """Choose the kernels (handed to the compile threads unless ``prepare`` is False),
        upload the weights, make the shape plans' cache; with ``prepare=True`` compile the
        rest and wait."""

        def compile_ahead(kernel: Kernel) -> None:
            self._cache.prepare([kernel], shader_checks=self.shader_checks, wait=False)

        # Each kernel compiles while the next ones are generated and the weights uploaded.
        with timed_phase(_LOG, "choose and generate the kernels"):
            self._nodes = nodes.build_nodes(
                self.graph,
                self._device.capabilities,
                precision=self.precision,
                kernel=self.kernel_setting,
                gemm=self._gemm,
                on_kernel=compile_ahead if prepare else None,
            )
        self._warn_forced_fallbacks(self.options.gemm)
        with timed_phase(_LOG, "pack and upload the weights"):
            nodes.upload_weights(
                self._nodes, self._model.convs, self._device, self.precision, self._track
            )
        self._plans = ShapePlanCache(
            self._device,
            self.graph,
            self._nodes,
            precision=self.precision,
            pipelines=self._cache,
            shader_checks=self.shader_checks,
            resources=self._resources,
            size=self.shape_cache_size,
        )
        if prepare is True:
            self.prepare()

    def _warn_forced_fallbacks(self, gemm: Any) -> None:
        """Warn when a kernel or GEMM options the caller asked for cannot run somewhere
        (`info().fallbacks` keeps the reasons)."""
        if self.kernel_setting == "auto" and gemm is None:
            return
        replaced = [f"{name}: {reason}" for name, reason in nodes.fallbacks(self._nodes).items()]
        if replaced:
            warnings.warn(
                f"kernel={self.kernel_setting!r} with the requested GEMM options does not run on "
                f"{len(replaced)} layer(s); they use other kernels: " + "; ".join(replaced),
                RuntimeWarning,
                stacklevel=3,
            )

    def _track(self, buffer: Any) -> Any:
        return self._resources.track(BUFFER, buffer)

    # ------------------------------------------------------------------ public API

    @property
    def device(self) -> GpuDevice:
        return self._device

    @property
    def model(self) -> Any:
        return self._model

    @property
    def pipeline_cache(self) -> Any:
        """The device's shared `PipelineCache` (the denoise pipeline compiles through it)."""
        return self._cache

    def network_flops(self, height: int, width: int) -> float:
        """Convolution FLOPs of one execution at ``height x width`` (multiply-add = 2)."""
        return sum(step.flops for step in self._shape_plan(height, width).steps)

    @property
    def kernels(self) -> tuple[Kernel, ...]:
        """Every shape-independent kernel of the network (one per node)."""
        return tuple(node.kernel for node in self._nodes)

    @property
    def weight_buffers(self) -> Mapping[str, nodes.WeightBuffers]:
        """The uploaded weights of every conv (by conv name): its weight and bias buffers
        and the layout its kernel reads. Empty once closed."""
        if self._closed:
            return MappingProxyType({})
        return MappingProxyType(nodes.weight_buffers(self._nodes))

    def prepare(self) -> None:
        """Compile every shape-independent kernel now, concurrently: the network's, and the
        input-pack and output-unpack kernels of `run` and `execute_buffers` (as oidn-web's
        ``prepare``), so that no execution compiles.

        Raises:
            ShaderCompileError: a kernel does not compile.
        """
        self._check_open()
        kernels = [*self.kernels, self._io_kernel(INPUT_PACK), self._io_kernel(OUTPUT_UNPACK)]
        self._cache.prepare(kernels, shader_checks=self.shader_checks)

    def info(self) -> WgpuExecutorInfo:
        caps = self._device.capabilities
        checks = self.shader_checks if self.shader_checks is not None else shader_checks_forced()
        return WgpuExecutorInfo(
            backend="wgpu",
            device=caps.adapter.device,
            precision=self.precision.value,
            kernels=MappingProxyType({n.name: n.kernel.key for n in self._nodes}),
            adapter_type=caps.adapter.adapter_type,
            backend_type=caps.adapter.backend_type,
            kernel=self.kernel_setting,
            trusted=any(k.trusted for k in self.kernels) and not checks,
            features=tuple(sorted(caps.features)),
            shape_cache_size=self.shape_cache_size,
            model=getattr(self._model, "name", None),
            fallbacks=MappingProxyType(nodes.fallbacks(self._nodes)),
        )

    def prewarm(self, shapes: Iterable[tuple[int, int]]) -> None:
        """Create the per-shape plans of ``(height, width)`` network sizes ahead of use.

        Only the last ``shape_cache_size`` shapes stay cached.
        """
        for height, width in shapes:
            self._shape_plan(int(height), int(width))

    def resources(self) -> WgpuResources:
        """Live GPU objects of this executor (weights included) and pending deferred work."""
        plans = self._plans
        retired = plans.pending() if plans is not None and not self._closed else 0
        pending = retired + self._profiler.pending
        snap = self._resources.snapshot(pending)
        return WgpuResources(
            shapes=plans.shapes if plans is not None else (),
            buffer_count=snap.count(BUFFER),
            byte_size=snap.byte_size,
            counts=snap.counts,
            pending_operations=pending,
        )

    def profile_next_execution(self) -> bool:
        """Time each layer of the next execution with GPU timestamps.

        Returns:
            False when the device has no ``timestamp-query`` feature (nothing happens).
        """
        self._check_open()
        return self._profiler.arm()

    def last_profile(self) -> ExecutionProfile | None:
        """The profile of the last profiled execution (waits for its timestamps)."""
        return self._profiler.last

    def run(self, x: np.ndarray) -> np.ndarray:
        """Run the network on a host tensor and wait for the result.

        Args:
            x: ``[C_in, H, W]`` float32 network input, H and W multiples of 16.

        Returns:
            ``[3, H, W]`` float32.

        Holds the device's queue lock (`GpuDevice.queue_lock`): threads take turns.
        """
        with self._device.queue_lock:
            return self._run(x)

    def _run(self, x: np.ndarray) -> np.ndarray:
        self._check_open()
        x = check_network_input(x, self.input_channels, self._alignment)
        height, width = int(x.shape[1]), int(x.shape[2])
        shape_plan = self._shape_plan(height, width)
        assert self._plans is not None
        # The dense [H, W, C] float32 input is packed on the GPU (the profile's input-pack).
        dense = self._plans.dense_input_buffer(shape_plan, self.input_channels)
        self._device.write_buffer(dense, 0, np.ascontiguousarray(x.transpose(1, 2, 0)))
        encoder = self._device.create_command_encoder(f"oidn/network/{height}x{width}")
        self._encode(encoder, shape_plan, pack_from=dense)
        self._device.submit([encoder.finish()])
        return self.read_output(height, width)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.run(x)

    # -- GPU-buffer execution (no host round trip) -------------------------------------

    def packed_input_buffer(self, height: int, width: int) -> Any:
        """The network input buffer of a shape (blocked HWC, executor precision).

        Write the packed tensor into it, then call `execute_packed` or `encode`.
        """
        return self._shape_plan(height, width).input_buffer

    def output_buffer(self, height: int, width: int) -> Any:
        """The network output buffer of a shape: ``[H, W, 4]`` float32 (RGB, zero lane)."""
        return self._shape_plan(height, width).output_buffer

    def execute_packed(self, height: int, width: int, *, output: Any = None) -> Any:
        """Run the network on the shape's packed input buffer; submit without waiting.

        Args:
            output: optional caller-owned buffer (COPY_DST, at least ``H*W*16`` bytes) that
                receives the ``[H, W, 4]`` float32 output.

        Returns:
            ``output`` if given, else the executor-owned output buffer (valid until the
            next execution of this shape).
        """
        encoder = self._device.create_command_encoder(f"oidn/network/{height}x{width}")
        result = self.encode(encoder, height, width)
        if output is not None:
            byte_size = height * width * OUTPUT_PIXEL_BYTES
            self._check_buffer(output, byte_size, "output")
            encoder.copy_buffer(result, 0, output, 0, byte_size)
            result = output
        self._device.submit([encoder.finish()])
        return result

    def execute_buffers(self, input: Any, height: int, width: int, *, output: Any = None) -> Any:
        """Run the network on a caller-owned GPU buffer; submit without waiting.

        Args:
            input: dense ``[H, W, C_in]`` float32 network input (STORAGE usage).
            height, width: network size (multiples of 16).
            output: optional caller-owned buffer (STORAGE usage) receiving the dense
                ``[H, W, 3]`` float32 output.

        Returns:
            ``output`` if given, else the executor-owned blocked output buffer
            (``[H, W, 4]`` float32, valid until the next execution of this shape).
        """
        self._check_open()
        self._check_buffer(input, height * width * self.input_channels * 4, "input")
        shape_plan = self._shape_plan(height, width)
        encoder = self._device.create_command_encoder(f"oidn/network/{height}x{width}")
        result = self._encode(encoder, shape_plan, pack_from=input)
        if output is not None:
            self._check_buffer(output, height * width * self.output_channels * 4, "output")
            self._encode_io(encoder, shape_plan, OUTPUT_UNPACK, [result, output])
            result = output
        self._device.submit([encoder.finish()])
        return result

    def read_output(self, height: int, width: int) -> np.ndarray:
        """Read a shape's output buffer back: ``[3, H, W]`` float32 (waits for the GPU)."""
        shape_plan = self._shape_plan(height, width)
        byte_size = height * width * OUTPUT_PIXEL_BYTES
        raw = self._device.read_buffer(shape_plan.output_buffer, 0, byte_size)
        rgba = np.frombuffer(raw, np.float32).reshape(height, width, 4)
        return np.ascontiguousarray(rgba[:, :, : self.output_channels].transpose(2, 0, 1))

    def encode(self, encoder: CommandEncoder, height: int, width: int) -> Any:
        """Record the network of one shape into ``encoder``; returns the output buffer.

        The caller has filled the shape's `packed_input_buffer` (in this encoder or
        earlier) and submits the encoder.
        """
        self._check_open()
        return self._encode(encoder, self._shape_plan(height, width))

    def _encode(self, encoder: CommandEncoder, shape_plan: ShapePlan, pack_from: Any = None) -> Any:
        """Record the network of ``shape_plan``, after packing the dense buffer ``pack_from``
        into its input when given (a profiled layer named ``input-pack``)."""
        steps = shape_plan.steps
        timed = [TimedLayer(s.node.name, s.node.kernel.name, s.flops) for s in steps]
        if pack_from is not None:
            timed.insert(0, TimedLayer(INPUT_PACK, INPUT_PACK, 0.0))
        timestamps = self._profiler.begin(shape_plan.height, shape_plan.width, timed)
        stamps = iter(timestamps) if timestamps is not None else None
        if pack_from is not None:
            self._encode_io(
                encoder,
                shape_plan,
                INPUT_PACK,
                [pack_from, shape_plan.input_buffer],
                timestamps=next(stamps) if stamps is not None else None,
            )
        for step in steps:
            pipeline = self._cache.get(step.node.kernel, shader_checks=self.shader_checks)
            encoder.dispatch(
                pipeline,
                step.bind_group,
                step.grid,
                label=f"oidn/{step.node.name}",
                timestamps=next(stamps) if stamps is not None else None,
            )
        if timestamps is not None:
            self._profiler.finish(encoder)
        return shape_plan.output_buffer

    def close(self) -> None:
        """Release every GPU object of this executor; idempotent."""
        with self._device.queue_lock:
            self._close()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._profiler.close()
        if self._plans is not None:
            self._plans.close()
        for node in self._nodes:
            node.weights = node.bias = None
        self._resources.release_all()
        if self._owns_device:
            self._cache.shutdown()  # no compile in flight on a destroyed device
            self._device.close()

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidOperationError("the wgpu executor is closed")

    def _check_buffer(self, buffer: Any, byte_size: int, what: str) -> None:
        size = int(getattr(buffer, "size", 0))
        if size < byte_size:
            raise InvalidArgumentError(
                f"{what} buffer has {size} bytes; expected at least {byte_size}"
            )

    def _shape_plan(self, height: int, width: int) -> ShapePlan:
        self._check_open()
        assert self._plans is not None  # made by the constructor
        return self._plans.get(height, width)

    def _io_kernel(self, name: str) -> Kernel:
        """The input-pack or output-unpack kernel of this executor (generated once)."""
        kernel = self._io_kernels.get(name)
        if kernel is None:
            if name == INPUT_PACK:
                spec = io_passes.PackSpec(self.input_channels, self.precision)
                kernel = io_passes.generate_input_pack(spec)
            else:
                spec = io_passes.PackSpec(self.output_channels, Precision.FP32)
                kernel = io_passes.generate_output_unpack(spec)
            self._io_kernels[name] = kernel
        return kernel

    def _encode_io(
        self,
        encoder: CommandEncoder,
        shape_plan: ShapePlan,
        name: str,
        buffers: list[Any],
        timestamps: Any = None,
    ) -> None:
        """One input-pack / output-unpack dispatch between ``buffers[0]`` and ``buffers[1]``."""
        assert self._plans is not None
        kernel = self._io_kernel(name)
        group = self._plans.io_bind_group(shape_plan, kernel, buffers)
        pipeline = self._cache.get(kernel, shader_checks=self.shader_checks)
        grid = kernel.grid(0, shape_plan.height, shape_plan.width)
        encoder.dispatch(pipeline, group, grid, label=f"oidn/{kernel.name}", timestamps=timestamps)

    def __del__(self) -> None:  # best effort; close() is the contract
        try:
            if not getattr(self, "_closed", True):
                self.close()
        except Exception:
            pass


__all__ = [
    "ExecutionProfile",
    "LayerTiming",
    "WgpuExecutor",
    "WgpuExecutorInfo",
    "WgpuResources",
    "resolve_precision",
]
