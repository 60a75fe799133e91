"""`WgpuExecutor`: runs an OIDN U-Net on a wgpu device (the ``NetworkExecutor`` protocol).

Life of an executor (after oidn-web's ``NativeUNetExecutor``, seeds 000/001):

1. Construction: resolve precision (``auto`` = fp16 when the device has
   ``shader-f16``), optimize the graph (conv+pool and upsample+concat+conv
   fusion), choose one kernel per node (shape-independent), pack every conv's
   weights once in the layout its kernel reads, and upload them.
2. `prepare()`: compile every kernel on the device's shared `PipelineCache`,
   concurrently. Later executions never compile.
3. Per input shape, a `_ShapePlan`: `graph.plan.plan` resolves shapes and
   activation slots (values share a slot buffer when their lifetimes do not
   overlap), then the slot buffers, per-step params uniforms and bind groups
   are created once. Plans live in an LRU of ``shape_cache_size`` entries; an
   evicted plan is destroyed only after a queue fence says the GPU finished
   every command submitted before the eviction (work recorded with it may
   still be in flight).
4. Execution: `run` (host arrays), `execute_packed` / `encode` (GPU buffers,
   no host round trip; the denoise pipeline records input pass, network and
   output pass of a tile into one command encoder).
5. `profile_next_execution()`: the next execution writes GPU timestamps around
   each layer's compute pass; `last_profile()` returns per-layer times.
6. `close()`: releases every buffer and query set (idempotent);
   `resources()` is then empty.

Tensor layout on the GPU ("blocked HWC", `kernels.weights`): value ``[C, H, W]``
is stored as ``[H, W, ceil(C/4)*4]`` in fp16 or fp32, zero padded lanes. The
network input uses the executor precision; the network output (3 channels)
is always fp32, i.e. one ``vec4<f32>`` per pixel (RGB + a zero lane).

The executor talks to the GPU only through `GpuDevice` methods, so a recording
device can stand in later.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Iterable, Mapping
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
from oidn_gpu.backends.wgpu import kernel_choice
from oidn_gpu.backends.wgpu.device import (
    STORAGE_USAGE,
    BufferUsage,
    Fence,
    GpuDevice,
    open_device,
    shader_checks_forced,
)
from oidn_gpu.backends.wgpu.pipelines import pipeline_cache
from oidn_gpu.backends.wgpu.resources import BUFFER, QUERY_SET, ResourceTracker
from oidn_gpu.errors import (
    InvalidArgumentError,
    InvalidOperationError,
    OutOfMemoryError,
    UnsupportedDeviceError,
)
from oidn_gpu.graph import ir
from oidn_gpu.graph import passes as graph_passes
from oidn_gpu.graph.plan import Plan, Shape, size_alignment
from oidn_gpu.graph.plan import plan as make_plan
from oidn_gpu.kernels import io_passes
from oidn_gpu.kernels.spec import Kernel, Precision, blocks

PRECISIONS = ("auto", "fp16", "fp32")
DEFAULT_SHAPE_CACHE_SIZE = 2
TIMESTAMP_BYTES = 8


@dataclass(frozen=True)
class LayerTiming:
    """GPU time of one layer (one compute pass) and its arithmetic."""

    name: str
    kernel: str
    elapsed_ms: float
    flops: float

    @property
    def gflops_per_s(self) -> float:
        return self.flops / (self.elapsed_ms * 1e6) if self.elapsed_ms > 0 else 0.0


@dataclass(frozen=True)
class ExecutionProfile:
    """Per-layer GPU timestamps of one execution."""

    height: int
    width: int
    total_ms: float
    layers: tuple[LayerTiming, ...]

    @property
    def flops(self) -> float:
        return sum(layer.flops for layer in self.layers)


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


@dataclass
class _Node:
    """One executable node: kernel, weights and what it reads."""

    name: str
    kind: str
    kernel: Kernel
    inputs: tuple[str, ...]
    conv: str | None
    flops_per_out_pixel: float
    spec: Any = None
    fallback_reason: str | None = None
    weights: Any = None
    bias: Any = None


@dataclass
class _Step:
    node: _Node
    bind_group: Any
    grid: tuple[int, int, int]
    flops: float


@dataclass
class _ShapePlan:
    """GPU resources of one input shape."""

    height: int
    width: int
    plan: Plan
    slots: list[Any]
    steps: list[_Step]
    buffers: list[Any] = field(default_factory=list)  # everything to destroy with the plan
    input_buffer: Any = None
    output_buffer: Any = None
    io_groups: dict[tuple[str, int, int], Any] = field(default_factory=dict)
    io_params: dict[str, Any] = field(default_factory=dict)
    fence: Fence | None = None


def resolve_precision(device: GpuDevice, precision: str) -> Precision:
    """``auto`` -> fp16 when the device has shader-f16, else fp32.

    Raises:
        InvalidArgumentError: unknown value.
        UnsupportedDeviceError: fp16 requested without shader-f16.
    """
    if isinstance(precision, Precision):
        precision = precision.value
    if precision not in PRECISIONS:
        raise InvalidArgumentError(
            f"unknown precision {precision!r}; expected 'auto', 'fp16' or 'fp32'"
        )
    has_f16 = device.capabilities.has_f16
    if precision == "fp16" and not has_f16:
        raise UnsupportedDeviceError(
            "fp16 precision needs the 'shader-f16' feature, which this device lacks; "
            "use precision='fp32' or 'auto'"
        )
    if precision == "auto":
        return Precision.FP16 if has_f16 else Precision.FP32
    return Precision(precision)


class WgpuExecutor(ExecutorBase):
    """Runs one validated OIDN model on a wgpu device.

    Args:
        model: a `model.unet.ValidatedModel` (``graph``, ``convs``, ``input_channels``).
        device: a `GpuDevice`, a ``wgpu.GPUDevice``, or None to open the default device.
        precision: ``"auto"`` (fp16 when shader-f16 exists), ``"fp16"`` or ``"fp32"``.
        kernel: convolution kernel family, ``"auto"`` or one of `kernel_choice.kernel_names()`.
        gemm: implicit-GEMM tuning options (a mapping or the kernels' options object).
        shape_cache_size: how many per-shape plans to keep (at least 1).
        shader_checks: True builds every kernel with wgpu's runtime checks, False trusts
            kernels marked trusted, None follows ``OIDN_GPU_SHADER_CHECKS``.
        conv_pool, decoder: enable the fusion passes (for tests and experiments).
        prepare: compile every kernel now (else on first use or `prepare()`).
    """

    def __init__(
        self,
        model: Any,
        *,
        device: Any = None,
        precision: str = "auto",
        kernel: str = "auto",
        gemm: Any = None,
        shape_cache_size: int = DEFAULT_SHAPE_CACHE_SIZE,
        shader_checks: bool | None = None,
        conv_pool: bool = True,
        decoder: bool = True,
        prepare: bool = True,
    ) -> None:
        if not isinstance(shape_cache_size, int) or shape_cache_size < 1:
            raise InvalidArgumentError(
                f"shape_cache_size must be a positive int, got {shape_cache_size!r}"
            )
        self._closed = True  # until construction succeeds
        self._device = open_device(device)
        self._owns_device = self._device.owned and device is None
        self.precision = resolve_precision(self._device, precision)
        self.kernel_setting = kernel_choice.validate_kernel(kernel)
        self.gemm = kernel_choice.validate_gemm(gemm)
        self.shape_cache_size = shape_cache_size
        self.shader_checks = shader_checks
        self._model = model
        self._cache = pipeline_cache(self._device)
        self._resources = ResourceTracker()
        self._plans: OrderedDict[tuple[int, int], _ShapePlan] = OrderedDict()
        self._retired: list[_ShapePlan] = []
        self._profile_next = False
        self._last_profile: ExecutionProfile | None = None
        self._pending_profile: tuple[Any, ...] | None = None
        self._io_kernels: dict[str, Kernel] = {}
        # The conv kernels read each decoder source separately, with its own vec4
        # block padding (and the weights are packed per source the same way), so
        # sources need no channel alignment.
        self.graph = graph_passes.optimize(
            model.graph, conv_pool=conv_pool, decoder=decoder, channel_align=1
        )
        self.input_channels = int(model.graph.input_channels)
        self.output_channels = int(self.graph.output_channels)
        self._alignment = size_alignment(self.graph)
        self._nodes: list[_Node] = []
        self._closed = False
        try:
            self._nodes = self._build_nodes()
            self._warn_forced_fallbacks(gemm)
            self._upload_weights()
            if prepare:
                self.prepare()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ construction

    def _build_nodes(self) -> list[_Node]:
        limits = kernel_choice.device_limits(self._device.capabilities)
        nodes: list[_Node] = []
        for node in self.graph.nodes:
            final = node.name == self.graph.output
            chosen = kernel_choice.kernel_for_node(
                self.graph,
                node,
                precision=self.precision,
                final=final,
                limits=limits,
                kernel=self.kernel_setting,
                gemm=self.gemm,
            )
            conv = kernel_choice.conv_of(node)
            flops = 0.0
            if conv is not None:
                flops = 2.0 * conv.in_channels * conv.out_channels * 9
                if isinstance(node, ir.ConvPool):
                    flops *= 4  # one pooled pixel covers four conv pixels
            nodes.append(
                _Node(
                    name=node.name,
                    kind=type(node).__name__,
                    kernel=chosen.kernel,
                    inputs=tuple(node.inputs),
                    conv=conv.name if conv is not None else None,
                    flops_per_out_pixel=flops,
                    spec=chosen.spec,
                    fallback_reason=chosen.fallback_reason,
                )
            )
        return nodes

    def _warn_forced_fallbacks(self, gemm: Any) -> None:
        """Warn when a kernel or GEMM options the caller asked for cannot run somewhere
        (`info().fallbacks` keeps the reasons)."""
        if self.kernel_setting == "auto" and gemm is None:
            return
        replaced = [f"{name}: {reason}" for name, reason in self._fallbacks().items()]
        if replaced:
            warnings.warn(
                f"kernel={self.kernel_setting!r} with the requested GEMM options does not run on "
                f"{len(replaced)} layer(s); they use other kernels: " + "; ".join(replaced),
                RuntimeWarning,
                stacklevel=3,
            )

    def _fallbacks(self) -> dict[str, str]:
        """Layer -> why its kernel is not the one asked for (see `WgpuExecutorInfo`)."""
        return {n.name: n.fallback_reason for n in self._nodes if n.fallback_reason}

    def _upload_weights(self) -> None:
        convs = self._model.convs
        for node in self._nodes:
            if node.conv is None:
                continue
            weights = convs[node.conv]
            packed = kernel_choice.pack_conv(node.spec, node.kernel, weights.weight, weights.bias)
            node.weights = self._track(
                self._device.create_buffer_with_data(
                    f"oidn/{node.conv}/weights/{self.precision.value}",
                    packed.weights,
                    BufferUsage.STORAGE,
                )
            )
            node.bias = self._track(
                self._device.create_buffer_with_data(
                    f"oidn/{node.conv}/bias", packed.bias, BufferUsage.STORAGE
                )
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

    def prepare(self) -> None:
        """Compile every shape-independent kernel now, concurrently.

        Raises:
            ShaderCompileError: a kernel does not compile.
        """
        self._check_open()
        kernels = list(self.kernels)
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
            fallbacks=MappingProxyType(self._fallbacks()),
        )

    def prewarm(self, shapes: Iterable[tuple[int, int]]) -> None:
        """Create the per-shape plans of ``(height, width)`` network sizes ahead of use.

        Only the last ``shape_cache_size`` shapes stay cached.
        """
        for height, width in shapes:
            self._shape_plan(int(height), int(width))

    def resources(self) -> WgpuResources:
        """Live GPU objects of this executor (weights included) and pending deferred work."""
        if not self._closed:
            self._collect_retired()
        pending = len(self._retired) + (1 if self._pending_profile is not None else 0)
        snap = self._resources.snapshot(pending)
        return WgpuResources(
            shapes=tuple(self._plans.keys()),
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
        if not self._device.capabilities.has_timestamps:
            return False
        self._profile_next = True
        return True

    def last_profile(self) -> ExecutionProfile | None:
        """The profile of the last profiled execution (waits for its timestamps)."""
        self._resolve_profile()
        return self._last_profile

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
        packed = np.zeros(
            (height, width, blocks(self.input_channels) * 4), self.precision.numpy_dtype
        )
        packed[:, :, : self.input_channels] = x.transpose(1, 2, 0)
        self._device.write_buffer(shape_plan.input_buffer, 0, packed)
        encoder = self._device.create_command_encoder(f"oidn/network/{height}x{width}")
        self.encode(encoder, height, width)
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
            self._check_buffer(output, height * width * 16, "output")
            encoder.copy_buffer_to_buffer(result, 0, output, 0, height * width * 16)
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
        pack = self._io_kernel("input-pack")
        self._encode_io(encoder, shape_plan, pack, [input, shape_plan.input_buffer])
        result = self.encode(encoder, height, width)
        if output is not None:
            self._check_buffer(output, height * width * self.output_channels * 4, "output")
            unpack = self._io_kernel("output-unpack")
            self._encode_io(encoder, shape_plan, unpack, [result, output])
            result = output
        self._device.submit([encoder.finish()])
        return result

    def read_output(self, height: int, width: int) -> np.ndarray:
        """Read a shape's output buffer back: ``[3, H, W]`` float32 (waits for the GPU)."""
        shape_plan = self._shape_plan(height, width)
        raw = self._device.read_buffer(shape_plan.output_buffer, 0, height * width * 16)
        rgba = np.frombuffer(raw, np.float32).reshape(height, width, 4)
        return np.ascontiguousarray(rgba[:, :, : self.output_channels].transpose(2, 0, 1))

    def encode(self, encoder: Any, height: int, width: int) -> Any:
        """Record the network of one shape into ``encoder``; returns the output buffer.

        The caller has filled the shape's `packed_input_buffer` (in this encoder or
        earlier) and submits the encoder.
        """
        self._check_open()
        shape_plan = self._shape_plan(height, width)
        profile = self._profile_next
        self._profile_next = False
        if profile:
            self._resolve_profile()  # keep one profile in flight at most
            query_set, resolve, count = self._begin_profile(shape_plan)
        for index, step in enumerate(shape_plan.steps):
            writes = None
            if profile:
                writes = {
                    "query_set": query_set,
                    "beginning_of_pass_write_index": 2 * index,
                    "end_of_pass_write_index": 2 * index + 1,
                }
            if profile or index == 0:
                compute = encoder.begin_compute_pass(
                    label=f"oidn/{step.node.name}", timestamp_writes=writes
                )
            pipeline = self._cache.get(step.node.kernel, shader_checks=self.shader_checks)
            compute.set_pipeline(pipeline)
            compute.set_bind_group(0, step.bind_group)
            compute.dispatch_workgroups(*step.grid)
            if profile or index == len(shape_plan.steps) - 1:
                compute.end()
        if profile:
            encoder.resolve_query_set(query_set, 0, count, resolve, 0)
            self._pending_profile = (
                (shape_plan.height, shape_plan.width, list(shape_plan.steps)),
                query_set,
                resolve,
                count,
            )
        return shape_plan.output_buffer

    def close(self) -> None:
        """Release every GPU object of this executor; idempotent."""
        with self._device.queue_lock:
            self._close()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        pending, self._pending_profile = self._pending_profile, None
        if pending is not None:
            self._resources.release(pending[1])
            self._resources.release(pending[2])
        plans = list(self._plans.values()) + self._retired
        self._plans.clear()
        self._retired = []
        if plans:
            self._device.wait_idle()  # commands recorded with these plans may be in flight
        for shape_plan in plans:
            self._destroy_plan(shape_plan)
        for node in self._nodes:
            node.weights = node.bias = None
        self._resources.release_all()
        if self._owns_device:
            self._device.close()

    # ------------------------------------------------------------------ shape plans

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidOperationError("the wgpu executor is closed")

    def _check_buffer(self, buffer: Any, byte_size: int, what: str) -> None:
        size = int(getattr(buffer, "size", 0))
        if size < byte_size:
            raise InvalidArgumentError(
                f"{what} buffer has {size} bytes; expected at least {byte_size}"
            )

    def _value_bytes(self, name: str, shape: Shape) -> int:
        itemsize = 4 if name == self.graph.output else self.precision.itemsize
        return shape.height * shape.width * blocks(shape.channels) * 4 * itemsize

    def _shape_plan(self, height: int, width: int) -> _ShapePlan:
        self._check_open()
        self._collect_retired()
        key = (int(height), int(width))
        shape_plan = self._plans.get(key)
        if shape_plan is not None:
            self._plans.move_to_end(key)
            return shape_plan
        shape_plan = self._create_plan(*key)
        self._plans[key] = shape_plan
        while len(self._plans) > self.shape_cache_size:
            _, evicted = self._plans.popitem(last=False)
            self._retire(evicted)
        return shape_plan

    def _retire(self, shape_plan: _ShapePlan) -> None:
        """Destroy ``shape_plan`` once the queue has finished everything submitted so far."""
        shape_plan.fence = self._device.fence()
        self._retired.append(shape_plan)

    def _collect_retired(self) -> None:
        keep: list[_ShapePlan] = []
        for shape_plan in self._retired:
            if shape_plan.fence is not None and shape_plan.fence.is_done():
                self._destroy_plan(shape_plan)
            else:
                keep.append(shape_plan)
        self._retired = keep

    def _destroy_plan(self, shape_plan: _ShapePlan) -> None:
        for buffer in shape_plan.buffers:
            self._resources.release(buffer)
        shape_plan.buffers = []
        shape_plan.steps = []
        shape_plan.io_groups.clear()
        shape_plan.io_params.clear()

    def _create_plan(self, height: int, width: int) -> _ShapePlan:
        if height % self._alignment or width % self._alignment or height < 1 or width < 1:
            raise InvalidArgumentError(
                f"network size {width}x{height} must be positive multiples of {self._alignment}"
            )
        plan = make_plan(self.graph, height, width, value_bytes=self._value_bytes)
        max_binding = self._device.capabilities.max_storage_buffer_binding_size
        largest = max(plan.slot_bytes)
        if largest > max_binding:
            raise OutOfMemoryError(
                f"a {width}x{height} tile needs a {largest}-byte activation buffer but the "
                f"device binds at most {max_binding} bytes; use smaller tiles"
            )
        created: list[Any] = []
        try:
            label = f"{height}x{width}"
            slots = []
            for index, size in enumerate(plan.slot_bytes):
                buffer = self._track(
                    self._device.create_buffer(
                        f"oidn/activation/{label}/{index}", size, STORAGE_USAGE
                    )
                )
                created.append(buffer)
                slots.append(buffer)
            steps = []
            for node, step in zip(self._nodes, plan.steps, strict=True):
                steps.append(self._create_step(node, step, plan, slots, created, label))
            return _ShapePlan(
                height=height,
                width=width,
                plan=plan,
                slots=slots,
                steps=steps,
                buffers=created,
                input_buffer=slots[plan.slot_of[self.graph.input]],
                output_buffer=slots[plan.slot_of[self.graph.output]],
            )
        except BaseException:
            for buffer in created:
                self._resources.release(buffer)
            raise

    def _create_step(
        self, node: _Node, step: Any, plan: Plan, slots: list[Any], created: list[Any], label: str
    ) -> _Step:
        kernel = node.kernel
        out = step.output_shape
        grid = tuple(int(g) for g in kernel.grid(out.channels, out.height, out.width))
        limit = self._device.capabilities.max_compute_workgroups_per_dimension
        if max(grid) > limit:
            raise UnsupportedDeviceError(
                f"layer '{node.name}' needs a {grid} workgroup grid at {label} but the device "
                f"allows {limit} per dimension; use smaller tiles"
            )
        resources: dict[str, Any] = {"weights": node.weights, "bias": node.bias}
        for index, value in enumerate(node.inputs):
            resources[f"input{index}"] = slots[plan.slot_of[value]]
        if len(node.inputs) == 1:
            resources["input"] = resources["input0"]
        resources["output"] = slots[plan.slot_of[node.name]]
        if kernel.params is not None:
            params = self._track(
                self._device.create_buffer_with_data(
                    f"oidn/{node.name}/params/{label}",
                    kernel.pack_params(height=out.height, width=out.width),
                    BufferUsage.UNIFORM,
                )
            )
            created.append(params)
            resources["params"] = params
        buffers = []
        for binding in kernel.bindings:
            if resources.get(binding.name) is None:
                raise InvalidOperationError(
                    f"kernel {kernel.key} binds '{binding.name}', which the executor does not "
                    "provide for this node"
                )
            buffers.append(resources[binding.name])
        pipeline = self._cache.get(kernel, shader_checks=self.shader_checks)
        bind_group = self._device.create_bind_group(f"oidn/{node.name}/{label}", pipeline, buffers)
        flops = node.flops_per_out_pixel * out.height * out.width
        return _Step(node=node, bind_group=bind_group, grid=grid, flops=flops)

    # ------------------------------------------------------------------ packing passes

    def _io_kernel(self, name: str) -> Kernel:
        kernel = self._io_kernels.get(name)
        if kernel is None:

            if name == "input-pack":
                spec = io_passes.PackSpec(self.input_channels, self.precision)
                kernel = io_passes.generate_input_pack(spec)
            else:
                spec = io_passes.PackSpec(self.output_channels, Precision.FP32)
                kernel = io_passes.generate_output_unpack(spec)
            self._io_kernels[name] = kernel
        return kernel

    def _encode_io(
        self, encoder: Any, shape_plan: _ShapePlan, kernel: Kernel, buffers: list[Any]
    ) -> None:
        """One input-pack / output-unpack dispatch between ``buffers[0]`` and ``buffers[1]``."""
        pipeline = self._cache.get(kernel, shader_checks=self.shader_checks)
        h, w = shape_plan.height, shape_plan.width
        key = (kernel.key, id(buffers[0]), id(buffers[1]))
        group = shape_plan.io_groups.get(key)
        if group is None:
            params = shape_plan.io_params.get(kernel.key)
            if params is None:
                params = self._track(
                    self._device.create_buffer_with_data(
                        f"oidn/{kernel.name}/params/{h}x{w}",
                        kernel.pack_params(height=h, width=w),
                        BufferUsage.UNIFORM,
                    )
                )
                shape_plan.buffers.append(params)
                shape_plan.io_params[kernel.key] = params
            if len(shape_plan.io_groups) >= 16:  # caller buffers change: keep a few
                shape_plan.io_groups.clear()
            group = self._device.create_bind_group(
                f"oidn/{kernel.name}/{h}x{w}", pipeline, [*buffers, params]
            )
            shape_plan.io_groups[key] = (group, buffers)  # keep the buffers alive with the key
        compute = encoder.begin_compute_pass(label=f"oidn/{kernel.name}")
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, shape_plan.io_groups[key][0])
        compute.dispatch_workgroups(*kernel.grid(0, h, w))
        compute.end()

    # ------------------------------------------------------------------ profiling

    def _begin_profile(self, shape_plan: _ShapePlan) -> tuple[Any, Any, int]:
        count = 2 * len(shape_plan.steps)
        query_set = self._resources.track(
            QUERY_SET, self._device.create_query_set("oidn/profile", count)
        )
        resolve = self._track(
            self._device.create_buffer(
                "oidn/profile/resolve",
                count * TIMESTAMP_BYTES,
                BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC,
            )
        )
        return query_set, resolve, count

    def _resolve_profile(self) -> None:
        pending = self._pending_profile
        if pending is None:
            return
        self._pending_profile = None
        (height, width, steps), query_set, resolve, count = pending
        try:
            raw = self._device.read_buffer(resolve, 0, count * TIMESTAMP_BYTES)
        finally:
            self._resources.release(query_set)
            self._resources.release(resolve)
        ticks = np.frombuffer(raw, np.uint64).astype(np.int64)
        period = self._device.timestamp_period_ns
        layers = []
        for index, step in enumerate(steps):
            elapsed = max(0, int(ticks[2 * index + 1] - ticks[2 * index])) * period / 1e6
            layers.append(LayerTiming(step.node.name, step.node.kernel.name, elapsed, step.flops))
        total = sum(layer.elapsed_ms for layer in layers)
        self._last_profile = ExecutionProfile(height, width, total, tuple(layers))

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
