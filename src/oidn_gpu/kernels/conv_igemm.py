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
workgroup memory, then every invocation does ``KT * R * C`` vec4 x 4 FMAs. fp16:
products summed in one f16 partial per accumulator and group of 8 blocks (32
products, `gemm.F16_GROUP_BLOCKS`; a K tile of 16 holds two groups), folded into
the f32 accumulator; all options keep this grouping and each output's K order,
so every variant gives the same bits.

Workgroup memory: ``(TILE_M * KT [+ WG_Y]) + KT * TILE_N * (4 | 5)`` vec4s
(`GemmTile.storage_bytes`). Grid: ``(gx, ceil(OB / TILE_N), gz)`` with
``gx * gz >= ceil(M / TILE_M)``, ``gx <= max_workgroups_per_dimension`` (long
images continue in z). Bindings and params: as every conv (see `kernels`),
weights in ``options.weight_layout``. A fused pool needs ``rows_per_thread >= 4``.

Trusted: input loads are guarded by the row bound and the tap mask, weight
loads by ``ob < OB`` and ``k < K``, stores by the row and block bounds; shared
indices are compile-time bounded.
"""

from __future__ import annotations

from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError
from oidn_gpu.kernels import _common, gemm
from oidn_gpu.kernels.gemm import (
    F16_GROUP_BLOCKS,
    AccumulationOrder,
    AddressMode,
    DecoderLoad,
    GemmOptions,
    GemmTile,
    LoadMode,
)
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


def _bindings(spec: ConvSpec, packed_input: bool, packed_weights: bool):
    act = "vec2<u32>" if packed_input else spec.precision.vec4
    wt = "vec2<u32>" if packed_weights else spec.precision.vec4
    entries = [(f"input{i}", BindingKind.STORAGE_READ, act) for i in range(len(spec.sources))]
    out_vec4 = spec.out_precision.vec4  # type: ignore[union-attr]
    entries += [
        ("weights", BindingKind.STORAGE_READ, wt),
        ("bias", BindingKind.STORAGE_READ, "vec4<f32>"),
        ("output", BindingKind.STORAGE_READ_WRITE, out_vec4),
        ("params", BindingKind.UNIFORM, ""),
    ]
    return _common.make_bindings(entries)


def resolve_tile(
    spec: ConvSpec, options: GemmOptions, limits: DeviceLimits | None = None
) -> GemmTile:
    """The tile `generate` uses for ``spec`` (tile policy applied against ``limits``)."""
    return options.tile_for(spec.precision, spec.out_blocks, limits or DeviceLimits())


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
            `gemm.REGISTER_BUDGET` (such a shader is not valid on the device, or spills).
    """
    options = options or GemmOptions()
    limits = limits or DeviceLimits()
    tile = resolve_tile(spec, options, limits)
    problems = gemm.tile_problems(
        tile,
        spec.precision,
        limits,
        features=False,
        address_mode=options.address_mode,
        sources=len(spec.sources),
    )
    if problems:
        raise UnsupportedDeviceError(
            f"implicit GEMM tile {tile.describe()} ({spec.precision.value}) cannot run: "
            + "; ".join(problems)
        )
    rpt = tile.rows_per_thread
    if spec.pool and rpt < 4:
        raise InvalidArgumentError(
            f"implicit GEMM with a fused pool needs rows_per_thread >= 4, got {rpt}"
        )
    f16 = spec.precision is Precision.FP16
    packed_input = f16 and options.load_mode is LoadMode.PACKED_ALL
    packed_weights = f16 and options.load_mode in (LoadMode.PACKED_ALL, LoadMode.PACKED_WEIGHTS)
    layout = options.weight_layout
    bindings, decls = _bindings(spec, packed_input, packed_weights)

    kt = tile.k_tile
    cols = tile.cols_per_thread
    group = F16_GROUP_BLOCKS
    threads = tile.threads
    if (
        kt % group
        or threads % kt
        or (tile.tile_m * kt) % threads
        or (kt * tile.tile_n * 4) % threads
    ):  # pragma: no cover - every allowed option value divides evenly
        raise InvalidArgumentError(f"GEMM tile {tile} does not divide its K tile evenly")
    input_loads = tile.tile_m * kt // threads
    weight_loads = kt * tile.tile_n * 4 // threads
    slot_stride = threads // kt
    in_blocks = spec.in_blocks
    total_k = 9 * in_blocks
    consts = {
        "WG_X": tile.workgroup_x,
        "WG_Y": tile.workgroup_y,
        "ROWS": rpt,
        "TILE_M": tile.tile_m,
        "TILE_N": tile.tile_n,
        "K_TILE": kt,
        "IN_BLOCKS": in_blocks,
        "OUT_BLOCKS": spec.out_blocks,
        "COLS": cols,
        "TOTAL_K": total_k,
        "INPUT_TILE_SIZE": tile.input_tile_size,
        "WEIGHT_TILE_SIZE": tile.weight_tile_size,
        "ROW_GROUP": rpt * kt,
        "INPUT_ROW_STRIDE": rpt * kt + (1 if tile.padded_input else 0),
        "W_STRIDE": 5 if tile.padded_weights else 4,
        "K_ADVANCE_BLOCKS": kt % in_blocks,
        "K_ADVANCE_TAPS": kt // in_blocks,
        **_common.source_consts(spec),
    }
    target = "part" if f16 else "acc"
    # accumulator (row r, column c): acc{r}_{c} (f32), part{r}_{c} (f16 partial of one group)
    accs = [
        {"r": r, "c": c, "name": f"{r}_{c}", "col_offset": c * tile.workgroup_x}
        for r in range(rpt)
        for c in range(cols)
    ]
    columns = [{"c": c, "col_offset": c * tile.workgroup_x} for c in range(cols)]
    # K tile in f16 partial groups of F16_GROUP_BLOCKS blocks; fp32 has one group per K tile
    # (the accumulator targets of row r, one per column)
    row_targets = [
        [
            {"c": c, "target": f"{target}{r}_{c}", "col_offset": c * tile.workgroup_x}
            for c in range(cols)
        ]
        for r in range(rpt)
    ]
    groups = []
    group_size = group if f16 else kt
    for g in range(kt // group_size):
        tks = range(g * group_size, (g + 1) * group_size)
        groups.append(
            {
                "g": g,
                "rows": [
                    {
                        "r": r,
                        "steps": [{"tk": tk, "offset": r * kt + tk} for tk in tks],
                        "cols": row_targets[r],
                    }
                    for r in range(rpt)
                ],
                "ksteps": [
                    {
                        "tk": tk,
                        "rows": [
                            {"r": r, "offset": r * kt + tk, "cols": row_targets[r]}
                            for r in range(rpt)
                        ],
                    }
                    for tk in tks
                ],
            }
        )
    loads = [
        {"j": j, "row_offset": j * slot_stride, "offset": j * threads} for j in range(input_loads)
    ]
    wloads = [{"offset": j * threads} for j in range(weight_loads)]
    pool_groups = [
        {"g": g, "r0": 4 * g, "r1": 4 * g + 1, "r2": 4 * g + 2, "r3": 4 * g + 3}
        for g in range(rpt // 4)
    ]
    key = _common.conv_key(
        FAMILY,
        spec,
        f"{options.describe()} tile={tile.workgroup_x}x{tile.workgroup_y}x{rpt}x{cols}k{kt}"
        f"{'p' if tile.padded_input else ''}{'q' if tile.padded_weights else ''}",
    )
    enables = _common.enables_for(spec.precision, spec.out_precision)
    context = _common.conv_common_context(spec, layout)
    source = render(
        "conv_igemm.wgsl",
        header=f"oidn_gpu.kernels.conv_igemm {key}",
        consts=consts,
        enables=enables,
        bindings=decls,
        packed_input=packed_input,
        packed_weights=packed_weights,
        padded_input=tile.padded_input,
        padded_weights=tile.padded_weights,
        analytic=options.address_mode is AddressMode.ANALYTIC,
        base_offset=options.address_mode is AddressMode.BASE_OFFSET,
        source_first=options.decoder_load is DecoderLoad.SOURCE_FIRST and len(spec.sources) > 1,
        row_major=options.accumulation_order is AccumulationOrder.ROW_MAJOR,
        vec=spec.precision.vec4,
        rows=[{"r": r} for r in range(rpt)],
        accs=accs,
        columns=columns,
        groups=groups,
        loads=loads,
        weight_loads=wloads,
        pool_groups=pool_groups,
        **context,
    )
    tile_m = tile.tile_m
    tile_n = tile.tile_n
    out_blocks = spec.out_blocks
    pool = spec.pool
    max_dim = limits.max_workgroups_per_dimension

    def grid(channels: int, height: int, width: int) -> tuple[int, int, int]:
        rows_total = height * width * (4 if pool else 1)
        groups = max(1, ceil_div(rows_total, tile_m))
        gx = min(groups, max_dim)
        return (gx, ceil_div(out_blocks, tile_n), ceil_div(groups, gx))

    return Kernel(
        name=FAMILY,
        key=key,
        source=source,
        entry_point="main",
        workgroup_size=(tile.workgroup_x, tile.workgroup_y, 1),
        bindings=bindings,
        grid=grid,
        trusted=True,
        features=enables,
        workgroup_storage_bytes=tile.storage_bytes(spec.precision),
        params=SHAPE_PARAMS,
        weight_layout=layout,
        precision=spec.precision,
    )


__all__ = ["FAMILY", "WeightLayout", "generate", "resolve_tile"]
