"""Storage layout and per-layer launch descriptions of the CUDA backend (NumPy only).

Activations are NHWC (``[H, W, C]`` per image, channels fastest) in fp16 or bf16,
with every channel count padded to a multiple of `CHANNEL_ALIGN` (16, the
smallest K of a tensor-core ``tl.dot``); padded channels hold exact zeros (their
weight columns and biases are zero). The network output of the executor is fp32
``[H, W, 3]``.

Every convolution of the fused graph becomes one `ConvLaunch`: its sources (one,
or two for a decoder conv: the upsampled half-resolution value first, then the
skip), whether a 2x2 max-pool follows (``ConvPool``) and whether it is the final
layer. Weights are packed tap-major (``tap = 3 * kh + kw``), per tap source A's
input channels then source B's, each block padded with zero rows to a multiple of
`K_BLOCK_PAD`
so that any K tile of 16, 32 or 64 reads inside the packed matrix; columns are
padded with zeros to a multiple of `N_BLOCK_PAD`. A decoder conv whose first
source is upsampled stores that source as four 2x2 kernels (`ConvLaunch.parity`).
Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.graph import ir
from oidn_gpu.graph.plan import Plan, Shape
from oidn_gpu.graph.reference import ConvParams
from oidn_gpu.kernels.weights import fold_parity

CHANNEL_ALIGN = 16  # tl.dot needs K >= 16; NHWC rows of 32 bytes in fp16
K_BLOCK_PAD = 64  # largest K tile; packed weight blocks are padded to it
N_BLOCK_PAD = 128  # largest N tile; packed weight columns are padded to it
ACTIVATION_BYTES = 2  # fp16 / bf16
OUTPUT_BYTES = 4  # the network output is fp32
OUTPUT_CHANNELS = 3
PARITY_TAPS = 16  # 4 output parities x 2x2 taps of an upsampled source
# The 3x3 kernel rows (or columns) that land on each 2x2 tap of an output parity:
# `kernels.weights.PARITY_GROUPS` (shared with the wgpu backend's parity form).


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
    def parity(self) -> bool:
        """Source A is upsampled (and no other is): it is read as four 2x2 convs.

        Output pixel ``(2i + py, 2j + px)`` of a 3x3 conv over a nearest-upsampled
        source only sees source pixels ``(i + py - 1 + ty, j + px - 1 + tx)``,
        ``ty, tx`` in {0, 1}; the 3x3 taps landing on the same source pixel are summed
        into a 2x2 kernel per output parity, 4 taps instead of 9.
        """
        first, *rest = self.sources
        return first.upsample and not self.pool and not any(s.upsample for s in rest)

    @property
    def a_tap_rows(self) -> int:
        """Weight rows between two taps of source A (all sources' rows unless `parity`)."""
        return self.sources[0].weight_rows if self.parity else self._tap_rows

    @property
    def b_base(self) -> int:
        """First weight row of source B."""
        return (
            PARITY_TAPS * self.sources[0].weight_rows
            if self.parity
            else self.sources[0].weight_rows
        )

    @property
    def b_tap_rows(self) -> int:
        """Weight rows between two taps of source B."""
        return self.sources[-1].weight_rows if self.parity else self._tap_rows

    @property
    def _tap_rows(self) -> int:
        return sum(s.weight_rows for s in self.sources)

    @property
    def weight_rows(self) -> int:
        """All rows of the packed weight matrix."""
        if self.parity:
            rest = sum(s.weight_rows for s in self.sources[1:])
            return PARITY_TAPS * self.sources[0].weight_rows + 9 * rest
        return 9 * self._tap_rows

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
    """``([rows, N] float32, [N] float32)``: the packed weight matrix and bias of a launch.

    Without `ConvLaunch.parity`, row ``tap * tap_rows + offset(source) + c`` holds input
    channel ``c`` of a source at ``tap = 3 * kh + kw``. With it, source A's rows come
    first as ``(4 * parity + t) * rows_A + c`` (2x2 tap ``t`` of parity ``2 * py + px``,
    the summed 3x3 taps), then the other sources' 9 taps from `ConvLaunch.b_base`.

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
    packed = np.zeros((launch.weight_rows, launch.weight_cols), np.float32)
    n = launch.out_channels
    first = 0
    for index, source in enumerate(launch.sources):
        part = weight[:, first : first + source.channels]  # [O, C, 3, 3]
        if index == 0 and launch.parity:
            folded = fold_parity(part)  # [parity 2 * py + px, tap, O, C], summed in f32
            for parity in range(4):
                for t in range(4):
                    row = (4 * parity + t) * source.weight_rows
                    packed[row : row + source.channels, :n] = folded[parity, t].T
        else:
            base = launch.b_base if index > 0 else 0
            if not launch.parity:
                base = sum(s.weight_rows for s in launch.sources[:index])
            stride = launch.b_tap_rows if index > 0 else launch.a_tap_rows
            for kh in range(3):
                for kw in range(3):
                    row = base + (3 * kh + kw) * stride
                    packed[row : row + source.channels, :n] = part[:, :, kh, kw].T
        first += source.channels
    packed_bias = np.zeros(launch.weight_cols, np.float32)
    packed_bias[:n] = bias
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
