"""Implicit-GEMM 3x3 convolution with shared-memory tiles and straight-line register tiles.

The conv is a GEMM ``[M, K] x [K, N]``: M = conv-resolution pixels (with a
fused pool, 4 consecutive rows are the 2x2 quad of one pooled pixel), K = 9 taps
x IB input blocks (``k = tap * IB + ib``, over the concatenated sources), N = OB
output blocks (4 output channels each).

Workgroup ``(WG_X, WG_Y)`` computes a ``TILE_M = WG_Y * R`` x ``TILE_N = WG_X * C``
tile (R = rows_per_thread, C = cols_per_thread); invocation ``(lx, ly)`` owns
output blocks ``wid.y * TILE_N + lx + c * WG_X`` (c < C) and GEMM rows
``tile_m + ly * R .. + R - 1`` in R x C named f32 accumulators (no local
arrays: the generator unrolls rows, columns and the K tile into straight-line
code). Each K step loads a ``TILE_M x KT`` input tile (KT = k_tile blocks; im2col
on the fly, zero outside the tensor) and a ``KT x TILE_N x 4`` weight tile into
workgroup memory, then every invocation does ``KT * R * C`` vec4 x 4 FMAs. fp16
(``options.accumulation``): ``f32`` widens the f16 values it reads from workgroup
memory and sums every product in the f32 accumulators; ``f16-chains`` and
``f16-partials`` sum the products in one f16 partial per accumulator and group of 2
or 8 blocks (8 or 32 products, `gemm.partial_blocks`; a K tile of 16 holds several
groups), folded into the f32 accumulator. Every other option keeps this grouping and
each output's K order, so every variant of one accumulation gives the same bits.

Paired tiles (``shared_load="pair"``, fp16): the shared arrays hold ``mat2x4<f16>``
elements, two vec4 blocks each (K blocks ``2j, 2j + 1`` of a row; weight lanes
``0, 1`` or ``2, 3`` of a (k, output block)); an invocation stores its loads into column
``local_linear & 1`` and the K loop reads two K steps per element, so every FMA and
its order stay. Prefetch (``prefetch="registers"``): the K tile's global loads go to
registers (``in*``, ``wt*``); the loop stores them to workgroup memory, passes the
barrier, issues the next tile's loads, then computes. ``prefetch="shared"`` doubles the
shared tiles: K tile k computes from half ``k % 2`` while tile k + 1 (in registers) is
stored into the other half and tile k + 2 is loaded, one barrier per K tile.

Workgroup memory: ``(TILE_M * KT [+ WG_Y]) + KT * TILE_N * (4 | 5)`` vec4s (a paired
tile's holes are whole elements: ``2 * WG_Y`` and 6 per (k, n))
(`GemmTile.storage_bytes`), plus ``WG_X * WG_Y / 2 * C`` ``vec4<f32>`` for a fused
pool with 2 rows per thread (`storage_bytes`). Grid: ``(gx, ceil(OB / TILE_N), gz)``
with ``gx * gz >= ceil(M / TILE_M)``, ``gx <= max_workgroups_per_dimension`` (long
images continue in z); a fused pool in the CHANNELS layout: ``(gx, 1, gz)`` with
``gx * gz >=`` row tiles x output-block tiles. Bindings and params: as every conv (see `kernels`),
weights in ``options.weight_layout``.

Fused pool (``spec.pool``): with 4 or 8 rows per thread an invocation holds whole
quads and reduces them in registers; with 2 rows per thread a quad spans the
invocations ``ly`` (even) and ``ly + 1``, which hands its half-quad maximum to
the first through workgroup memory (one extra barrier). ``options.pool_layout``
orders the workgroups: SPATIAL walks the row tiles in x and the output-block
tiles in y; CHANNELS (default) makes the output-block tiles of one row tile
neighbours in a linear ``(x, z)`` grid, so the workgroups that read the same
input rows run together. Max is exact, so neither choice changes a bit.

Decoder convs in the parity form (``options.decoder_form``, `conv_parity`): GEMM rows
are one output parity's low-resolution pixels, K that parity's (2x2 upsampled taps).

Trusted: input loads are guarded by the row bound and the tap mask, weight
loads by ``ob < OB`` and ``k < K``, stores by the row and block bounds (workgroups
past the last row tile load zeros and store nothing; prefetches past the last K tile
load zeros); shared indices, the pool exchange's and the double buffer's halves
included, are compile-time bounded.

The generator runs in four steps: `validate` (the tile the options resolve to,
and whether it runs within the limits), `plan_tile` (the straight-line code's
structure: accumulators, loads, K groups), `constants` (the WGSL ``const``
block) and `render_source` (every choice the options make, as flags, WGSL
expressions and include names for ``wgsl/conv_igemm.wgsl``, the skeleton, and its
per-feature parts in ``wgsl/igemm/``: ``sources`` (the per-source loads),
``fma_*`` (one K group per accumulation order, paired or not), ``tile_*`` (the
steps of the tile pipeline, listed by `k_schedule` for the prefetch mode) and
``store_*`` (the output stores, with a fused pool's exchange or not)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError
from oidn_gpu.kernels import _common, conv_parity, gemm, gemm_tile
from oidn_gpu.kernels.gemm import (
    F16_GROUP_BLOCKS,
    Accumulation,
    AccumulationOrder,
    DecoderLoad,
    GemmOptions,
    LoadMode,
    PoolLayout,
)
from oidn_gpu.kernels.gemm_tile import AddressMode, GemmTile
from oidn_gpu.kernels.spec import (
    SHAPE_PARAMS,
    BindingKind,
    ConvSpec,
    DeviceLimits,
    Kernel,
    Precision,
    WeightLayout,
    ceil_div,
)
from oidn_gpu.kernels.template import render

FAMILY = "conv-igemm"
TAPS = 9  # a 3x3 conv
POOL_ROWS = 4  # GEMM rows of one pooled pixel (its 2x2 quad)
PACKED_VEC4 = "vec2<u32>"  # four halfs in the bits of two u32s


@dataclass(frozen=True)
class TilePlan:
    """The straight-line structure of one invocation's work (template loops)."""

    input_loads: int  # input-tile vec4s each invocation loads per K step
    weight_loads: int  # weight-tile vec4s each invocation loads per K step
    slot_stride: int  # GEMM rows between an invocation's input loads
    accs: tuple[dict[str, Any], ...]  # accumulator (row r, column c)
    columns: tuple[dict[str, Any], ...]  # output block columns
    groups: tuple[dict[str, Any], ...]  # K tile in f16 partial groups (one group for fp32)
    loads: tuple[dict[str, Any], ...]
    wloads: tuple[dict[str, Any], ...]
    pool_groups: tuple[dict[str, Any], ...]  # the 4-row quads of a fused pool


