"""Topology-only optimizer passes over `graph.ir.Graph`, each ``Graph -> Graph``.

The passes never look at weights or spatial sizes; they rewrite which node
computes which value. Every value that survives keeps its name, so references
from later nodes and the graph output stay valid.

- `fuse_conv_pool`: a `Conv` whose only consumer is a `Pool` becomes one
  `ConvPool`. The fused node takes the **pool's** name (the pooled value is
  what consumers read); the pre-pool conv value disappears. The weights are
  still found under ``node.conv.name`` (the conv layer name).
- `fuse_decoder`: ``Upsample -> Concat -> Conv`` becomes one `DecoderConv`
  named like the conv. A concat input that is an `Upsample` read only by the
  concat is folded in as a source with ``upsample=True``; any other concat
  input is a plain source. The concat must have the conv as its only consumer
  and at least one source must be an upsample. The vec4 boundary rule of the
  GPU kernels applies: every source except the last must have a channel count
  that is a multiple of ``channel_align`` (``1`` disables the rule).
- `remove_dead`: drops nodes whose value nothing reads (transitively) and that
  are not the graph output.
- `optimize`: the passes above in that order, each optional.

A value is "consumed" once per appearance in a node's inputs, so a concat
that reads the same upsample twice keeps it unfused.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.graph import ir

DEFAULT_CHANNEL_ALIGN = 4
"""Channels per vec4 storage block of the GPU kernels (``kernels.spec.VEC4``)."""


def use_counts(graph: ir.Graph) -> Counter[str]:
    """How many times each value is read: once per node input, plus once for the graph output."""
    counts: Counter[str] = Counter()
    for node in graph.nodes:
        counts.update(node.inputs)
    counts[graph.output] += 1
    return counts


def fuse_conv_pool(graph: ir.Graph) -> ir.Graph:
    """Fuse every ``Conv -> Pool`` pair where the pool is the conv's only reader.

    Args:
        graph: any graph.

    Returns:
        A graph where each such pair is one `ConvPool` named after the pool,
        placed where the pool was.
    """
    uses = use_counts(graph)
    convs = {node.name: node for node in graph.nodes if isinstance(node, ir.Conv)}
    fused: set[str] = set()
    nodes: list[ir.Node] = []
    for node in graph.nodes:
        if isinstance(node, ir.Pool) and node.input in convs and uses[node.input] == 1:
            nodes.append(ir.ConvPool(name=node.name, conv=convs[node.input]))
            fused.add(node.input)
        else:
            nodes.append(node)
    kept = tuple(node for node in nodes if node.name not in fused)
    return dataclasses.replace(graph, nodes=kept)


def _aligned(sources: tuple[ir.DecoderSource, ...], channel_align: int) -> bool:
    return all(source.channels % channel_align == 0 for source in sources[:-1])


def fuse_decoder(graph: ir.Graph, channel_align: int = DEFAULT_CHANNEL_ALIGN) -> ir.Graph:
    """Fuse every ``Upsample -> Concat -> Conv`` chain into a `DecoderConv`.

    Args:
        graph: any graph.
        channel_align: every source but the last must have a multiple of this
            many channels, so each source's vec4 blocks line up with the input
            channels of the concatenated weight; 1 fuses regardless.

    Returns:
        A graph where each qualifying conv is a `DecoderConv` with the conv's
        name, at the conv's position, with sources in concat order.

    Raises:
        InvalidArgumentError: ``channel_align`` is less than 1.
    """
    if channel_align < 1:
        raise InvalidArgumentError(f"channel_align {channel_align} must be at least 1")
    uses = use_counts(graph)
    by_name = {node.name: node for node in graph.nodes}
    folded: set[str] = set()
    nodes: list[ir.Node] = []
    for node in graph.nodes:
        concat = by_name.get(node.input) if isinstance(node, ir.Conv) else None
        if not isinstance(node, ir.Conv) or not isinstance(concat, ir.Concat):
            nodes.append(node)
            continue
        sources: list[ir.DecoderSource] = []
        upsamples: list[str] = []
        for value in concat.inputs:
            producer = by_name.get(value)
            if isinstance(producer, ir.Upsample) and uses[value] == 1:
                sources.append(ir.DecoderSource(producer.input, producer.channels, True))
                upsamples.append(value)
            else:
                sources.append(ir.DecoderSource(value, graph.channels(value), False))
        if uses[concat.name] != 1 or not upsamples or not _aligned(tuple(sources), channel_align):
            nodes.append(node)
            continue
        conv = dataclasses.replace(node, input="")
        nodes.append(ir.DecoderConv(name=node.name, sources=tuple(sources), conv=conv))
        folded.update(upsamples)
        folded.add(concat.name)
    kept = tuple(node for node in nodes if node.name not in folded)
    return dataclasses.replace(graph, nodes=kept)


def remove_dead(graph: ir.Graph) -> ir.Graph:
    """Drop nodes whose value is neither the output nor (transitively) read by it."""
    live = {graph.output}
    kept: list[ir.Node] = []
    for node in reversed(graph.nodes):
        if node.name in live:
            kept.append(node)
            live.update(node.inputs)
    return dataclasses.replace(graph, nodes=tuple(reversed(kept)))


def optimize(
    graph: ir.Graph,
    *,
    conv_pool: bool = True,
    decoder: bool = True,
    channel_align: int = DEFAULT_CHANNEL_ALIGN,
) -> ir.Graph:
    """Run the fusion passes, then remove dead values.

    Args:
        graph: usually the unfused graph of a `ValidatedModel`.
        conv_pool: fuse conv+pool pairs.
        decoder: fuse upsample+concat+conv chains.
        channel_align: the decoder vec4 boundary rule (see `fuse_decoder`).

    Returns:
        The optimized graph; it computes the same output to float rounding.
    """
    if conv_pool:
        graph = fuse_conv_pool(graph)
    if decoder:
        graph = fuse_decoder(graph, channel_align)
    return remove_dead(graph)


def is_fused(node: ir.Node) -> bool:
    """Whether a node is one of the fused kinds (`ConvPool`, `DecoderConv`)."""
    return isinstance(node, (ir.ConvPool, ir.DecoderConv))
