"""A NumPy emulation of the wgpu backend's fp16 arithmetic, one error source at a time.

The wgpu fp16 path differs from the fp32 reference (`oidn_gpu.graph.reference`) in
four places, each of which `Fp16Sources` switches on separately:

- ``input``: the input pass stores the network input (after the transfer function,
  computed in f32) as f16 (``to_output``: clamp to +-65504, then round to nearest).
- ``weights``: the packed weights are f16 (`kernels.weights.pack_weights`). The
  official weights are stored as f16 in their ``.tza`` files, so this is exact for
  them; it matters only for float32 weights. Biases stay f32 in every kernel.
- ``storage``: every conv layer stores its activated (and pooled) output as f16,
  except the final layer, whose output is f32. Max pool, upsample and concat copy
  values, so rounding the conv output is the same as rounding what is stored.
- ``partials``: the products are summed in f16. In the implicit-GEMM conv
  (``kernels/wgsl/conv_igemm.wgsl``) the K index is ``k = tap * IB + ib`` (tap
  ``ky * 3 + kx``, ``ib`` the vec4 input block over the concatenated sources, each
  source padded to whole blocks), each block's 4 lanes in order, so product
  ``j`` of an output is input channel ``j % (4 * IB)`` (padded numbering) at tap
  ``j // (4 * IB)``; products ``32 g .. 32 g + 31`` (8 blocks,
  `gemm.F16_GROUP_BLOCKS`) are summed by sequential f16 FMAs into a partial that
  starts at 0, and the partials are added in order to an f32 accumulator that
  starts at the bias. The final layer (``final_rgb`` and the other direct-family
  kernels, ``conv_common.wgsl`` ``accumulate``) sums 4 products (one input vec4)
  per partial, in the same K order. Zero padding lanes and taps outside the image
  add exact zeros, so they are skipped.

The decoder convs' parity form (GEMM option ``decoder_form="parity"``, ``Fp16Sources.parity``,
`decoder_parity_fp16`) has its own K order per output parity: per source, its taps (2x2 at
low resolution for the upsampled source, with the 3x3 weights folded in f32 and then rounded
to f16; 3x3 for the skip) outer and its padded channels inner; the groups and chains are
counted along that K as above.

An f16 ``fma(w, x, p)`` is emulated in float32 in one of two ways
(``Fp16Sources.fused_fma``): unfused (default), ``round_f16(round_f16(w * x) + p)``,
the product rounded to f16 and then the sum, which is what lavapipe (Mesa's CPU
Vulkan driver) computes: its fp16 conv kernels give exactly these bits
(tests/kernels/test_fp16_emulation.py); or fused, ``round_f16(w * x + p)``, one
rounding as a native f16 FMA does (the product of two halves is exact in float32,
the float32 sum is then rounded to f16: a double rounding that differs from one
rounding only when the float32 sum lands exactly between two halves). Partials are
assumed to stay within the f16 range (``max_partial`` in `Fp16Stats` says how large
they got at the end of each group).

With every source off, `run_graph` returns exactly `graph.reference.run_graph`'s
result (the same node functions in the same order).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from oidn_gpu.graph import ir, passes, reference
from oidn_gpu.graph.plan import plan
from oidn_gpu.kernels import weights as packing
from oidn_gpu.kernels.gemm import F16_CHAIN_BLOCKS, F16_GROUP_BLOCKS

LANES = 4  # channels per vec4 block
GEMM_GROUP_PRODUCTS = F16_GROUP_BLOCKS * LANES  # 32 products per f16 partial (conv_igemm)
CHAIN_GROUP_PRODUCTS = F16_CHAIN_BLOCKS * LANES  # 8 (conv_igemm, accumulation "f16-chains")
DIRECT_GROUP_PRODUCTS = LANES  # 4 products per f16 partial (final_rgb, conv_direct)
F16_MAX = np.float32(65504.0)  # largest finite half; to_output.wgsl saturates to it
_F16_MIN_NORMAL_BITS = np.int32(0x38800000)  # float32 bits of 2**-14, the smallest normal half
_EXPONENT_MASK = np.int32(0x7F800000)
# 1.5 * 2**13: x + 2**e * MAGIC, for 2**e <= |x| < 2**(e + 1), has a float32 ulp of 2**(e - 10),
# the spacing of halves in that binade; 1.5 keeps the sum in one binade for either sign of x.
_MAGIC = np.float32(1.5 * 2**13)
SUB_CHAINS = (1, 2, 4)  # f16 chains per partial (conv_igemm: "f16-pairs" 2, "f16-lanes" 4)
CHUNK_COLUMNS = 2048  # pixels per sequential-FMA pass (keeps the work arrays in cache)


def round_f16(
    x: np.ndarray, out: np.ndarray | None = None, scratch: np.ndarray | None = None
) -> np.ndarray:
    """Round float32 values to the nearest half (ties to even), returned as float32.

    Equal to ``x.astype(np.float16).astype(np.float32)`` for ``|x| <= 65504``
    (subnormal halves included) at a fraction of its cost; larger values are not
    mapped to infinity. Works in place when ``out is x``; ``scratch`` is an optional
    int32 work array of ``x``'s shape.
    """
    x = np.asarray(x, np.float32)
    if out is None:
        out = np.empty_like(x)
    magic = np.bitwise_and(x.view(np.int32), _EXPONENT_MASK, out=scratch)
    np.maximum(magic, _F16_MIN_NORMAL_BITS, out=magic)  # below 2**-14 the spacing is 2**-24
    scale = magic.view(np.float32)
    np.multiply(scale, _MAGIC, out=scale)
    np.add(x, scale, out=out)
    np.subtract(out, scale, out=out)
    return out


def store_f16(x: np.ndarray) -> np.ndarray:
    """What ``to_output`` stores as f16: clamp to +-65504, round to the nearest half."""
    return round_f16(np.clip(x, -F16_MAX, F16_MAX).astype(np.float32, copy=False))


@dataclass(frozen=True)
class Fp16Sources:
    """Which fp16 error sources are on (see the module doc).

    Attributes:
        input: the network input stored as f16.
        weights: the conv weights rounded to f16.
        storage: conv outputs stored as f16 (not the final layer's).
        partials: products summed in f16 partials.
        fused_fma: f16 FMAs round once (a native f16 FMA) rather than after the
            product and after the sum (lavapipe).
        gemm_group: products per f16 partial in the GEMM layers (the kernel: 32).
        final_group: products per f16 partial in the final layer (the kernel: 4).
        layers: conv layers that ``weights``, ``storage`` and ``partials`` apply to;
            None for all of them.
        f32_layers: conv layers whose products are summed in f32 even with ``partials``
            on (f16 operands and storage, f32 accumulation: the products of two halves
            are exact in f32, so such a layer sums as the fp32 reference does).
        chains: f16 chains per GEMM partial (1, 2 or 4; `SUB_CHAINS`): with 2, even and odd
            input blocks of a group go to two chains; with 4, each lane of a block to its
            own; the chains are added in f16 (``(c0 + c1) + (c2 + c3)``) before the f32
            fold. The final layer keeps one chain.
        layer_groups: ``(layer, group)`` or ``(layer, (group, chains))``: products per f16
            partial (0: every product added in f32 in the kernels' K order) and chains of
            single layers, over ``gemm_group`` / ``final_group`` and ``chains``.
        parity: the decoder convs in the parity form (`decoder_parity_fp16`: folded
            weights, 2x2 low-resolution taps per output parity, its K order).
    """

    input: bool = False
    weights: bool = False
    storage: bool = False
    partials: bool = False
    fused_fma: bool = False
    gemm_group: int = GEMM_GROUP_PRODUCTS
    final_group: int = DIRECT_GROUP_PRODUCTS
    layers: frozenset[str] | None = None
    f32_layers: frozenset[str] = frozenset()
    chains: int = 1
    layer_groups: tuple[tuple[str, int | tuple[int, int]], ...] = ()
    parity: bool = False

    def __post_init__(self) -> None:
        for name in ("gemm_group", "final_group"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} is {getattr(self, name)}; expected at least 1")
        if self.chains not in SUB_CHAINS:
            raise ValueError(f"chains is {self.chains}; expected one of {SUB_CHAINS}")

    def applies(self, layer: str) -> bool:
        return self.layers is None or layer in self.layers


ALL_SOURCES = Fp16Sources(input=True, weights=True, storage=True, partials=True)


@dataclass
class Fp16Stats:
    """What one emulated run saw: the largest |f16 partial| at a group's end, per layer."""

    max_partial: dict[str, float] = field(default_factory=dict)


def padded_channels(source_channels: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """Index of each input channel in the block layout (each source padded to whole vec4s),
    and the padded channel count (``4 * IB``)."""
    index = []
    offset = 0
    for channels in source_channels:
        index.extend(range(offset, offset + channels))
        offset += -(-channels // LANES) * LANES
    return np.asarray(index, np.int64), offset


def conv3x3_fp16_partials(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    activation: ir.Activation,
    *,
    source_channels: tuple[int, ...],
    group: int,
    fused_fma: bool = False,
    stats: dict[str, float] | None = None,
    name: str = "",
    chains: int = 1,
) -> np.ndarray:
    """3x3 conv (stride 1, zero padding 1) with f16 partial sums of ``group`` products.

    Args:
        x: ``[I, H, W]`` float32.
        weight: ``(O, I, 3, 3)``; bias: ``(O,)`` (added in float32 first).
        source_channels: how the ``I`` channels split over concatenated sources.
        group: products per f16 partial, counted in the padded K order; 0: every product
            added to the float32 accumulator in that order (a kernel that sums in f32: the
            product of two halves is exact in float32, so an f32 FMA rounds only the sum).
        fused_fma: round ``p + w * x`` once instead of after the product and the sum.
        chains: f16 chains per partial (`Fp16Sources.chains`), added in f16 at its end.

    Returns:
        ``[O, H, W]`` float32 (activated).
    """
    channels, height, width = x.shape
    out_channels = weight.shape[0]
    cols = reference.im2col(np.asarray(x, np.float32))  # row tap * I + i
    wm = reference.weight_matrix(weight, np.float32)  # [O, 9 * I], same row order
    index, padded = padded_channels(source_channels)
    if index.size != channels:
        raise ValueError(f"source channels {source_channels} do not sum to the input's {channels}")
    k = (np.arange(reference.KERNEL_TAPS)[:, None] * padded + index[None, :]).reshape(-1)
    if group == 0:
        return _conv3x3_f32_sum(cols, wm, bias, activation, np.argsort(k, kind="stable"), x.shape)
    out, largest = _sum_products(cols, wm, k, bias, group, chains, fused_fma)
    if stats is not None:
        stats[name] = max(stats.get(name, 0.0), largest)
    if activation is ir.Activation.RELU:
        np.maximum(out, 0, out=out)
    return out.reshape(out_channels, height, width)


def _sum_products(cols, wm, k, bias, group: int, chains: int, fused_fma: bool):
    """``([O, P] float32, largest |partial|)``: the bias plus the products of the rows of
    ``cols`` and ``wm`` (K index ``k``, non-decreasing) in f16 partials of ``group``."""
    out_channels, pixels = wm.shape[0], cols.shape[1]
    group_of = k // group  # non-decreasing along the rows
    starts = np.flatnonzero(np.diff(group_of, prepend=-1))
    ends = np.append(starts[1:], k.size)
    out = np.empty((out_channels, pixels), np.float32)
    bias32 = np.asarray(bias, np.float32)[:, None]
    largest = 0.0
    for j0 in range(0, pixels, CHUNK_COLUMNS):
        j1 = min(j0 + CHUNK_COLUMNS, pixels)
        xs = cols[:, j0:j1]
        acc = np.repeat(bias32, j1 - j0, axis=1)
        part = np.empty_like(acc)
        term = np.empty_like(acc)
        scratch = np.empty(acc.shape, np.int32)
        for start, end in zip(starts, ends, strict=True):
            if chains == 1:
                _f16_chain(wm, xs, range(start, end), part, term, scratch, fused_fma)
            else:
                part = _f16_chains(wm, xs, k, range(start, end), chains, term, scratch, fused_fma)
            np.add(acc, part, out=acc)
            largest = max(largest, float(np.abs(part).max()))
        out[:, j0:j1] = acc
    return out, largest


def _f16_chain(wm, xs, rows, part, term, scratch, fused_fma: bool) -> None:
    """Sum the products of ``rows`` (in order) by sequential f16 FMAs into ``part``."""
    rows = list(rows)
    np.multiply(wm[:, rows[0], None], xs[rows[0]], out=part)
    round_f16(part, out=part, scratch=scratch)
    for row in rows[1:]:
        np.multiply(wm[:, row, None], xs[row], out=term)
        if not fused_fma:
            round_f16(term, out=term, scratch=scratch)
        np.add(term, part, out=term)
        round_f16(term, out=part, scratch=scratch)


def _f16_chains(wm, xs, k, rows, chains, term, scratch, fused_fma: bool) -> np.ndarray:
    """One partial as ``chains`` f16 chains (by block parity for 2, by lane for 4) added
    in f16 as ``(c0 + c1) + (c2 + c3)``; a chain without products is 0."""
    if chains == 2:
        chain_of = {row: int(k[row] // LANES) % 2 for row in rows}
    else:
        chain_of = {row: int(k[row] % LANES) for row in rows}
    parts = []
    for c in range(chains):
        mine = [row for row in rows if chain_of[row] == c]
        part = np.zeros_like(term)
        if mine:
            _f16_chain(wm, xs, mine, part, term, scratch, fused_fma)
        parts.append(part)
    while len(parts) > 1:
        parts = [round_f16(parts[i] + parts[i + 1]) for i in range(0, len(parts), 2)]
    return parts[0]


def _conv3x3_f32_sum(cols, wm, bias, activation, order, shape) -> np.ndarray:
    """`conv3x3_fp16_partials` with ``group=0``: products added in float32 in ``order``."""
    _, height, width = shape
    acc = np.repeat(np.asarray(bias, np.float32)[:, None], height * width, axis=1)
    term = np.empty_like(acc)
    for row in order:
        np.multiply(wm[:, row, None], cols[row], out=term)
        np.add(acc, term, out=acc)
    if activation is ir.Activation.RELU:
        np.maximum(acc, 0, out=acc)
    return acc.reshape(wm.shape[0], height, width)


def decoder_parity_fp16(
    values: list[np.ndarray],
    upsampled: tuple[bool, ...],
    weight: np.ndarray,
    bias: np.ndarray,
    activation: ir.Activation,
    *,
    group: int,
    round_weights: bool = True,
    fused_fma: bool = False,
    chains: int = 1,
    stats: dict[str, float] | None = None,
    name: str = "",
) -> np.ndarray:
    """A decoder conv in the parity form (``decoder_form="parity"``, `kernels.conv_parity`).

    Per output parity ``(py, px)``, the K order is per source, its taps outer (2x2 at low
    resolution for an upsampled source, 3x3 else) and its padded channels inner
    (`kernels.weights.parity_k_blocks`); an upsampled source's weights are the float32 sums
    of `kernels.weights.fold_parity`, rounded to f16 after the sum when ``round_weights``
    (as packed); the products are summed as `conv3x3_fp16_partials` does (``group`` 0: in
    f32 in that order).

    Args:
        values: the sources ``[C_s, h, w]`` float32, an upsampled one at half resolution.
        upsampled: which sources are nearest x2 upsampled.
        weight: ``(O, sum C_s, 3, 3)`` as in the model (float32); bias ``(O,)``.

    Returns:
        ``[O, H, W]`` float32 (activated), H and W twice the upsampled sources'.
    """
    full = [v for v, up in zip(values, upsampled, strict=True) if not up]
    low = next(v for v, up in zip(values, upsampled, strict=True) if up)
    lh, lw = low.shape[1:]
    for v in full:
        if v.shape[1:] != (2 * lh, 2 * lw):
            raise ValueError(f"source of shape {v.shape} does not match the upsampled {low.shape}")
    wt = np.asarray(weight, np.float32)
    rounded = round_f16 if round_weights else (lambda a: np.asarray(a, np.float32))
    channels = tuple(v.shape[0] for v in values)
    starts = packing.parity_k_blocks(tuple(-(-c // LANES) for c in channels), upsampled)
    out = np.empty((wt.shape[0], 2 * lh, 2 * lw), np.float32)
    largest = 0.0
    for cls in range(packing.PARITIES):
        py, px = divmod(cls, 2)
        cols, wms, ks = [], [], []
        first = 0
        for v, up, k0 in zip(values, upsampled, starts, strict=False):
            c = v.shape[0]
            part = wt[:, first : first + c]
            pad = np.pad(np.asarray(v, np.float32), ((0, 0), (1, 1), (1, 1)))
            blocks = -(-c // LANES)
            folded = packing.fold_parity(part)[cls] if up else None
            for t in range(packing.PARITY_TAPS if up else reference.KERNEL_TAPS):
                if up:  # low row i + py + dy - 1 is padded row i + py + dy
                    y0, x0 = py + t // 2, px + t % 2
                    cols.append(pad[:, y0 : y0 + lh, x0 : x0 + lw].reshape(c, -1))
                    wms.append(rounded(folded[t]))
                else:  # full row 2i + py + ky - 1 is padded row 2i + py + ky
                    y0, x0 = py + t // 3, px + t % 3
                    tap = pad[:, y0 : y0 + 2 * lh : 2, x0 : x0 + 2 * lw : 2]
                    cols.append(tap.reshape(c, -1))
                    wms.append(rounded(part[:, :, t // 3, t % 3]))
                ks.append((k0 + t * blocks) * LANES + np.arange(c))
            first += c
        col, wm, k = np.concatenate(cols), np.concatenate(wms, axis=1), np.concatenate(ks)
        if group == 0:  # every product added in f32 in K order
            acc = np.repeat(np.asarray(bias, np.float32)[:, None], col.shape[1], axis=1)
            for row in range(k.size):
                acc += wm[:, row, None] * col[row]
        else:
            acc, big = _sum_products(col, wm, k, bias, group, chains, fused_fma)
            largest = max(largest, big)
        out[:, py::2, px::2] = acc.reshape(-1, lh, lw)
    if stats is not None and group:
        stats[name] = max(stats.get(name, 0.0), largest)
    if activation is ir.Activation.RELU:
        np.maximum(out, 0, out=out)
    return out


@dataclass(frozen=True)
class _RoundedConv:
    weight: np.ndarray
    bias: np.ndarray


def _value_channels(graph: ir.Graph) -> dict[str, int]:
    channels = {graph.input: graph.input_channels}
    for node in graph.nodes:
        if isinstance(node, ir.Conv):
            channels[node.name] = node.out_channels
        elif isinstance(node, (ir.ConvPool, ir.DecoderConv)):
            channels[node.name] = node.conv.out_channels
        else:
            channels[node.name] = node.channels
    return channels


def _conv_sources(graph: ir.Graph) -> dict[str, tuple[int, ...]]:
    """Conv layer -> the channel counts of the sources its input concatenates."""
    channels = _value_channels(graph)
    concats = {n.name: n for n in graph.nodes if isinstance(n, ir.Concat)}
    result = {}
    for node in graph.nodes:
        if isinstance(node, ir.DecoderConv):
            result[node.conv.name] = tuple(s.channels for s in node.sources)
        elif isinstance(node, (ir.Conv, ir.ConvPool)):
            conv = node if isinstance(node, ir.Conv) else node.conv
            concat = concats.get(conv.input)
            result[conv.name] = (
                tuple(channels[v] for v in concat.inputs) if concat else (conv.in_channels,)
            )
    return result


def _layer_sum(sources: Fp16Sources, layer: str, final: bool) -> tuple[int, int]:
    """(products per f16 partial, f16 chains per partial) of one conv layer."""
    group = dict(sources.layer_groups).get(
        layer, sources.final_group if final else sources.gemm_group
    )
    if isinstance(group, tuple):
        return group
    return group, 1 if final else sources.chains


def run_graph(
    graph: ir.Graph,
    convs: Mapping[str, reference.ConvParams],
    x: np.ndarray,
    sources: Fp16Sources = Fp16Sources(),
    stats: Fp16Stats | None = None,
) -> np.ndarray:
    """`graph.reference.run_graph` in float32 with the fp16 error ``sources`` switched on.

    Returns:
        The network output ``[C_out, H, W]`` float32.
    """
    x = np.asarray(x)
    if x.ndim != 3 or x.shape[0] != graph.input_channels:
        raise ValueError(
            f"network input has shape {x.shape}; expected ({graph.input_channels}, H, W)"
        )
    if sources.parity:  # the decoder convs as the wgpu backend runs them
        graph = passes.fuse_decoder(graph, channel_align=1)
    conv_sources = _conv_sources(graph)
    weights = _rounded_weights(convs, sources)
    partial_stats = stats.max_partial if stats is not None else None

    def conv(node: ir.Conv, value: np.ndarray) -> np.ndarray:
        params = weights[node.name]
        if not (sources.partials and sources.applies(node.name)) or node.name in sources.f32_layers:
            return reference.conv3x3(value, params.weight, params.bias, node.activation)
        group, chains = _layer_sum(sources, node.name, node.name == graph.output)
        return conv3x3_fp16_partials(
            value,
            params.weight,
            params.bias,
            node.activation,
            source_channels=conv_sources[node.name],
            group=group,
            fused_fma=sources.fused_fma,
            stats=partial_stats,
            name=node.name,
            chains=chains,
        )

    execution = plan(graph, x.shape[1], x.shape[2])
    first = x.astype(np.float32)
    values: dict[str, np.ndarray] = {graph.input: store_f16(first) if sources.input else first}
    for step in execution.steps:
        node = step.node
        inputs = tuple(values[v] for v in node.inputs)
        if isinstance(node, ir.Conv):
            value = conv(node, inputs[0])
        elif isinstance(node, ir.ConvPool):
            value = reference.max_pool(conv(node.conv, inputs[0]))
        elif isinstance(node, ir.DecoderConv) and sources.parity:
            value = _parity_conv(graph, node, inputs, convs[node.conv.name], sources, partial_stats)
        elif isinstance(node, ir.DecoderConv):
            parts = [
                reference.upsample(v) if s.upsample else v
                for s, v in zip(node.sources, inputs, strict=True)
            ]
            value = conv(node.conv, np.concatenate(parts, axis=0))
        else:
            value = reference.run_node(node, inputs, weights)
        layer = node.conv.name if isinstance(node, (ir.ConvPool, ir.DecoderConv)) else node.name
        if (
            sources.storage
            and isinstance(node, (ir.Conv, ir.ConvPool, ir.DecoderConv))
            and sources.applies(layer)
            and node.name != graph.output
        ):
            value = store_f16(value)
        values[node.name] = value
        for name in set(node.inputs) | {node.name}:
            if execution.last_use[name] <= step.index:
                del values[name]
    return values[graph.output]


def _rounded_weights(convs, sources: Fp16Sources) -> dict[str, reference.ConvParams]:
    """The convs' weights as the fp16 kernels hold them (f16 where ``sources.weights``)."""
    weights: dict[str, reference.ConvParams] = dict(convs)
    if sources.weights:
        for name, params in convs.items():
            if sources.applies(name):
                weights[name] = _RoundedConv(
                    round_f16(np.asarray(params.weight, np.float32)), params.bias
                )
    return weights


def _parity_conv(graph, node: ir.DecoderConv, inputs, params, sources: Fp16Sources, stats):
    """One decoder conv of `run_graph` in the parity form (`decoder_parity_fp16`), its
    weights folded from the unrounded ``params``."""
    name = node.conv.name
    summed = sources.partials and sources.applies(name) and name not in sources.f32_layers
    group, chains = _layer_sum(sources, name, name == graph.output) if summed else (0, 1)
    return decoder_parity_fp16(
        list(inputs),
        tuple(s.upsample for s in node.sources),
        params.weight,
        params.bias,
        node.conv.activation,
        group=group,
        round_weights=sources.weights and sources.applies(name),
        fused_fma=sources.fused_fma,
        chains=chains,
        stats=stats,
        name=name,
    )


class EmulatedExecutor:
    """A network executor (``run(x)``) for `HostTileRunner` that runs `run_graph`."""

    def __init__(self, model, sources: Fp16Sources = Fp16Sources()) -> None:
        self.model = model
        self.sources = sources
        self.stats = Fp16Stats()

    def run(self, x: np.ndarray) -> np.ndarray:
        return run_graph(self.model.graph, self.model.convs, x, self.sources, self.stats)
