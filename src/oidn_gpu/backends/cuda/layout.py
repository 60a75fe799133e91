"""Storage layout and per-layer launch descriptions of the CUDA backend (NumPy only).

Activations are NHWC (``[H, W, C]`` per image, channels fastest) in fp16 or bf16,
with every channel count padded to a multiple of `CHANNEL_ALIGN` (16, the
smallest K of a tensor-core ``tl.dot``); padded channels hold exact zeros (their
weight columns and biases are zero). The network output of the executor is fp32
``[H, W, 3]``.

Every convolution of the fused graph becomes one `ConvLaunch`: its sources (one,
or two for a decoder conv: the upsampled half-resolution value first, then the
skip), whether a 2x2 max-pool follows (``ConvPool``) and whether it is the final
layer. Weights are packed as ``[9, K, N]`` (tap-major, ``tap = 3 * kh + kw``):
rows ``[0, K_A)`` are source A's input channels, rows ``[K_A, K_A + K_B)``
source B's, each block padded with zero rows to a multiple of `K_BLOCK_PAD`
so that any K tile of 16, 32 or 64 reads inside the packed matrix; columns are
padded with zeros to a multiple of `N_BLOCK_PAD`. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.graph import ir
from oidn_gpu.graph.plan import Plan, Shape
from oidn_gpu.graph.reference import ConvParams

CHANNEL_ALIGN = 16  # tl.dot needs K >= 16; NHWC rows of 32 bytes in fp16
K_BLOCK_PAD = 64  # largest K tile; packed weight blocks are padded to it
N_BLOCK_PAD = 128  # largest N tile; packed weight columns are padded to it
ACTIVATION_BYTES = 2  # fp16 / bf16
OUTPUT_BYTES = 4  # the network output is fp32
OUTPUT_CHANNELS = 3


def round_up(value: int, multiple: int) -> int:
    """Smallest multiple of ``multiple`` that is >= ``value``."""
    return -(-value // multiple) * multiple


def stored_channels(channels: int) -> int:
    """Channels of a value in memory: padded to `CHANNEL_ALIGN`."""
    return round_up(channels, CHANNEL_ALIGN)


@dataclass(frozen=True)
class Source:
    """One input of a conv launch: a value, its channel count, whether it is upsampled x2."""

    value: str
    channels: int
    upsample: bool

    @property
    def stored(self) -> int:
        return stored_channels(self.channels)

    @property
    def weight_rows(self) -> int:
        return round_up(self.stored, K_BLOCK_PAD)


@dataclass(frozen=True)
class ConvLaunch:
    """One convolution as the kernels see it.

    Attributes:
        name: the conv layer name (weights), e.g. ``enc_conv1``.
        value: the value it produces (the pool's name for a conv+pool).
        sources: one or two sources, in concat order.
        out_channels: O.
        relu: ReLU after the bias.
        pool: a 2x2 max-pool follows (the value is at half resolution).
        final: the graph output (written as fp32 or through the output pass).
    """

    name: str
    value: str
    sources: tuple[Source, ...]
    out_channels: int
    relu: bool
    pool: bool
    final: bool

    @property
    def in_channels(self) -> int:
        return sum(s.channels for s in self.sources)

    @property
    def out_stored(self) -> int:
        return stored_channels(self.out_channels)

    @property
    def weight_rows(self) -> int:
        return sum(s.weight_rows for s in self.sources)

    @property
    def weight_cols(self) -> int:
        return round_up(self.out_channels, N_BLOCK_PAD)

    def flops(self, height: int, width: int) -> float:
        """Multiply-adds x 2 at conv resolution ``height x width``."""
        return 2.0 * 9 * self.in_channels * self.out_channels * height * width


def launches(graph: ir.Graph) -> tuple[ConvLaunch, ...]:
    """The conv launches of a fused graph, in execution order.

    Raises:
        InvalidArgumentError: the graph has a node other than Conv, ConvPool and
            DecoderConv (the CUDA kernels fuse every pool, upsample and concat),
            or a decoder conv with more than two sources.
    """
    out: list[ConvLaunch] = []
    for node in graph.nodes:
        if isinstance(node, ir.Conv):
            conv, sources, pool = node, (Source(node.input, node.in_channels, False),), False
        elif isinstance(node, ir.ConvPool):
            conv, pool = node.conv, True
            sources = (Source(conv.input, conv.in_channels, False),)
        elif isinstance(node, ir.DecoderConv):
            conv, pool = node.conv, False
            sources = tuple(Source(s.value, s.channels, s.upsample) for s in node.sources)
            if len(sources) > 2:
                raise InvalidArgumentError(
                    f"decoder conv '{conv.name}' has {len(sources)} sources; the CUDA "
                    "kernels take at most 2"
                )
        else:
            raise InvalidArgumentError(
                f"node '{node.name}' is a {type(node).__name__}; the CUDA kernels need every "
                "pool fused into its conv and every upsample and concat into a decoder conv"
            )
        out.append(
            ConvLaunch(
                name=conv.name,
                value=node.name,
                sources=sources,
                out_channels=conv.out_channels,
                relu=conv.activation is ir.Activation.RELU,
                pool=pool,
                final=node.name == graph.output,
            )
        )
    return tuple(out)


def pack_weights(launch: ConvLaunch, params: ConvParams) -> tuple[np.ndarray, np.ndarray]:
    """``([9, K, N] float32, [N] float32)``: the packed weight and bias of one launch.

    Raises:
        InvalidArgumentError: the weights do not have the launch's shape.
    """
    weight = np.asarray(params.weight, np.float32)
    bias = np.asarray(params.bias, np.float32)
    expected = (launch.out_channels, launch.in_channels, 3, 3)
    if weight.shape != expected or bias.shape != expected[:1]:
        raise InvalidArgumentError(
            f"conv '{launch.name}' weights have shapes {weight.shape} and {bias.shape}; "
            f"expected {expected} and {expected[:1]}"
        )
    packed = np.zeros((9, launch.weight_rows, launch.weight_cols), np.float32)
    # [O, I, kh, kw] -> [kh * 3 + kw, I, O]
    taps = weight.transpose(2, 3, 1, 0).reshape(9, launch.in_channels, launch.out_channels)
    row, first = 0, 0
    for source in launch.sources:
        packed[:, row : row + source.channels, : launch.out_channels] = taps[
            :, first : first + source.channels
        ]
        row += source.weight_rows
        first += source.channels
    packed_bias = np.zeros(launch.weight_cols, np.float32)
    packed_bias[: launch.out_channels] = bias
    return packed, packed_bias


def value_bytes(graph: ir.Graph):
    """The `graph.plan` size callback: NHWC padded activations, fp32 ``[H, W, 3]`` output."""

    def size(name: str, shape: Shape) -> int:
        if name == graph.output:
            return shape.height * shape.width * OUTPUT_CHANNELS * OUTPUT_BYTES
        return shape.height * shape.width * stored_channels(shape.channels) * ACTIVATION_BYTES

    return size


def conv_shapes(plan: Plan, launch: ConvLaunch) -> tuple[int, int]:
    """``(H, W)`` at which the conv of ``launch`` runs (before its pool)."""
    shape = plan.shapes[launch.value]
    return (shape.height * 2, shape.width * 2) if launch.pool else (shape.height, shape.width)


def check_weights(graph: ir.Graph, convs: Mapping[str, ConvParams]) -> None:
    """Raise `InvalidArgumentError` naming the first conv of ``graph`` without weights."""
    for conv in graph.convs():
        if conv.name not in convs:
            raise InvalidArgumentError(f"no weights for conv layer '{conv.name}'")