def resolve_tile(
    spec: ConvSpec, options: GemmOptions, limits: DeviceLimits | None = None
) -> GemmTile:
    """The tile `generate` uses for ``spec`` (tile policy applied against ``limits``)."""
    return options.tile_for(spec.precision, spec.out_blocks, limits or DeviceLimits())


def validate(spec: ConvSpec, options: GemmOptions, limits: DeviceLimits) -> GemmTile:
    """The tile of ``spec`` under ``options``, checked against ``limits``.

    Raises:
        UnsupportedDeviceError: the tile needs more workgroup storage, invocations or
            registers than allowed.
    """
    tile = resolve_tile(spec, options, limits)
    problems = gemm_tile.tile_problems(
        tile,
        spec.precision,
        limits,
        features=False,
        address_mode=options.address_mode,
        sources=len(spec.sources),
        chains=gemm.sub_chains(options.accumulation, spec.precision),
    )
    extra = pool_exchange_bytes(spec, tile)
    if extra and not problems:
        need = tile.storage_bytes(spec.precision) + extra
        if need > limits.max_workgroup_storage_bytes:
            problems.append(
                f"{need} bytes of workgroup storage (with the pool exchange) > max "
                f"{limits.max_workgroup_storage_bytes}"
            )
    if problems:
        raise UnsupportedDeviceError(
            f"implicit GEMM tile {tile.describe()} ({spec.precision.value}) cannot run: "
            + "; ".join(problems)
        )
    kt, threads = tile.k_tile, tile.threads
    if (
        kt % F16_GROUP_BLOCKS
        or threads % kt
        or (tile.tile_m * kt) % threads
        or (kt * tile.tile_n * 4) % threads
    ):  # pragma: no cover - every allowed option value divides evenly
        raise InvalidArgumentError(f"GEMM tile {tile} does not divide its K tile evenly")
    return tile


