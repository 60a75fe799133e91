"""Tests of graph.plan: shapes, lifetimes and best-fit activation slots."""

from __future__ import annotations

from itertools import pairwise

import pytest

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.graph import ir
from oidn_gpu.graph.passes import optimize
from oidn_gpu.graph.plan import Plan, Shape, plan, pool_depth, size_alignment
from oidn_gpu.model.unet import load_model


@pytest.fixture(scope="module")
def base_graph(package_weights_dir) -> ir.Graph:
    return load_model(package_weights_dir / "rt_hdr_alb_nrm.tza").graph


def chain(*channels: int) -> ir.Graph:
    """Convs input -> c1 -> c2 ... with the given channel counts (the first is the input)."""
    nodes = tuple(
        ir.Conv(f"c{i}", "input" if i == 1 else f"c{i - 1}", channels[i - 1], channels[i])
        for i in range(1, len(channels))
    )
    return ir.Graph("input", channels[0], nodes, nodes[-1].name)


def assert_slots_valid(p: Plan) -> None:
    """No two simultaneously live values share a slot; every value fits its slot."""
    for value, slot in p.slot_of.items():
        assert p.value_bytes[value] <= p.slot_bytes[slot]
    for slot in range(len(p.slot_bytes)):
        lifetimes = sorted((p.defined_at(v), p.last_use[v]) for v in p.values_in(slot))
        for (_, end), (start, _) in pairwise(lifetimes):
            assert end < start


def test_shapes_follow_pools_and_upsamples(base_graph: ir.Graph) -> None:
    p = plan(base_graph, 64, 96)
    assert p.shapes["input"] == Shape(9, 64, 96)
    assert p.shapes["enc_conv1"] == Shape(32, 64, 96)
    assert p.shapes["pool1"] == Shape(32, 32, 48)
    assert p.shapes["pool4"] == Shape(80, 4, 6)
    assert p.shapes["up4"] == Shape(96, 8, 12)
    assert p.shapes["concat1"] == Shape(64 + 9, 64, 96)
    assert p.shapes["dec_conv0"] == Shape(3, 64, 96)
    assert p.steps[-1].output_shape == Shape(3, 64, 96)


def test_fused_plan_has_the_same_surviving_shapes(base_graph: ir.Graph) -> None:
    unfused = plan(base_graph, 32, 48)
    fused = plan(optimize(base_graph), 32, 48)
    for value, shape in fused.shapes.items():
        assert unfused.shapes[value] == shape
    assert fused.peak_bytes < unfused.peak_bytes


@pytest.mark.parametrize(("height", "width"), [(0, 16), (16, 24), (8, 16), (-16, 16), (16, 17)])
def test_size_must_be_a_positive_multiple_of_16(
    base_graph: ir.Graph, height: int, width: int
) -> None:
    bad = height if (height <= 0 or height % 16) else width
    with pytest.raises(InvalidArgumentError, match=f"{bad} must be a positive multiple of 16"):
        plan(base_graph, height, width)


def test_alignment_is_two_to_the_pool_depth(base_graph: ir.Graph) -> None:
    assert pool_depth(base_graph) == 4 and size_alignment(base_graph) == 16
    assert size_alignment(optimize(base_graph)) == 16
    assert size_alignment(chain(3, 4)) == 1
    pooled = ir.Graph("input", 3, (ir.Pool("p1", "input", 3), ir.Pool("p2", "p1", 3)), "p2")
    assert size_alignment(pooled) == 4
    plan(pooled, 4, 12)
    with pytest.raises(InvalidArgumentError, match="width 6"):
        plan(pooled, 4, 6)


def test_last_use_of_the_output_is_the_number_of_steps(base_graph: ir.Graph) -> None:
    p = plan(base_graph, 32, 32)
    assert p.last_use["dec_conv0"] == len(p.steps)
    # the network input is the last skip: read by the final concat
    assert p.last_use["input"] == p.defined_at("concat1")
    assert p.last_use["pool1"] == p.defined_at("concat2")


def test_a_step_output_never_shares_a_slot_with_its_inputs(base_graph: ir.Graph) -> None:
    for graph in (base_graph, optimize(base_graph)):
        p = plan(graph, 32, 48)
        for step in p.steps:
            for value in step.node.inputs:
                assert p.slot_of[value] != p.slot_of[step.node.name]
        assert_slots_valid(p)


def test_best_fit_takes_the_smallest_free_slot_that_fits() -> None:
    # c1 (8 ch) and c2 (2 ch) die, then c4 (2 ch) should take c2's small slot, not c1's
    graph = ir.Graph(
        "input",
        1,
        (
            ir.Conv("c1", "input", 1, 8),
            ir.Conv("c2", "c1", 8, 2),
            ir.Conv("c3", "c2", 2, 1),
            ir.Conv("c4", "c3", 1, 2),
        ),
        "c4",
    )
    p = plan(graph, 4, 4)
    assert p.slot_of["c4"] == p.slot_of["c2"]
    assert p.slot_of["c3"] == p.slot_of["input"]
    assert len(p.slot_bytes) == 3
    assert_slots_valid(p)


def test_value_bytes_callback_sizes_the_slots() -> None:
    def vec4_fp16(name: str, shape: Shape) -> int:
        return -(-shape.channels // 4) * 4 * shape.height * shape.width * 2

    p = plan(chain(3, 5, 3), 16, 16, value_bytes=vec4_fp16)
    assert p.value_bytes["input"] == 4 * 16 * 16 * 2
    assert p.value_bytes["c1"] == 8 * 16 * 16 * 2
    assert p.peak_bytes == sum(p.slot_bytes)


def test_default_bytes_are_dense_fp32(base_graph: ir.Graph) -> None:
    p = plan(base_graph, 16, 32)
    assert p.value_bytes["enc_conv0"] == 32 * 16 * 32 * 4


def test_graph_input_gets_the_first_slot() -> None:
    p = plan(chain(3, 4, 4), 8, 8)
    assert p.slot_of["input"] == 0


def test_reading_an_undefined_value_is_rejected() -> None:
    graph = ir.Graph("input", 3, (ir.Conv("c", "nope", 3, 3),), "c")
    with pytest.raises(InvalidArgumentError, match="'nope' before it is defined"):
        plan(graph, 16, 16)


def test_channel_mismatch_is_rejected() -> None:
    graph = ir.Graph("input", 3, (ir.Conv("c", "input", 4, 3),), "c")
    with pytest.raises(InvalidArgumentError, match="expects 4 input channels but its input has 3"):
        plan(graph, 16, 16)


def test_concat_of_different_sizes_is_rejected() -> None:
    graph = ir.Graph(
        "input",
        3,
        (ir.Pool("p", "input", 3), ir.Concat("cat", ("input", "p"), 6)),
        "cat",
    )
    with pytest.raises(InvalidArgumentError, match="mixes spatial sizes"):
        plan(graph, 16, 16)


def test_base_unet_at_1080p_fits_in_about_a_gigabyte(base_graph: ir.Graph) -> None:
    p = plan(optimize(base_graph), 1088, 1920)
    assert_slots_valid(p)
    # largest single value: dec_conv1a, 64 x 1088 x 1920 fp32 = 535 MB
    assert p.peak_bytes < 1.3e9
