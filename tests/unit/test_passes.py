"""Tests of graph.passes: conv+pool and upsample+concat+conv fusion, dead value removal."""

from __future__ import annotations

from collections import Counter

import pytest

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.graph import ir
from oidn_gpu.graph.passes import (
    fuse_conv_pool,
    fuse_decoder,
    is_fused,
    optimize,
    remove_dead,
    use_counts,
)
from oidn_gpu.model.unet import load_model
from tests.datasets import official_param


def conv(name: str, src: str, cin: int, cout: int) -> ir.Conv:
    return ir.Conv(name, src, cin, cout)


def two_level_unet(c0: int = 8, c1: int = 12, skip_channels: int = 3) -> ir.Graph:
    """input(3) -> e0 -> e1 -> pool1 -> m -> up1 -> concat1(up1, input) -> d0 -> out."""
    return ir.Graph(
        input="input",
        input_channels=skip_channels,
        nodes=(
            conv("e0", "input", skip_channels, c0),
            conv("e1", "e0", c0, c0),
            ir.Pool("pool1", "e1", c0),
            conv("m", "pool1", c0, c1),
            ir.Upsample("up1", "m", c1),
            ir.Concat("concat1", ("up1", "input"), c1 + skip_channels),
            conv("d0", "concat1", c1 + skip_channels, 5),
            conv("out", "d0", 5, 3),
        ),
        output="out",
    )


def kinds(graph: ir.Graph) -> Counter[str]:
    return Counter(type(node).__name__ for node in graph.nodes)


def test_conv_read_only_by_a_pool_becomes_conv_pool_named_after_the_pool() -> None:
    fused = fuse_conv_pool(two_level_unet())
    node = fused.node("pool1")
    assert isinstance(node, ir.ConvPool)
    assert node.conv.name == "e1" and node.input == "e0" and node.channels == 8
    assert "e1" not in {n.name for n in fused.nodes}
    assert fused.node("m").inputs == ("pool1",)


def test_conv_with_another_reader_keeps_its_pool_separate() -> None:
    graph = two_level_unet()
    nodes = list(graph.nodes)
    nodes.insert(3, conv("side", "e1", 8, 8))
    fused = fuse_conv_pool(ir.Graph("input", 3, tuple(nodes), "out"))
    assert isinstance(fused.node("pool1"), ir.Pool)
    assert isinstance(fused.node("e1"), ir.Conv)


def test_conv_that_is_the_graph_output_is_not_fused() -> None:
    graph = ir.Graph("input", 3, (conv("a", "input", 3, 4), ir.Pool("p", "a", 4)), output="a")
    assert fuse_conv_pool(graph) == graph


def test_upsample_concat_conv_becomes_decoder_conv_with_sources_in_concat_order() -> None:
    fused = fuse_decoder(two_level_unet(), channel_align=4)
    node = fused.node("d0")
    assert isinstance(node, ir.DecoderConv)
    assert node.sources == (ir.DecoderSource("m", 12, True), ir.DecoderSource("input", 3, False))
    assert node.conv.in_channels == 15 and node.conv.input == ""
    assert node.inputs == ("m", "input")
    names = {n.name for n in fused.nodes}
    assert "up1" not in names and "concat1" not in names


def test_decoder_fusion_needs_aligned_channels_on_every_source_but_the_last() -> None:
    unaligned = two_level_unet(c1=6)  # 6 % 4 != 0 on the first source
    assert isinstance(fuse_decoder(unaligned, channel_align=4).node("d0"), ir.Conv)
    assert isinstance(fuse_decoder(unaligned, channel_align=2).node("d0"), ir.DecoderConv)
    assert isinstance(fuse_decoder(unaligned, channel_align=1).node("d0"), ir.DecoderConv)
    # the last source may have any channel count
    odd_skip = two_level_unet(c1=8, skip_channels=5)
    assert isinstance(fuse_decoder(odd_skip, channel_align=4).node("d0"), ir.DecoderConv)


def test_upsample_with_another_reader_is_not_folded() -> None:
    graph = two_level_unet()
    nodes = (*graph.nodes, conv("extra", "up1", 12, 3))
    shared = ir.Graph("input", 3, nodes, "extra")
    fused = fuse_decoder(shared, channel_align=1)
    # no upsample could be folded, so the concat stays
    assert isinstance(fused.node("d0"), ir.Conv)
    assert isinstance(fused.node("up1"), ir.Upsample)


def test_concat_with_two_readers_is_not_fused() -> None:
    graph = two_level_unet()
    nodes = (*graph.nodes, conv("extra", "concat1", 15, 3))
    fused = fuse_decoder(ir.Graph("input", 3, nodes, "extra"), channel_align=1)
    assert not any(isinstance(n, ir.DecoderConv) for n in fused.nodes)


def test_channel_align_below_one_is_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="channel_align 0"):
        fuse_decoder(two_level_unet(), channel_align=0)


def test_remove_dead_drops_values_nothing_reads() -> None:
    graph = two_level_unet()
    nodes = (*graph.nodes[:2], conv("dead", "e0", 8, 4), conv("dead2", "dead", 4, 4))
    pruned = remove_dead(ir.Graph("input", 3, nodes + graph.nodes[2:], "out"))
    assert [n.name for n in pruned.nodes] == [n.name for n in graph.nodes]


def test_optimize_flags_select_passes() -> None:
    graph = two_level_unet()
    assert kinds(optimize(graph, conv_pool=False, decoder=False)) == kinds(graph)
    assert kinds(optimize(graph, decoder=False))["ConvPool"] == 1
    assert kinds(optimize(graph, conv_pool=False))["DecoderConv"] == 1
    both = optimize(graph)
    assert kinds(both) == Counter(Conv=3, ConvPool=1, DecoderConv=1)
    assert optimize(both) == both  # idempotent


def test_use_counts_count_each_read_and_the_output() -> None:
    counts = use_counts(two_level_unet())
    assert counts["input"] == 2 and counts["out"] == 1 and counts["e1"] == 1


REAL_NETWORKS = [
    ("rt_hdr_alb_nrm", 16),
    ("rt_ldr_small", 16),
    ("rt_hdr_calb_cnrm_large", 19),
    ("rt_alb", 16),
]


@pytest.mark.parametrize(("name", "conv_count"), [official_param(*row) for row in REAL_NETWORKS])
def test_real_unets_get_four_conv_pool_and_four_decoder_fusions(
    official_weights, name: str, conv_count: int
) -> None:
    model = load_model(official_weights(name))
    fused = optimize(model.graph, channel_align=4)
    counts = kinds(fused)
    assert counts["ConvPool"] == 4
    assert counts["DecoderConv"] == 4
    assert counts["Pool"] == counts["Upsample"] == counts["Concat"] == 0
    assert [c.name for c in fused.convs()] == [c.name for c in model.graph.convs()]
    assert len(fused.convs()) == conv_count
    assert fused.output == model.graph.output
    for node in fused.nodes:
        if isinstance(node, ir.DecoderConv):
            assert [s.upsample for s in node.sources] == [True, False]
    assert sum(is_fused(n) for n in fused.nodes) == 8
