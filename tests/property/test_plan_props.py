"""Property tests of graph.plan on random chain and U-Net-like graphs.

Invariants, for every plan: no two values live at the same step share a slot,
every value fits its slot, a step's output never shares a slot with one of its
inputs, the arena (``peak_bytes``) is at least the live bytes at every step,
and the graph output lives to the end.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from oidn_gpu.graph import ir
from oidn_gpu.graph.passes import optimize
from oidn_gpu.graph.plan import Plan, Shape, plan, size_alignment
from tests.property import graph_strategies

CHANNELS = st.integers(1, 13)


def unet_graphs() -> st.SearchStrategy[ir.Graph]:
    """Encoder (convs + pools), bottleneck, decoder (upsample, concat with a skip, convs)."""
    return graph_strategies.unet_graphs(
        channels=CHANNELS,
        depths=st.integers(0, 4),
        bottleneck_convs=st.integers(0, 2),
        decoder_convs=st.integers(1, 2),
    )


@st.composite
def chain_graphs(draw: st.DrawFn) -> ir.Graph:
    """A chain of convs, pools and upsamples that never goes above full resolution."""
    input_channels = draw(CHANNELS)
    nodes: list[ir.Node] = []
    value, level, chans = "input", 0, input_channels
    for index in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["conv", "pool", "upsample"] if level else ["conv", "pool"]))
        name = f"n{index}"
        if kind == "conv":
            out = draw(CHANNELS)
            nodes.append(ir.Conv(name, value, chans, out))
            chans = out
        elif kind == "pool":
            nodes.append(ir.Pool(name, value, chans))
            level += 1
        else:
            nodes.append(ir.Upsample(name, value, chans))
            level -= 1
        value = name
    return ir.Graph("input", input_channels, tuple(nodes), value)


def dense_fp32(name: str, shape: Shape) -> int:
    return shape.elements * 4


def vec4_fp16_fp32_output(name: str, shape: Shape) -> int:
    """What a GPU backend plans: vec4-padded channels, fp16 activations, fp32 output."""
    scalar = 4 if name.startswith("conv") and shape.channels == 3 else 2
    return -(-shape.channels // 4) * 4 * shape.height * shape.width * scalar


def padded_border(name: str, shape: Shape) -> int:
    return shape.channels * (shape.height + 2) * (shape.width + 2) * 4


BYTES = st.sampled_from([dense_fp32, vec4_fp16_fp32_output, padded_border])


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    graph = draw(st.one_of(unet_graphs(), chain_graphs()))
    if draw(st.booleans()):
        graph = optimize(graph, channel_align=draw(st.sampled_from([1, 2, 4])))
    align = size_alignment(graph)
    height = align * draw(st.integers(1, 3))
    width = align * draw(st.integers(1, 3))
    return plan(graph, height, width, value_bytes=draw(BYTES))


def live_values(p: Plan, index: int) -> list[str]:
    return [v for v in p.slot_of if p.defined_at(v) <= index <= p.last_use[v]]


@settings(max_examples=150, deadline=None)
@given(plans())
def test_values_live_at_the_same_step_never_share_a_slot(p: Plan) -> None:
    for index in range(-1, len(p.steps) + 1):
        live = live_values(p, index)
        slots = [p.slot_of[v] for v in live]
        assert len(slots) == len(set(slots)), (index, live, slots)


@settings(max_examples=150, deadline=None)
@given(plans())
def test_every_value_fits_its_slot(p: Plan) -> None:
    assert set(p.slot_of) == set(p.shapes)
    for value, slot in p.slot_of.items():
        assert p.value_bytes[value] <= p.slot_bytes[slot]


@settings(max_examples=150, deadline=None)
@given(plans())
def test_peak_is_at_least_the_live_bytes_at_every_step(p: Plan) -> None:
    assert p.peak_bytes == sum(p.slot_bytes)
    for index in range(-1, len(p.steps)):
        assert p.peak_bytes >= sum(p.value_bytes[v] for v in live_values(p, index))


@settings(max_examples=150, deadline=None)
@given(plans())
def test_outputs_never_alias_inputs_and_the_output_lives_to_the_end(p: Plan) -> None:
    for step in p.steps:
        assert all(p.slot_of[v] != p.slot_of[step.node.name] for v in step.node.inputs)
        assert step.input_shapes == tuple(p.shapes[v] for v in step.node.inputs)
    assert p.last_use[p.graph.output] == len(p.steps)
    assert p.slot_of[p.graph.input] == 0


@settings(max_examples=60, deadline=None)
@given(unet_graphs())
def test_fusion_never_increases_the_peak_live_bytes(graph: ir.Graph) -> None:
    align = size_alignment(graph)
    unfused = plan(graph, align * 2, align * 2)
    fused = plan(optimize(graph, channel_align=1), align * 2, align * 2)
    live_unfused = max(
        sum(unfused.value_bytes[v] for v in live_values(unfused, i))
        for i in range(-1, len(unfused.steps))
    )
    live_fused = max(
        sum(fused.value_bytes[v] for v in live_values(fused, i))
        for i in range(-1, len(fused.steps))
    )
    assert live_fused <= live_unfused
