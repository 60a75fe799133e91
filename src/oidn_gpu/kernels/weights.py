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

Parity form (`DecoderForm.PARITY`, `pack_parity_weights`): with nearest x2 upsampling the
output pixels of parity ``(py, px)`` read an upsampled source through a 2x2 kernel at low
resolution; tap ``t = 2 * dy + dx`` sums the 3x3 taps in rows ``PARITY_GROUPS[py][dy]``
and columns ``PARITY_GROUPS[px][dx]`` (`fold_parity`, in float32). Each parity's weights
are a GEMM of its own K order (`parity_k_blocks`): per source in order, its taps (4 for an
upsampled source, else 9) outer and its blocks inner; the four parities follow each other
(``2 * py + px``), each in ``layout`` with that K in place of ``t * IB + ib``.

Weights are stored as float32 or float16 (round to nearest even); bias is
always float32, ``OB * 4`` values. Everything is vectorized NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels.spec import ConvSpec, Precision, WeightLayout, blocks

# 3x3 kernel rows (or columns) that land on 2x2 tap row (column) d of output parity p
# (nearest upsampling): parity 0 reads low rows i - 1 (kernel row 0) and i (rows 1, 2);
# parity 1 reads rows i (kernel rows 0, 1) and i + 1 (row 2).
PARITY_GROUPS = (((0,), (1, 2)), ((0, 1), (2,)))
PARITIES = 4  # output parities (py, px), numbered 2 * py + px
PARITY_TAPS = 4  # 2x2 low-resolution taps of an upsampled source, t = 2 * dy + dx


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
    _check_packing(w, source_channels, layout)
    out_c = w.shape[0]
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


def _check_packing(w: np.ndarray, source_channels: tuple[int, ...], layout: WeightLayout) -> None:
    """Raise unless ``w`` is ``[O, I, 3, 3]`` with ``source_channels`` summing to ``I``."""
    if w.ndim != 4 or w.shape[2:] != (3, 3):
        raise InvalidArgumentError(f"conv weight must have shape [O, I, 3, 3], got {w.shape}")
    in_c = w.shape[1]
    if sum(source_channels) != in_c or any(c < 1 for c in source_channels):
        raise InvalidArgumentError(
            f"source channels {tuple(source_channels)} do not sum to the weight's {in_c} inputs"
        )
    if not isinstance(layout, WeightLayout):
        raise InvalidArgumentError(f"layout must be a WeightLayout, got {layout!r}")


def fold_parity(weight: np.ndarray) -> np.ndarray:
    """``weight [O, C, 3, 3]`` summed in float32 per output parity and 2x2 tap:
    ``[PARITIES, PARITY_TAPS, O, C]`` (`PARITY_GROUPS`)."""
    w = np.asarray(weight, np.float32)
    out = np.empty((PARITIES, PARITY_TAPS, *w.shape[:2]), np.float32)
    for py in range(2):
        for px in range(2):
            for t in range(PARITY_TAPS):
                rows = PARITY_GROUPS[py][t // 2]
                cols = PARITY_GROUPS[px][t % 2]
                out[2 * py + px, t] = w[:, :, rows][:, :, :, cols].sum(axis=(2, 3))
    return out


def parity_k_blocks(source_blocks: tuple[int, ...], upsampled: tuple[bool, ...]) -> list[int]:
    """The first K block of each source in the parity form (and the total K at the end)."""
    starts = [0]
    for b, up in zip(source_blocks, upsampled, strict=True):
        starts.append(starts[-1] + (PARITY_TAPS if up else 9) * b)
    return starts


def pack_parity_weights(
    weight: np.ndarray,
    source_channels: tuple[int, ...],
    upsampled: tuple[bool, ...],
    precision: Precision,
    layout: WeightLayout,
) -> np.ndarray:
    """Pack ``weight [O, I, 3, 3]`` per output parity (see module doc): a flat float32 or
    float16 array of ``PARITIES * OB * K * 16`` values, ``K = parity_k_blocks(...)[-1]``."""
    w = np.asarray(weight, np.float32)
    _check_packing(w, source_channels, layout)
    src_blocks = tuple(blocks(c) for c in source_channels)
    starts = parity_k_blocks(src_blocks, upsampled)
    ob = blocks(w.shape[0])
    padded = np.zeros((PARITIES, ob * 4, starts[-1] * 4), np.float32)
    first = 0
    for c, b, up, k0 in zip(source_channels, src_blocks, upsampled, starts, strict=False):
        part = w[:, first : first + c]
        taps = fold_parity(part) if up else None
        for t in range(PARITY_TAPS if up else 9):
            col = (k0 + t * b) * 4
            value = taps[:, t] if taps is not None else part[None, :, :, t // 3, t % 3]
            padded[:, : w.shape[0], col : col + c] = value
        first += c
    # axes: parity, ob, ol, k, il
    t = padded.reshape(PARITIES, ob, 4, starts[-1], 4)
    order = (0, 1, 3, 4, 2) if layout is WeightLayout.OUTPUT_MAJOR else (0, 3, 1, 4, 2)
    return np.ascontiguousarray(t.transpose(order)).reshape(-1).astype(precision.numpy_dtype)


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
    parity: bool = False,
) -> PackedConv:
    """Pack a conv's weights and bias for ``spec`` (sources, precision) in ``layout``
    (``parity``: per output parity, `pack_parity_weights`)."""
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
    if parity:
        upsampled = tuple(s.upsample for s in spec.sources)
        packed = pack_parity_weights(w, channels, upsampled, spec.precision, layout)
    else:
        packed = pack_weights(w, channels, spec.precision, layout)
    return PackedConv(packed, pack_bias(bias), layout, spec.precision)


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
