"""Hypothesis strategies shared by the property tests: random U-Net-like graphs."""

from __future__ import annotations

from hypothesis import strategies as st

from oidn_gpu.graph import ir

ALL_RELU = st.just(ir.Activation.RELU)


@st.composite
def unet_graphs(
    draw: st.DrawFn,
    *,
    channels: st.SearchStrategy[int],
    depths: st.SearchStrategy[int],
    bottleneck_convs: st.SearchStrategy[int],
    decoder_convs: st.SearchStrategy[int],
    activations: st.SearchStrategy[ir.Activation] = ALL_RELU,
) -> ir.Graph:
    """Encoder (convs + pools), bottleneck, decoder (upsample, concat with a skip, convs)."""
    depth = draw(depths)
    input_channels = draw(channels)
    nodes: list[ir.Node] = []
    value_channels = {"input": input_channels}

    def add(node: ir.Node) -> str:
        nodes.append(node)
        value_channels[node.name] = node.channels
        return node.name

    def convs(value: str, count: int) -> str:
        for _ in range(count):
            activation = draw(activations)
            conv = ir.Conv(
                f"conv{len(nodes)}", value, value_channels[value], draw(channels), activation
            )
            value = add(conv)
        return value

    skips = ["input"]
    value = "input"
    for level in range(1, depth + 1):
        value = convs(value, draw(st.integers(1, 2)))
        value = add(ir.Pool(f"pool{level}", value, value_channels[value]))
        skips.append(value)
    value = convs(value, draw(bottleneck_convs))
    for level in range(depth, 0, -1):
        up = add(ir.Upsample(f"up{level}", value, value_channels[value]))
        pair = [up, skips[level - 1]]
        if draw(st.booleans()):
            pair.reverse()
        cat = add(ir.Concat(f"concat{level}", tuple(pair), sum(value_channels[v] for v in pair)))
        value = convs(cat, draw(decoder_convs))
    value = convs(value, 1)
    return ir.Graph("input", input_channels, tuple(nodes), value)
