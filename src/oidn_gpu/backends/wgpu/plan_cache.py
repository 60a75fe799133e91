"""Per-shape GPU plans of one executor, in an LRU whose evicted plans wait for the queue.

For each input shape ``(height, width)`` a `ShapePlan` holds what executing the
network at that size needs beyond the weights: `graph.plan.plan` resolves
shapes and activation slots (values share a slot buffer when their lifetimes do
not overlap), then the slot buffers, per-step params uniforms and bind groups
are created once. `ShapePlanCache` keeps ``size`` plans; an evicted plan goes
through `DeferredRelease`, so it is destroyed only after the GPU finished every
command submitted before its eviction (work recorded with it may still be in
flight).

Tensor layout on the GPU ("blocked HWC", `kernels.weights`): value ``[C, H, W]``
is stored as ``[H, W, ceil(C/4)*4]`` in fp16 or fp32, zero padded lanes; the
network output (3 channels) is always fp32.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oidn_gpu.backends.gpu_device import STORAGE_USAGE, BufferUsage, DeferredRelease, GpuDevice
from oidn_gpu.backends.lru import LruCache
from oidn_gpu.backends.wgpu.nodes import Node
from oidn_gpu.backends.wgpu.pipeline_cache import PipelineCache
from oidn_gpu.backends.wgpu.resources import BUFFER, ResourceTracker
from oidn_gpu.errors import (
    InvalidArgumentError,
    InvalidOperationError,
    OutOfMemoryError,
    UnsupportedDeviceError,
)
from oidn_gpu.graph import ir
from oidn_gpu.graph.plan import Plan, Shape, size_alignment
from oidn_gpu.graph.plan import plan as make_plan
from oidn_gpu.kernels.spec import Kernel, Precision, blocks

# Input-pack / output-unpack bind groups a plan keeps for caller buffers.
IO_GROUP_CACHE_SIZE = 16


@dataclass
class Step:
    """One dispatch of a shape plan."""

    node: Node
    bind_group: Any
    grid: tuple[int, int, int]
    flops: float


@dataclass
class ShapePlan:
    """GPU resources of one input shape."""

    height: int
    width: int
    plan: Plan
    slots: list[Any]
    steps: list[Step]
    buffers: list[Any] = field(default_factory=list)  # everything to destroy with the plan
    input_buffer: Any = None
    output_buffer: Any = None
    dense_input: Any = None  # `ShapePlanCache.dense_input_buffer`
    io_groups: dict[tuple[str, int, int], Any] = field(default_factory=dict)
    io_params: dict[str, Any] = field(default_factory=dict)


class ShapePlanCache:
    """The LRU of `ShapePlan`s of one executor.

    Args:
        device: the executor's device.
        graph: the fused graph the nodes run.
        nodes: one per graph node, with kernels and uploaded weights.
        precision: activation precision (the network output is fp32).
        pipelines: the device's pipeline cache.
        shader_checks: passed to the pipeline cache.
        resources: the executor's tracker; every buffer made here is tracked there.
        size: how many plans to keep.
    """

    def __init__(
        self,
        device: GpuDevice,
        graph: ir.Graph,
        nodes: list[Node],
        *,
        precision: Precision,
        pipelines: PipelineCache,
        shader_checks: bool | None,
        resources: ResourceTracker,
        size: int,
    ) -> None:
        self._device = device
        self._graph = graph
        self._nodes = nodes
        self._precision = precision
        self._pipelines = pipelines
        self._shader_checks = shader_checks
        self._resources = resources
        self.alignment = size_alignment(graph)
        self._retired: DeferredRelease[ShapePlan] = DeferredRelease(device, self._destroy)
        self._plans: LruCache[tuple[int, int], ShapePlan] = LruCache(size, self._retired.retire)

    @property
    def size(self) -> int:
        """How many plans are kept."""
        return self._plans.size

    # ------------------------------------------------------------------ LRU

    def get(self, height: int, width: int) -> ShapePlan:
        """The plan of ``height x width``, created (and the oldest evicted) if needed."""
        self._retired.collect()
        key = (int(height), int(width))
        shape_plan = self._plans.get(key)
        if shape_plan is None:
            shape_plan = self._create(*key)
            self._plans.put(key, shape_plan)
        return shape_plan

    @property
    def shapes(self) -> tuple[tuple[int, int], ...]:
        return tuple(self._plans.keys())

    def pending(self) -> int:
        """Evicted plans still waiting for their queue fence."""
        self._retired.collect()
        return len(self._retired)

    def close(self) -> None:
        """Destroy every plan once the queue is idle."""
        for shape_plan in self._plans.clear():
            self._retired.retire(shape_plan)  # commands recorded with it may be in flight
        self._retired.release_all()

    def _destroy(self, shape_plan: ShapePlan) -> None:
        for buffer in shape_plan.buffers:
            self._resources.release(buffer)
        shape_plan.buffers = []
        shape_plan.dense_input = None
        shape_plan.steps = []
        shape_plan.io_groups.clear()
        shape_plan.io_params.clear()

    # ------------------------------------------------------------------ creation

    def _track(self, buffer: Any) -> Any:
        return self._resources.track(BUFFER, buffer)

    def _value_bytes(self, name: str, shape: Shape) -> int:
        itemsize = 4 if name == self._graph.output else self._precision.itemsize
        return shape.height * shape.width * blocks(shape.channels) * 4 * itemsize

    def _create(self, height: int, width: int) -> ShapePlan:
        if height % self.alignment or width % self.alignment or height < 1 or width < 1:
            raise InvalidArgumentError(
                f"network size {width}x{height} must be positive multiples of {self.alignment}"
            )
        plan = make_plan(self._graph, height, width, value_bytes=self._value_bytes)
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
            for index, byte_size in enumerate(plan.slot_bytes):
                buffer = self._track(
                    self._device.create_buffer(
                        f"oidn/activation/{label}/{index}", byte_size, STORAGE_USAGE
                    )
                )
                created.append(buffer)
                slots.append(buffer)
            steps = [
                self._create_step(node, step, plan, slots, created, label)
                for node, step in zip(self._nodes, plan.steps, strict=True)
            ]
            return ShapePlan(
                height=height,
                width=width,
                plan=plan,
                slots=slots,
                steps=steps,
                buffers=created,
                input_buffer=slots[plan.slot_of[self._graph.input]],
                output_buffer=slots[plan.slot_of[self._graph.output]],
            )
        except BaseException:
            for buffer in created:
                self._resources.release(buffer)
            raise

    def _create_step(
        self, node: Node, step: Any, plan: Plan, slots: list[Any], created: list[Any], label: str
    ) -> Step:
        kernel = node.kernel
        out = step.output_shape
        gx, gy, gz = (int(g) for g in kernel.grid(out.channels, out.height, out.width))
        grid = (gx, gy, gz)
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
        pipeline = self._pipelines.get(kernel, shader_checks=self._shader_checks)
        bind_group = self._device.create_bind_group(f"oidn/{node.name}/{label}", pipeline, buffers)
        flops = node.flops_per_out_pixel * out.height * out.width
        return Step(node=node, bind_group=bind_group, grid=grid, flops=flops)

    # ------------------------------------------------------------------ packing passes

    def dense_input_buffer(self, shape_plan: ShapePlan, channels: int) -> Any:
        """The plan's staging buffer for a dense ``[H, W, channels]`` float32 network input
        (made on first use, destroyed with the plan)."""
        if shape_plan.dense_input is None:
            h, w = shape_plan.height, shape_plan.width
            buffer = self._track(
                self._device.create_buffer(
                    f"oidn/input/dense/{h}x{w}", h * w * channels * 4, STORAGE_USAGE
                )
            )
            shape_plan.buffers.append(buffer)
            shape_plan.dense_input = buffer
        return shape_plan.dense_input

    def io_bind_group(self, shape_plan: ShapePlan, kernel: Kernel, buffers: list[Any]) -> Any:
        """The bind group of an input-pack / output-unpack pass from ``buffers[0]`` to
        ``buffers[1]`` at the plan's size (kept for a few caller buffer pairs)."""
        h, w = shape_plan.height, shape_plan.width
        key = (kernel.key, id(buffers[0]), id(buffers[1]))
        cached = shape_plan.io_groups.get(key)
        if cached is not None:
            return cached[0]
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
        if len(shape_plan.io_groups) >= IO_GROUP_CACHE_SIZE:  # caller buffers change
            shape_plan.io_groups.clear()
        pipeline = self._pipelines.get(kernel, shader_checks=self._shader_checks)
        group = self._device.create_bind_group(
            f"oidn/{kernel.name}/{h}x{w}", pipeline, [*buffers, params]
        )
        shape_plan.io_groups[key] = (group, buffers)  # keep the buffers alive with the key
        return group
