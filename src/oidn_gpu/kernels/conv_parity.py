"""The parity form of the implicit-GEMM decoder conv (``GemmOptions.decoder_form="parity"``).

A decoder conv reads ``concat(upsample(low), skip)`` (`decoder`). With nearest x2
upsampling, the output pixels ``(2i + py, 2j + px)`` of one parity ``(py, px)`` read the
low-resolution source through a 2x2 kernel: tap ``(dy, dx)`` at low pixel
``(i + py + dy - 1, j + px + dx - 1)`` with the 3x3 weights of rows
``weights.PARITY_GROUPS[py][dy]`` and columns ``PARITY_GROUPS[px][dx]`` summed (in float32
when packed, `weights.pack_parity_weights`). Zero padding stays exact: the full-resolution
rows -1 and ``H`` fall on the low rows -1 and ``H / 2``. The other sources keep their 3x3
taps at full resolution. So per parity the GEMM is ``[M, K] x [K, N]`` with M = the
parity's ``(H / 2) x (W / 2)`` pixels and K = 4 taps x the upsampled blocks + 9 taps x the
others' (instead of 9 x all): the K order is per source in source order, taps outer,
blocks inner (`weights.parity_k_blocks`), and the f16 partials group that K like the full
form's (so each accumulation sums in its own order, the same under every other option).

One parity per workgroup: the workgroups are linear in ``(x, z)``, parity = index % 4, row
tile = index / 4 (the four parities of a row tile read the same input rows); each
parity's weights follow the previous one's. Every other option (tiles, K tiles, paired
and prefetched shared loads, load modes, weight layouts, accumulation orders) works as in
`conv_igemm`; the address mode does not apply: each load's output pixel and its 3x3 and
2x2 tap masks are computed once, and each K tile decodes its K lane (source, tap, block).
A conv with a fused pool, or without an upsampled source, keeps the full form.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from oidn_gpu.kernels import _common, weights
from oidn_gpu.kernels.gemm import GemmOptions
from oidn_gpu.kernels.gemm_tile import GemmTile
from oidn_gpu.kernels.spec import ConvSpec, DecoderForm, DeviceLimits, ceil_div

PARITIES = weights.PARITIES


def applies(spec: ConvSpec, options: GemmOptions) -> bool:
    """Whether ``options`` make ``spec``'s kernel in the parity form."""
    return (
        options.decoder_form is DecoderForm.PARITY
        and not spec.pool
        and any(s.upsample for s in spec.sources)
    )


def effective(spec: ConvSpec, options: GemmOptions) -> GemmOptions:
    """``options`` with the full form where the parity form does not apply (the same
    kernel, key and text as without the option)."""
    if options.decoder_form is DecoderForm.FULL or applies(spec, options):
        return options
    return replace(options, decoder_form=DecoderForm.FULL)


def k_starts(spec: ConvSpec) -> list[int]:
    """The first K block of each source, and the total K at the end."""
    upsampled = tuple(s.upsample for s in spec.sources)
    return weights.parity_k_blocks(tuple(spec.source_blocks), upsampled)


def constants(spec: ConvSpec) -> dict[str, int]:
    """The parity form's K extent (``TOTAL_K``) and each source's K segment."""
    starts = k_starts(spec)
    consts = {"TOTAL_K": starts[-1]}
    for i in range(len(spec.sources)):
        consts[f"SRC{i}_K_START"] = starts[i]
        consts[f"SRC{i}_K_END"] = starts[i + 1]
    return consts


def _fetch(source: dict[str, Any], load: int) -> str:
    """WGSL reading block ``sb`` of ``source`` at tap ``tap`` of load ``load``'s pixel."""
    i = source["index"]
    if source["upsample"]:
        return f"fetch_parity{i}(pix{load}, tap, sb, conv_w)"
    return f"fetch{i}(pix{load}.y + tap / 3u - 1u, pix{load}.x + tap % 3u - 1u, sb, conv_w)"


def context(
    sources: list[dict[str, Any]], loads: list[dict[str, Any]], weight_index: str
) -> dict[str, Any]:
    """Template variables of the parity form, over `conv_igemm.render_source`'s: the
    sources with their K segments, each load's fetch per source, the per-parity weight
    index and the store include."""
    parity_sources = [
        {**s, "k_start": f"SRC{s['index']}_K_START", "k_end": f"SRC{s['index']}_K_END"}
        for s in sources
    ]
    return {
        "parity": True,
        "parity_sources": parity_sources,
        "loads": [
            {**load, "parity_fetch": [_fetch(s, load["j"]) for s in parity_sources]}
            for load in loads
        ],
        "weight_index": f"w_class + {weight_index}",
        "store_template": "igemm/store_parity.wgsl",
    }


def grid(tile: GemmTile, out_blocks: int, limits: DeviceLimits):
    """``(gx, ceil(OB / TILE_N), gz)`` with ``gx * gz`` = 4 parities x the row tiles of one
    parity's ``(H / 2) x (W / 2)`` pixels (long images wrap to z)."""
    max_dim = limits.max_workgroups_per_dimension

    def parity_grid(channels: int, height: int, width: int) -> tuple[int, int, int]:
        row_tiles = max(1, ceil_div((height // 2) * (width // 2), tile.tile_m))
        gx, gz = _common.wrap_linear(PARITIES * row_tiles, max_dim)
        return (gx, ceil_div(out_blocks, tile.tile_n), gz)

    return parity_grid


__all__ = ["PARITIES", "applies", "constants", "context", "effective", "grid", "k_starts"]
