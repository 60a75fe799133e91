"""Packing 3x3 conv weights and biases into the blocked vec4 layouts the kernels read.

Input: ``weight`` ``[O, I, 3, 3]`` (OIHW, as stored in ``.tza``), ``bias`` ``[O]``,
and how the ``I`` input channels split over the conv's sources (a decoder
concatenates e.g. upsampled 96 + skip 64 channels). Each source's channels are
padded to whole vec4 blocks on their own, exactly like the activation tensors,
so input block ``ib`` of the packed weights matches block ``ib`` of the
concatenated sources. Padding lanes are zero.

Layouts (``t = ky * 3 + kx``; each vec4 holds the 4 output lanes of one input
channel ``4 * ib + il`` and one tap):

- `WeightLayout.OUTPUT_MAJOR`: vec4 index ``((ob * 9 + t) * IB + ib) * 4 + il``
  (one output block's 9*IB*4 vec4s are contiguous: direct-style kernels).
- `WeightLayout.K_MAJOR`: vec4 index ``((t * IB + ib) * OB + ob) * 4 + il``
  (neighbouring output blocks are contiguous for one K step: GEMM tiles).

Weights are stored as float32 or float16 (round to nearest even); bias is
always float32, ``OB * 4`` values. Everything is vectorized NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels.spec import ConvSpec, Precision, WeightLayout, blocks


@dataclass(frozen=True)
class PackedConv:
    """Packed weights (flat, float32/float16) and bias (flat float32, ``OB * 4``)."""

    weights: np.ndarray
    bias: np.ndarray
    layout: WeightLayout
    precision: Precision


def pack_weights(
    weight: np.ndarray,
    source_channels: tuple[int, ...],
    precision: Precision,
    layout: WeightLayout,
) -> np.ndarray:
    """Pack ``weight [O, I, 3, 3]`` into a flat array in ``layout`` (see module doc).

    ``source_channels`` must sum to ``I``. Returns float32 or float16 (per
    ``precision``) of length ``OB * 9 * IB * 16``.
    """
    w = np.asarray(weight)
    if w.ndim != 4 or w.shape[2:] != (3, 3):
        raise InvalidArgumentError(f"conv weight must have shape [O, I, 3, 3], got {w.shape}")
    out_c, in_c = w.shape[:2]
    if sum(source_channels) != in_c or any(c < 1 for c in source_channels):
        raise InvalidArgumentError(
            f"source channels {tuple(source_channels)} do not sum to the weight's {in_c} inputs"
        )
    if not isinstance(layout, WeightLayout):
        raise InvalidArgumentError(f"layout must be a WeightLayout, got {layout!r}")
    ob = blocks(out_c)
    ib = sum(blocks(c) for c in source_channels)
    padded = np.zeros((ob * 4, ib * 4, 3, 3), dtype=np.float32)
    src_offset = 0
    blk_offset = 0
    for c in source_channels:
        padded[:out_c, blk_offset * 4 : blk_offset * 4 + c] = w[:, src_offset : src_offset + c]
        src_offset += c
        blk_offset += blocks(c)
    # axes: ob, ol, ib, il, ky, kx
    t = padded.reshape(ob, 4, ib, 4, 3, 3)
    if layout is WeightLayout.OUTPUT_MAJOR:
        t = t.transpose(0, 4, 5, 2, 3, 1)  # ob, ky, kx, ib, il, ol
    else:
        t = t.transpose(4, 5, 2, 0, 3, 1)  # ky, kx, ib, ob, il, ol
    return np.ascontiguousarray(t).reshape(-1).astype(precision.numpy_dtype)


def pack_bias(bias: np.ndarray) -> np.ndarray:
    """Bias ``[O]`` to float32 of length ``blocks(O) * 4`` (zero padded)."""
    b = np.asarray(bias, dtype=np.float32).reshape(-1)
    out = np.zeros(blocks(b.size) * 4, dtype=np.float32)
    out[: b.size] = b
    return out


def pack_conv(
    spec: ConvSpec,
    weight: np.ndarray,
    bias: np.ndarray,
    layout: WeightLayout = WeightLayout.OUTPUT_MAJOR,
) -> PackedConv:
    """Pack a conv's weights and bias for ``spec`` (sources, precision) in ``layout``."""
    w = np.asarray(weight)
    if w.shape[:2] != (spec.out_channels, spec.in_channels):
        raise InvalidArgumentError(
            f"weight shape {w.shape} does not match the spec's "
            f"[{spec.out_channels}, {spec.in_channels}, 3, 3]"
        )
    if np.asarray(bias).size != spec.out_channels:
        raise InvalidArgumentError(
            f"bias has {np.asarray(bias).size} values, spec has {spec.out_channels} outputs"
        )
    channels = tuple(s.channels for s in spec.sources)
    return PackedConv(
        pack_weights(w, channels, spec.precision, layout), pack_bias(bias), layout, spec.precision
    )


def unpack_activation(data: np.ndarray, channels: int, height: int, width: int) -> np.ndarray:
    """Blocked HWC activation (flat) to a dense ``[H, W, C]`` array (for tests and debugging)."""
    b = blocks(channels)
    arr = np.asarray(data).reshape(height, width, b * 4)
    return arr[:, :, :channels]


def pack_activation(image: np.ndarray, precision: Precision = Precision.FP32) -> np.ndarray:
    """Dense ``[H, W, C]`` to the blocked HWC layout (flat, zero padded lanes)."""
    arr = np.asarray(image)
    h, w, c = arr.shape
    out = np.zeros((h, w, blocks(c) * 4), dtype=precision.numpy_dtype)
    out[:, :, :c] = arr
    return out.reshape(-1)
