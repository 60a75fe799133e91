"""The graph IR: frozen dataclasses describing a U-Net as a list of ops.

A `Graph` is topology only. It names values (every node's output is a value
named after the node, the network input is the value ``graph.input``) and says
which op computes each value from which others. Channel counts are part of
the graph; spatial sizes are not (they are resolved by `graph.plan`).
Convolution weights are referenced by their layer name (``enc_conv0``), which
is exactly the weight name prefix in the ``.tza`` file.

Ops, with shapes written ``[C, H, W]``:

- `Conv`: 3x3, stride 1, zero padding 1, bias, optional ReLU.
  ``[I, H, W] -> [O, H, W]``.
- `Pool`: 2x2 max pool, stride 2. ``[C, H, W] -> [C, H/2, W/2]``.
- `Upsample`: nearest x2. ``[C, H, W] -> [C, 2H, 2W]``.
- `Concat`: channel concatenation in input order.
- `ConvPool` (fused): `Conv` then `Pool`; only the pooled value exists.
- `DecoderConv` (fused): upsample of some sources, concat, `Conv`; neither the
  upsampled nor the concatenated tensor exists.

The fusion passes in `graph.passes` turn unfused graphs into fused ones; every
backend must give the same result (to float rounding) on both.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Activation(enum.Enum):
    """What follows the bias add of a convolution."""

    NONE = "none"
    RELU = "relu"


@dataclass(frozen=True)
class Conv:
    """3x3 convolution of value ``input`` with the weights of layer ``name``."""

    name: str
    input: str
    in_channels: int
    out_channels: int
    activation: Activation = Activation.RELU

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.input,)

    @property
    def channels(self) -> int:
        return self.out_channels


@dataclass(frozen=True)
class Pool:
    """2x2 max pool with stride 2."""

    name: str
    input: str
    channels: int

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Upsample:
    """Nearest-neighbour x2 upsampling: every value becomes a 2x2 block."""

    name: str
    input: str
    channels: int

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Concat:
    """Channel concatenation; channels of ``inputs[0]`` come first."""

    name: str
    inputs: tuple[str, ...]
    channels: int


@dataclass(frozen=True)
class ConvPool:
    """Fused `Conv` (+ activation) and `Pool`. Its value is the pooled tensor."""

    name: str
    conv: Conv

    @property
    def input(self) -> str:
        return self.conv.input

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.conv.input,)

    @property
    def channels(self) -> int:
        return self.conv.out_channels


@dataclass(frozen=True)
class DecoderSource:
    """One input of a fused decoder conv, at half resolution if ``upsample``."""

    value: str
    channels: int
    upsample: bool


@dataclass(frozen=True)
class DecoderConv:
    """Fused upsample + concat + `Conv`. ``conv.input`` is unused (empty)."""

    name: str
    sources: tuple[DecoderSource, ...]
    conv: Conv

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(s.value for s in self.sources)

    @property
    def channels(self) -> int:
        return self.conv.out_channels


Node = Conv | Pool | Upsample | Concat | ConvPool | DecoderConv


@dataclass(frozen=True)
class Graph:
    """A whole network: its input value, nodes in execution order, its output value."""

    input: str
    input_channels: int
    nodes: tuple[Node, ...]
    output: str

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def channels(self, value: str) -> int:
        """Channel count of a value (the input or any node's output)."""
        if value == self.input:
            return self.input_channels
        return self.node(value).channels

    def convs(self) -> tuple[Conv, ...]:
        """Every convolution, fused or not, in execution order."""
        out: list[Conv] = []
        for node in self.nodes:
            if isinstance(node, Conv):
                out.append(node)
            elif isinstance(node, (ConvPool, DecoderConv)):
                out.append(node.conv)
        return tuple(out)

    @property
    def output_channels(self) -> int:
        return self.channels(self.output)
