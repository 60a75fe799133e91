"""The execution planner: value shapes, lifetimes and activation slots for one image size.

`plan(graph, height, width)` resolves every value's ``[C, H, W]`` shape, the
index of the last step that reads it, and assigns each value an activation
*slot* (one buffer) so that buffers are reused once their value is dead.

Slot assignment (the oidn-web runtime's rule):

1. The graph input takes slot 0 before any step runs.
2. Steps run in graph order. Before step ``i`` allocates its output, every
   value whose last use is *before* ``i`` frees its slot. Inputs of step ``i``
   are still live while it runs, so a step's output never shares a slot with
   one of its inputs.
3. The output takes the smallest free slot whose size fits it (best fit),
   else a new slot sized exactly for it. Slot sizes are fixed at creation;
   slots never grow.
4. The graph output's last use is ``len(steps)``: it is never freed.

Invariants (checked by the property tests): no two values that are live at
the same time share a slot; every value fits its slot; ``peak_bytes`` (the sum
of the slot sizes, i.e. what an executor allocates) is at least the live bytes
at any step.

Byte sizes come from a ``value_bytes(name, shape)`` callback so backends can
plan their own storage (vec4-padded channels, fp16 activations, zero borders);
the default is fp32 ``C * H * W * 4``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.graph import ir

FP32_BYTES = 4


@dataclass(frozen=True)
class Shape:
    """Shape ``[C, H, W]`` of one activation."""

    channels: int
    height: int
    width: int

    @property
    def elements(self) -> int:
        """``C * H * W``."""
        return self.channels * self.height * self.width


@dataclass(frozen=True)
class Step:
    """One node of the plan with its resolved input and output shapes."""

    index: int
    node: ir.Node
    input_shapes: tuple[Shape, ...]
    output_shape: Shape


@dataclass(frozen=True)
class Plan:
    """Everything an executor needs to run ``graph`` at one size, before touching a device.

    Attributes:
        graph: the (usually optimized) graph.
        height: network input height in pixels.
        width: network input width in pixels.
        shapes: value name -> shape, the input included.
        steps: one per node, in execution order.
        last_use: value -> index of the last step reading it; the graph output
            gets ``len(steps)``, a value nothing reads gets its producer's index.
        slot_of: value -> slot index.
        slot_bytes: size of each slot in bytes.
        peak_bytes: ``sum(slot_bytes)``, the activation memory of one execution.
        value_bytes: value -> bytes it occupies in its slot.
    """

    graph: ir.Graph
    height: int
    width: int
    shapes: Mapping[str, Shape]
    steps: tuple[Step, ...]
    last_use: Mapping[str, int]
    slot_of: Mapping[str, int]
    slot_bytes: tuple[int, ...]
    peak_bytes: int
    value_bytes: Mapping[str, int]

    def values_in(self, slot: int) -> tuple[str, ...]:
        """Values assigned to ``slot``, in order of definition."""
        return tuple(name for name, s in self.slot_of.items() if s == slot)

    def defined_at(self, value: str) -> int:
        """Index of the step producing ``value``; -1 for the graph input."""
        if value == self.graph.input:
            return -1
        return self.graph.nodes.index(self.graph.node(value))

    def live_at(self, index: int) -> tuple[str, ...]:
        """Values live while step ``index`` runs: its inputs, its output and all still needed."""
        return tuple(
            name for name in self.slot_of if self.defined_at(name) <= index <= self.last_use[name]
        )


def fp32_value_bytes(name: str, shape: Shape) -> int:
    """Default storage size: dense fp32 ``C * H * W * 4``."""
    del name
    return shape.elements * FP32_BYTES


def pool_depth(graph: ir.Graph) -> int:
    """Deepest resolution level reached: +1 per pool, -1 per upsample along any path."""
    level = {graph.input: 0}
    for node in graph.nodes:
        if isinstance(node, ir.DecoderConv):
            level[node.name] = max(
                level.get(s.value, 0) - (1 if s.upsample else 0) for s in node.sources
            )
            continue
        source = max(level.get(value, 0) for value in node.inputs)
        if isinstance(node, (ir.Pool, ir.ConvPool)):
            source += 1
        elif isinstance(node, ir.Upsample):
            source -= 1
        level[node.name] = source
    return max(level.values())


def size_alignment(graph: ir.Graph) -> int:
    """Height and width must be multiples of this: ``2 ** pool_depth(graph)``."""
    return 2 ** pool_depth(graph)


def _check_size(graph: ir.Graph, height: int, width: int) -> None:
    align = size_alignment(graph)
    for label, size in (("height", height), ("width", width)):
        if not isinstance(size, numbers.Integral) or size <= 0 or size % align:
            raise InvalidArgumentError(
                f"network input {label} {size!r} must be a positive multiple of {align} "
                f"(2 to the number of pool levels)"
            )


def _output_shape(node: ir.Node, inputs: tuple[Shape, ...]) -> Shape:
    """Shape inference for one node; raises on channel or size mismatches."""
    if isinstance(node, (ir.Conv, ir.ConvPool)):
        conv = node if isinstance(node, ir.Conv) else node.conv
        (shape,) = inputs
        if shape.channels != conv.in_channels:
            raise InvalidArgumentError(
                f"conv '{conv.name}' expects {conv.in_channels} input channels but its input "
                f"has {shape.channels}"
            )
        if isinstance(node, ir.Conv):
            return Shape(conv.out_channels, shape.height, shape.width)
        return Shape(conv.out_channels, shape.height // 2, shape.width // 2)
    if isinstance(node, ir.Pool):
        return Shape(inputs[0].channels, inputs[0].height // 2, inputs[0].width // 2)
    if isinstance(node, ir.Upsample):
        return Shape(inputs[0].channels, inputs[0].height * 2, inputs[0].width * 2)
    if isinstance(node, ir.Concat):
        sizes = {(s.height, s.width) for s in inputs}
        if len(sizes) != 1:
            raise InvalidArgumentError(
                f"concat '{node.name}' mixes spatial sizes {sorted(sizes)}; expected one"
            )
        return Shape(sum(s.channels for s in inputs), inputs[0].height, inputs[0].width)
    if isinstance(node, ir.DecoderConv):
        scaled = [
            (s.height * 2, s.width * 2) if src.upsample else (s.height, s.width)
            for src, s in zip(node.sources, inputs, strict=True)
        ]
        if len(set(scaled)) != 1:
            raise InvalidArgumentError(
                f"decoder conv '{node.name}' sources have sizes {scaled} after upsampling; "
                "expected one"
            )
        channels = sum(s.channels for s in inputs)
        if channels != node.conv.in_channels:
            raise InvalidArgumentError(
                f"decoder conv '{node.name}' expects {node.conv.in_channels} input channels but "
                f"its sources have {channels}"
            )
        return Shape(node.conv.out_channels, *scaled[0])
    raise InvalidArgumentError(f"unknown node type {type(node).__name__}")


def _resolve_shapes(
    graph: ir.Graph, height: int, width: int
) -> tuple[dict[str, Shape], list[Step]]:
    shapes = {graph.input: Shape(graph.input_channels, height, width)}
    steps: list[Step] = []
    for index, node in enumerate(graph.nodes):
        missing = [v for v in node.inputs if v not in shapes]
        if missing:
            raise InvalidArgumentError(
                f"node '{node.name}' reads {missing[0]!r} before it is defined"
            )
        if node.name in shapes:
            raise InvalidArgumentError(f"value {node.name!r} is defined twice")
        ins = tuple(shapes[v] for v in node.inputs)
        out = _output_shape(node, ins)
        shapes[node.name] = out
        steps.append(Step(index, node, ins, out))
    if graph.output not in shapes:
        raise InvalidArgumentError(f"graph output {graph.output!r} is never defined")
    return shapes, steps


def _last_uses(graph: ir.Graph, steps: list[Step]) -> dict[str, int]:
    last = {graph.input: -1}
    for step in steps:
        last[step.node.name] = step.index
        for value in step.node.inputs:
            last[value] = step.index
    last[graph.output] = len(steps)
    return last


def _assign_slots(
    order: list[tuple[int, str]], last_use: Mapping[str, int], sizes: Mapping[str, int]
) -> tuple[dict[str, int], list[int]]:
    """Best-fit slot assignment; ``order`` is (defining step, value), input first at -1."""
    slot_of: dict[str, int] = {}
    slot_bytes: list[int] = []
    occupant: list[str | None] = []
    for index, value in order:
        for slot, held in enumerate(occupant):
            if held is not None and last_use[held] < index:
                occupant[slot] = None
        need = sizes[value]
        free = [s for s, held in enumerate(occupant) if held is None and slot_bytes[s] >= need]
        if free:
            slot = min(free, key=lambda s: (slot_bytes[s], s))
        else:
            slot = len(slot_bytes)
            slot_bytes.append(need)
            occupant.append(None)
        occupant[slot] = value
        slot_of[value] = slot
    return slot_of, slot_bytes


def plan(
    graph: ir.Graph,
    height: int,
    width: int,
    *,
    value_bytes: Callable[[str, Shape], int] | None = None,
) -> Plan:
    """Resolve shapes, lifetimes and activation slots of ``graph`` at ``height x width``.

    Args:
        graph: a graph (fused or not).
        height: network input height; a positive multiple of `size_alignment`.
        width: network input width; a positive multiple of `size_alignment`.
        value_bytes: storage size of a value from its name and shape; defaults
            to `fp32_value_bytes`.

    Returns:
        The plan.

    Raises:
        InvalidArgumentError: bad size, or a malformed graph (undefined value,
            channel or spatial mismatch).
    """
    _check_size(graph, height, width)
    height, width = int(height), int(width)
    shapes, steps = _resolve_shapes(graph, height, width)
    last_use = _last_uses(graph, steps)
    sizing = value_bytes or fp32_value_bytes
    sizes = {name: int(sizing(name, shape)) for name, shape in shapes.items()}
    for name, size in sizes.items():
        if size < 0:
            raise InvalidArgumentError(f"value_bytes gave {size} bytes for {name!r}")
    order = [(-1, graph.input)] + [(step.index, step.node.name) for step in steps]
    slot_of, slot_bytes = _assign_slots(order, last_use, sizes)
    return Plan(
        graph=graph,
        height=height,
        width=width,
        shapes=MappingProxyType(shapes),
        steps=tuple(steps),
        last_use=MappingProxyType(last_use),
        slot_of=MappingProxyType(slot_of),
        slot_bytes=tuple(slot_bytes),
        peak_bytes=sum(slot_bytes),
        value_bytes=MappingProxyType(sizes),
    )