def pool_pairs(spec: ConvSpec, tile: GemmTile) -> bool:
    """Whether a fused pool's quads span two invocations (2 rows per thread)."""
    return spec.pool and tile.rows_per_thread < POOL_ROWS


def pool_exchange_bytes(spec: ConvSpec, tile: GemmTile) -> int:
    """Workgroup memory of the half-quad exchange (0 unless `pool_pairs`)."""
    if not pool_pairs(spec, tile):
        return 0
    return tile.workgroup_x * (tile.workgroup_y // 2) * tile.cols_per_thread * 16


def storage_bytes(spec: ConvSpec, tile: GemmTile) -> int:
    """Workgroup memory the kernel declares: the shared tiles and the pool exchange."""
    return tile.storage_bytes(spec.precision) + pool_exchange_bytes(spec, tile)


def channels_first(spec: ConvSpec, options: GemmOptions) -> bool:
    """Whether the workgroups are ordered output-block tiles first (see module doc)."""
    return spec.pool and options.pool_layout is PoolLayout.CHANNELS


def _k_group(g: int, tks: range, rpt: int, kt: int, row_targets: list) -> dict[str, Any]:
    """One K group (the blocks ``tks`` of a K tile) in the shapes the FMA includes walk:
    per row (``rows``), per pair of K steps (``kpairs``) or per K step (``ksteps``).

    ``row_targets[r]`` holds row r's columns, each with the partial that every lane of an
    even (``even``) and of an odd (``odd``) K block sums into; a single step's columns carry
    those of its block as ``lanes``."""

    def step_cols(r: int, tk: int) -> list[dict[str, Any]]:
        return [{**c, "lanes": c["even" if tk % 2 == 0 else "odd"]} for c in row_targets[r]]

    return {
        "g": g,
        "rows": [
            {
                "r": r,
                "steps": [
                    {"tk": tk, "offset": r * kt + tk, "cols": step_cols(r, tk)} for tk in tks
                ],
                "spairs": [
                    {"tk0": tk, "tk1": tk + 1, "poffset": (r * kt + tk) // 2} for tk in tks[::2]
                ],
                "cols": row_targets[r],
            }
            for r in range(rpt)
        ],
        # pairs of K steps (one 16-byte shared load each when paired; K tiles are even)
        "kpairs": [
            {
                "tk0": tk,
                "tk1": tk + 1,
                "rows": [
                    {"r": r, "poffset": (r * kt + tk) // 2, "cols": row_targets[r]}
                    for r in range(rpt)
                ],
            }
            for tk in tks[::2]
        ],
        "ksteps": [
            {
                "tk": tk,
                "rows": [
                    {"r": r, "offset": r * kt + tk, "cols": step_cols(r, tk)} for r in range(rpt)
                ],
            }
            for tk in tks
        ],
    }


def chain_names(partial: str, chains: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The f16 chain of each lane of an even and of an odd K block of one partial."""
    if chains == 1:
        return (partial,) * 4, (partial,) * 4
    if chains == 2:  # even and odd blocks
        return (f"{partial}_0",) * 4, (f"{partial}_1",) * 4
    lanes = tuple(f"{partial}_{lane}" for lane in range(4))  # one chain per lane
    return lanes, lanes


def chain_sum(partial: str, chains: int) -> str:
    """WGSL of one partial from its f16 chains: ``(c0 + c1) + (c2 + c3)``."""
    names = [partial] if chains == 1 else [f"{partial}_{i}" for i in range(chains)]
    while len(names) > 1:
        pairs = [f"{names[i]} + {names[i + 1]}" for i in range(0, len(names), 2)]
        names = pairs if len(pairs) == 1 else [f"({p})" for p in pairs]
    return names[0]


def _row_targets(tile: GemmTile, target: str, chains: int) -> list[list[dict[str, Any]]]:
    """The accumulator targets of each row r, one per column (per lane of even and odd
    K blocks: `chain_names`)."""
    rows = []
    for r in range(tile.rows_per_thread):
        row = []
        for c in range(tile.cols_per_thread):
            name = f"{target}{r}_{c}"
            even, odd = chain_names(name, chains)
            offset = c * tile.workgroup_x
            row.append({"c": c, "target": name, "even": even, "odd": odd, "col_offset": offset})
        rows.append(row)
    return rows


def plan_tile(
    spec: ConvSpec, tile: GemmTile, accumulation: Accumulation = Accumulation.F16_PARTIALS
) -> TilePlan:
    """Accumulators, loads and K groups of one invocation, for the template's loops."""
    rpt, cols, kt, threads = tile.rows_per_thread, tile.cols_per_thread, tile.k_tile, tile.threads
    partial = gemm.partial_blocks(accumulation, spec.precision)
    chains = gemm.sub_chains(accumulation, spec.precision) if partial is not None else 1
    slot_stride = threads // kt
    target = "acc" if partial is None else "part"
    # accumulator (row r, column c): acc{r}_{c} (f32), part{r}_{c} (f16 partial of one group,
    # or its f16 chains part{r}_{c}_{i})
    accs = tuple(
        {
            "r": r,
            "c": c,
            "name": f"{r}_{c}",
            "col_offset": c * tile.workgroup_x,
            "parts": (
                (f"part{r}_{c}",)
                if chains == 1
                else tuple(f"part{r}_{c}_{i}" for i in range(chains))
            ),
            "partial_sum": chain_sum(f"part{r}_{c}", chains),
        }
        for r in range(rpt)
        for c in range(cols)
    )
    columns = tuple({"c": c, "col_offset": c * tile.workgroup_x} for c in range(cols))
    row_targets = _row_targets(tile, target, chains)
    group_size = partial or kt
    groups = [
        _k_group(g, range(g * group_size, (g + 1) * group_size), rpt, kt, row_targets)
        for g in range(kt // group_size)
    ]
    input_loads = tile.tile_m * kt // threads
    weight_loads = kt * tile.tile_n * 4 // threads
    return TilePlan(
        input_loads=input_loads,
        weight_loads=weight_loads,
        slot_stride=slot_stride,
        accs=accs,
        columns=columns,
        groups=tuple(groups),
        loads=tuple(
            {"j": j, "row_offset": j * slot_stride, "offset": j * threads}
            for j in range(input_loads)
        ),
        wloads=tuple({"j": j, "offset": j * threads} for j in range(weight_loads)),
        pool_groups=tuple(
            {"g": g, "r0": 4 * g, "r1": 4 * g + 1, "r2": 4 * g + 2, "r3": 4 * g + 3}
            for g in range(rpt // POOL_ROWS)
        ),
    )


def constants(spec: ConvSpec, tile: GemmTile, options: GemmOptions | None = None) -> dict[str, int]:
    """The WGSL ``const`` block: tile shape, K extent, shared strides, source blocks (and
    the fused pool's workgroup order and exchange size)."""
    pool_consts = {}
    if options is not None and channels_first(spec, options):
        pool_consts["COL_TILES"] = ceil_div(spec.out_blocks, tile.tile_n)
    if pool_pairs(spec, tile):
        pool_consts["POOL_HALF_SIZE"] = pool_exchange_bytes(spec, tile) // 16
    rpt, kt = tile.rows_per_thread, tile.k_tile
    in_blocks = spec.in_blocks
    # Paired tiles count 16-byte elements (two vec4<f16>); a padding hole is one element.
    per_element = 2 if tile.paired else 1
    # shared elements per (k, output block): (paired, padded) -> stride
    w_stride = {(False, False): 4, (False, True): 5, (True, False): 2, (True, True): 3}[
        (tile.paired, tile.padded_weights)
    ]
    return {
        "WG_X": tile.workgroup_x,
        "WG_Y": tile.workgroup_y,
        "ROWS": rpt,
        "TILE_M": tile.tile_m,
        "TILE_N": tile.tile_n,
        "K_TILE": kt,
        "IN_BLOCKS": in_blocks,
        "OUT_BLOCKS": spec.out_blocks,
        "COLS": tile.cols_per_thread,
        "TOTAL_K": TAPS * in_blocks,
        "INPUT_TILE_SIZE": tile.input_tile_size // per_element,
        "WEIGHT_TILE_SIZE": tile.weight_tile_size // per_element,
        # the shared arrays: one tile, or two with double buffering
        "INPUT_ARRAY_SIZE": tile.input_tile_size // per_element * tile.shared_buffers,
        "WEIGHT_ARRAY_SIZE": tile.weight_tile_size // per_element * tile.shared_buffers,
        "ROW_GROUP": rpt * kt,
        "INPUT_ROW_STRIDE": rpt * kt // per_element + (1 if tile.padded_input else 0),
        "W_STRIDE": w_stride,
        "K_ADVANCE_BLOCKS": kt % in_blocks,
        "K_ADVANCE_TAPS": kt // in_blocks,
        **pool_consts,
        **_common.source_consts(spec),
    }


def _packing(spec: ConvSpec, options: GemmOptions) -> tuple[bool, bool]:
    """Whether fp16 activations / weights are read as packed ``vec2<u32>`` (``load_mode``)."""
    f16 = spec.precision is Precision.FP16
    packed_input = f16 and options.load_mode is LoadMode.PACKED_ALL
    packed_weights = f16 and options.load_mode in (LoadMode.PACKED_ALL, LoadMode.PACKED_WEIGHTS)
    return packed_input, packed_weights


def _load(array: str, packed: bool) -> str:
    """WGSL reading ``array[index]`` as a vec4 (unpacking packed halfs)."""
    return f"unpack_f16x4({array}[index])" if packed else f"{array}[index]"


def _sources(spec: ConvSpec, packed_input: bool) -> list[dict[str, Any]]:
    """Per-source template data with its addressing as WGSL expressions."""
    out = []
    for s in _common.source_context(spec):
        blocks = s["blocks"]
        if s["upsample"]:  # nearest x2: a conv pixel reads the low-resolution pixel (y/2, x/2)
            index = f"((iy / 2u) * (conv_w / 2u) + ix / 2u) * {blocks} + b"
            base = f"((y / 2u) * (conv_w / 2u) + x / 2u) * {blocks}"
            note = " (nearest x2 upsampled)"
        else:
            index = f"(iy * conv_w + ix) * {blocks} + b"
            base = f"(y * conv_w + x) * {blocks}"
            note = ""
        out.append(
            {
                **s,
                "index_expr": index,
                "base_expr": base,
                "note": note,
                "load": _load(s["name"], packed_input),
            }
        )
    return out


def _fetch(source: int, load: int, block: str, base_offset: bool) -> str:
    """WGSL reading block ``block`` of ``source`` at tap ``tap`` of load ``load``'s pixel."""
    if base_offset:  # from the pixel's cached block base and parity
        return f"fetch_base{source}(base{source}_{load}, parity{load}, tap, {block}, conv_w)"
    return f"fetch{source}(pix.y + tap / 3u - 1u, pix.x + tap % 3u - 1u, {block}, conv_w)"


def _input_slot(tile: GemmTile) -> str:
    """WGSL of the shared element of input load index ``li`` (a K block of a GEMM row)."""
    if tile.paired:  # two blocks per element, one element of padding per row group
        return "li / 2u + li / ROW_GROUP" if tile.padded_input else "li / 2u"
    return "li + li / ROW_GROUP" if tile.padded_input else "li"


def _weight_slot(tile: GemmTile) -> str:
    """WGSL of the shared element of weight load index ``li`` (lane li % 4 of a (k, n))."""
    if tile.paired:  # 2 elements per (k, n), 3 when padded
        return "(li / 4u) * 3u + (li % 4u) / 2u" if tile.padded_weights else "li / 2u"
    return "li + li / 4u" if tile.padded_weights else "li"


def _step(op: str, pad: str, **values: str) -> dict[str, str]:
    return {"op": op, "pad": pad, **values}


def k_schedule(tile: GemmTile) -> dict[str, list[dict[str, str]]]:
    """The K loop's tile pipeline: the steps before the loop (``prologue``), at the top of
    each K tile (``head``) and after its FMAs (``tail``).

    A step declares the load registers (``declare``), loads a K tile into them (``fetch``,
    ``kb``: the WGSL of the tile's first K block), stores them to workgroup memory
    (``store``, ``input_base`` / ``weight_base``: the WGSL prefix of the shared index, the
    other half with double buffering), passes a barrier or advances the incremental K lane;
    ``pad`` indents its first line.
    """
    before, inside = "  ", "    "
    if tile.shared_buffers == 2:  # tile k computes while k + 1 is stored and k + 2 loaded
        prologue = [
            _step("declare", before),
            _step("fetch", before, kb="0u"),
            _step("store", before, input_base="", weight_base=""),
            _step("barrier", before),
            _step("advance", before),
            _step("fetch", before, kb="K_TILE"),
        ]
        head = []
        tail = [
            _step(
                "store",
                inside,
                input_base="INPUT_TILE_SIZE - in_cur + ",
                weight_base="WEIGHT_TILE_SIZE - w_cur + ",
            ),
            _step("advance", inside),
            _step("fetch", inside, kb="k_base + 2u * K_TILE"),
        ]
    elif tile.prefetch:  # the loads of tile k + 1 are in flight while tile k computes
        prologue = [_step("declare", before), _step("fetch", before, kb="0u")]
        head = [
            _step("store", inside, input_base="", weight_base=""),
            _step("barrier", inside),
            _step("advance", inside),
            _step("fetch", inside, kb="k_base + K_TILE"),
        ]
        tail = []
    else:
        prologue = []
        head = [
            _step("declare", inside),
            _step("fetch", inside, kb="k_base"),
            _step("store", inside, input_base="", weight_base=""),
            _step("barrier", inside),
        ]
        tail = []
    tail.append(_step("barrier", inside))
    if not tile.prefetch:
        tail.append(_step("advance", inside))
    return {"prologue": prologue, "head": head, "tail": tail}


def _fma_template(tile: GemmTile, options: GemmOptions) -> str:
    """The include that computes one K group: rows outer or K steps outer, paired or not."""
    row_major = options.accumulation_order is AccumulationOrder.ROW_MAJOR
    name = {
        (True, True): "rows_paired",
        (True, False): "rows",
        (False, True): "kpairs",
        (False, False): "ksteps",
    }[(row_major, tile.paired)]
    return f"igemm/fma_{name}.wgsl"


def render_source(
    spec: ConvSpec, options: GemmOptions, tile: GemmTile, plan: TilePlan, key: str
) -> str:
    """The WGSL of the kernel: every option decided here, the template prints it."""
    packed_input, packed_weights = _packing(spec, options)
    layout = options.weight_layout
    _, decls = _bindings(spec, packed_input, packed_weights)
    context = _common.conv_common_context(spec, layout)
    context["sources"] = _sources(spec, packed_input)  # with their addressing expressions
    base_offset = options.address_mode is AddressMode.BASE_OFFSET
    loads = [
        {
            **load,
            # the read of source i at this load's pixel and tap: block ``ib`` of the
            # concatenation, or ``sb`` inside the source (source-first loads)
            "fetch": [
                _fetch(i, load["j"], f"ib - {s['offset']}", base_offset)
                for i, s in enumerate(context["sources"])
            ],
            "fetch_in_source": [
                _fetch(i, load["j"], "sb", base_offset) for i in range(len(spec.sources))
            ],
        }
        for load in plan.loads
    ]
    partials = gemm.partial_blocks(options.accumulation, spec.precision) is not None
    # fp16 summed in f32: the f16 operands read from workgroup memory are widened (exactly)
    widen = spec.precision is Precision.FP16 and not partials
    if layout is WeightLayout.K_MAJOR:
        weight_index = "(wk * OUT_BLOCKS + wob) * 4u + rem % 4u"
    else:
        weight_index = "(wob * TOTAL_K + wk) * 4u + rem % 4u"
    consts = constants(spec, tile, options)
    store = "igemm/store_pool_pairs.wgsl" if pool_pairs(spec, tile) else "igemm/store_blocks.wgsl"
    form = {"parity": False, "loads": loads, "weight_index": weight_index, "store_template": store}
    if conv_parity.applies(spec, options):  # its K extent and per-source segments
        consts.update(conv_parity.constants(spec))
        form = conv_parity.context(context["sources"], loads, weight_index)
    return render(
        "conv_igemm.wgsl",
        header=f"oidn_gpu.kernels.conv_igemm {key}",
        consts=consts,
        enables=_common.enables_for(spec.precision, spec.out_precision),
        bindings=decls,
        unpack=packed_input or packed_weights,
        weight_load=_load("weights", packed_weights),
        # one hole per thread row group / per 4 weight vec4s when padded (bank conflicts)
        input_slot=_input_slot(tile),
        weight_slot=_weight_slot(tile),
        paired=tile.paired,
        prefetch=tile.prefetch,
        double_buffer=tile.shared_buffers == 2,
        schedule=k_schedule(tile),
        fma_template=_fma_template(tile, options),
        # double buffering: the K tile computes from the half at in_cur / w_cur
        wcur=" + w_cur" if tile.shared_buffers == 2 else "",
        row_base="lid.y * INPUT_ROW_STRIDE" + (" + in_cur" if tile.shared_buffers == 2 else ""),
        shared_type="mat2x4<f16>" if tile.paired else spec.precision.vec4,
        conv_h="out_h * 2u" if spec.pool else "out_h",
        conv_w="out_w * 2u" if spec.pool else "out_w",
        analytic=options.address_mode is AddressMode.ANALYTIC,
        base_offset=base_offset,
        source_first=options.decoder_load is DecoderLoad.SOURCE_FIRST and len(spec.sources) > 1,
        # the FMA operand type, and the conversion that brings a shared value to it
        vec="vec4<f32>" if widen else spec.precision.vec4,
        widen_open="vec4<f32>(" if widen else "",
        widen_close=")" if widen else "",
        partials=partials,
        chains=gemm.sub_chains(options.accumulation, spec.precision) if partials else 1,
        rows=[{"r": r} for r in range(tile.rows_per_thread)],
        accs=plan.accs,
        columns=plan.columns,
        groups=plan.groups,
        weight_loads=plan.wloads,
        pool_groups=plan.pool_groups,
        pool_pairs=pool_pairs(spec, tile),
        channels_first=channels_first(spec, options),
        **context,
        **form,
    )


def _bindings(spec: ConvSpec, packed_input: bool, packed_weights: bool):
    act = PACKED_VEC4 if packed_input else spec.precision.vec4
    wt = PACKED_VEC4 if packed_weights else spec.precision.vec4
    entries = [(f"input{i}", BindingKind.STORAGE_READ, act) for i in range(len(spec.sources))]
    out_vec4 = spec.out_precision.vec4  # type: ignore[union-attr]
    entries += [
        ("weights", BindingKind.STORAGE_READ, wt),
        ("bias", BindingKind.STORAGE_READ, "vec4<f32>"),
        ("output", BindingKind.STORAGE_READ_WRITE, out_vec4),
        ("params", BindingKind.UNIFORM, ""),
    ]
    return _common.make_bindings(entries)


def generate(
    spec: ConvSpec,
    options: GemmOptions | None = None,
    limits: DeviceLimits | None = None,
) -> Kernel:
    """Generate the implicit-GEMM conv for ``spec`` with ``options``.

    ``limits`` (default: WebGPU minimums) decides the output-aligned tile
    widening and the z wrap of the grid.

    Raises:
        UnsupportedDeviceError: the resolved tile needs more workgroup storage or
            invocations than ``limits`` allow, or more registers than
            `gemm_tile.REGISTER_BUDGET` (such a shader is not valid on the device, or spills).
    """
    options = conv_parity.effective(spec, options or GemmOptions())
    limits = limits or DeviceLimits()
    tile = validate(spec, options, limits)
    key = _common.conv_key(
        FAMILY,
        spec,
        f"{options.describe()} tile={tile.workgroup_x}x{tile.workgroup_y}x"
        f"{tile.rows_per_thread}x{tile.cols_per_thread}k{tile.k_tile}"
        f"{'p' if tile.padded_input else ''}{'q' if tile.padded_weights else ''}",
    )
    plan = plan_tile(spec, tile, options.accumulation)
    source = render_source(spec, options, tile, plan, key)
    packed_input, packed_weights = _packing(spec, options)
    bindings, _ = _bindings(spec, packed_input, packed_weights)
    parity = conv_parity.applies(spec, options)
    return Kernel(
        name=FAMILY,
        key=key,
        source=source,
        entry_point="main",
        workgroup_size=(tile.workgroup_x, tile.workgroup_y, 1),
        bindings=bindings,
        grid=(
            conv_parity.grid(tile, spec.out_blocks, limits)
            if parity
            else _grid(spec, tile, limits, channels_first(spec, options))
        ),
        trusted=True,
        features=_common.enables_for(spec.precision, spec.out_precision),
        workgroup_storage_bytes=storage_bytes(spec, tile),
        params=SHAPE_PARAMS,
        weight_layout=options.weight_layout,
        precision=spec.precision,
        parity_weights=parity,
    )


def _grid(spec: ConvSpec, tile: GemmTile, limits: DeviceLimits, channels_first: bool = False):
    """``(gx, ceil(OB / TILE_N), gz)`` with ``gx * gz`` row tiles (long images wrap to z);
    ``channels_first``: ``(gx, 1, gz)`` with ``gx * gz`` row tiles x column tiles."""
    tile_m, tile_n = tile.tile_m, tile.tile_n
    out_blocks = spec.out_blocks
    rows_per_pixel = POOL_ROWS if spec.pool else 1
    max_dim = limits.max_workgroups_per_dimension

    def grid(channels: int, height: int, width: int) -> tuple[int, int, int]:
        groups = max(1, ceil_div(height * width * rows_per_pixel, tile_m))
        col_tiles = ceil_div(out_blocks, tile_n)
        if channels_first:
            groups *= col_tiles
            col_tiles = 1
        gx, gz = _common.wrap_linear(groups, max_dim)
        return (gx, col_tiles, gz)

    return grid


__all__ = [
    "FAMILY",
    "TilePlan",
    "WeightLayout",
    "constants",
    "generate",
    "k_schedule",
    "plan_tile",
    "pool_exchange_bytes",
    "pool_pairs",
    "render_source",
    "resolve_tile",
    "storage_bytes",
    "validate",
]
