"""NumPy interpreter of a `graph.ir.Graph`: the golden model every backend is tested against.

Plain and obviously correct rather than fast: every node kind (fused and
unfused) is computed on whole ``[C, H, W]`` arrays, the convolution as an
im2col matrix ``[9 * I, H * W]`` times the weight matrix ``[O, 9 * I]`` (one
BLAS gemm). Values are freed after their last use (from `graph.plan`).

``dtype=np.float32`` (default) is the fp32 reference with OIDN's CPU
precision (fp32 storage, fp32 accumulation in another order);
``dtype=np.float64`` accumulates in float64 and is the accuracy yardstick for
fp32 executors. Weights are converted to ``dtype`` (exact from fp16/fp32).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.graph import ir
from oidn_gpu.graph.plan import plan

KERNEL_TAPS = 9  # 3x3


class ConvParams(Protocol):
    """Weights of one conv layer (`model.unet.ConvWeights` satisfies it)."""

    @property
    def weight(self) -> np.ndarray: ...  # (O, I, 3, 3)

    @property
    def bias(self) -> np.ndarray: ...  # (O,)


def im2col(x: np.ndarray) -> np.ndarray:
    """Patch matrix of a 3x3 zero-padded convolution.

    Args:
        x: ``[I, H, W]``.

    Returns:
        ``[9 * I, H * W]``; row ``(kh * 3 + kw) * I + i`` holds
        ``x[i, y + kh - 1, x + kw - 1]`` (zero outside the image).
    """
    channels, height, width = x.shape
    padded = np.zeros((channels, height + 2, width + 2), x.dtype)
    padded[:, 1:-1, 1:-1] = x
    cols = np.empty((3, 3, channels, height, width), x.dtype)
    for kh in range(3):
        for kw in range(3):
            cols[kh, kw] = padded[:, kh : kh + height, kw : kw + width]
    return cols.reshape(KERNEL_TAPS * channels, height * width)


def weight_matrix(weight: np.ndarray, dtype: np.dtype | type = np.float32) -> np.ndarray:
    """``(O, I, 3, 3)`` weights as the ``[O, 9 * I]`` matrix matching `im2col`'s row order."""
    out_channels = weight.shape[0]
    return np.ascontiguousarray(
        np.asarray(weight, dtype).transpose(0, 2, 3, 1).reshape(out_channels, -1)
    )


def conv3x3(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    activation: ir.Activation = ir.Activation.RELU,
) -> np.ndarray:
    """3x3 convolution, stride 1, zero padding 1, plus bias and activation, in ``x.dtype``.

    Args:
        x: ``[I, H, W]``.
        weight: ``(O, I, 3, 3)``.
        bias: ``(O,)``.
        activation: applied after the bias.

    Returns:
        ``[O, H, W]``.
    """
    channels, height, width = x.shape
    if weight.shape[1:] != (channels, 3, 3):
        raise InvalidArgumentError(
            f"conv weight has shape {weight.shape}; expected (O, {channels}, 3, 3)"
        )
    out = weight_matrix(weight, x.dtype) @ im2col(x)
    out += np.asarray(bias, x.dtype)[:, None]
    if activation is ir.Activation.RELU:
        np.maximum(out, 0, out=out)
    return out.reshape(weight.shape[0], height, width)


def max_pool(x: np.ndarray) -> np.ndarray:
    """2x2 max pool, stride 2: ``[C, H, W] -> [C, H/2, W/2]`` (H and W even)."""
    channels, height, width = x.shape
    return x.reshape(channels, height // 2, 2, width // 2, 2).max(axis=(2, 4))


def upsample(x: np.ndarray) -> np.ndarray:
    """Nearest x2: ``[C, H, W] -> [C, 2H, 2W]``, each value copied into a 2x2 block."""
    return x.repeat(2, axis=1).repeat(2, axis=2)


def _conv_node(conv: ir.Conv, x: np.ndarray, convs: Mapping[str, ConvParams]) -> np.ndarray:
    try:
        params = convs[conv.name]
    except KeyError:
        raise InvalidArgumentError(f"no weights for conv layer '{conv.name}'") from None
    return conv3x3(x, params.weight, params.bias, conv.activation)


def run_node(
    node: ir.Node, inputs: tuple[np.ndarray, ...], convs: Mapping[str, ConvParams]
) -> np.ndarray:
    """Compute one node's value from its input values (``[C, H, W]`` arrays)."""
    if isinstance(node, ir.Conv):
        return _conv_node(node, inputs[0], convs)
    if isinstance(node, ir.Pool):
        return max_pool(inputs[0])
    if isinstance(node, ir.Upsample):
        return upsample(inputs[0])
    if isinstance(node, ir.Concat):
        return np.concatenate(inputs, axis=0)
    if isinstance(node, ir.ConvPool):
        return max_pool(_conv_node(node.conv, inputs[0], convs))
    if isinstance(node, ir.DecoderConv):
        parts = [
            upsample(x) if source.upsample else x
            for source, x in zip(node.sources, inputs, strict=True)
        ]
        return _conv_node(node.conv, np.concatenate(parts, axis=0), convs)
    raise InvalidArgumentError(f"unknown node type {type(node).__name__}")


def run_graph(
    graph: ir.Graph,
    convs: Mapping[str, ConvParams],
    x: np.ndarray,
    *,
    dtype: np.dtype | type = np.float32,
) -> np.ndarray:
    """Run a whole network on one input tensor.

    Args:
        graph: fused or unfused graph.
        convs: conv layer name -> weights.
        x: network input ``[C_in, H, W]``; H and W multiples of
            ``graph.plan.size_alignment(graph)``.
        dtype: computation dtype (float32, or float64 for an accuracy yardstick).

    Returns:
        The network output ``[C_out, H, W]`` in ``dtype`` (``[3, H, W]`` for OIDN).

    Raises:
        InvalidArgumentError: wrong input rank, channel count or size, missing weights.
    """
    x = np.asarray(x)
    if x.ndim != 3 or x.shape[0] != graph.input_channels:
        raise InvalidArgumentError(
            f"network input has shape {x.shape}; expected ({graph.input_channels}, H, W)"
        )
    execution = plan(graph, x.shape[1], x.shape[2])
    values: dict[str, np.ndarray] = {graph.input: x.astype(dtype)}
    for step in execution.steps:
        node = step.node
        values[node.name] = run_node(node, tuple(values[v] for v in node.inputs), convs)
        for value in set(node.inputs) | {node.name}:
            if execution.last_use[value] <= step.index:
                del values[value]
    return values[graph.output]
