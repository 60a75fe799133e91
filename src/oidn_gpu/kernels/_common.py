"""Helpers shared by the generators: binding tables, WGSL declarations, keys, conv context."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from oidn_gpu.kernels.spec import (
    SHAPE_PARAMS,
    Binding,
    BindingKind,
    ConvSpec,
    ParamsLayout,
    Precision,
    WeightLayout,
    ceil_div,
)

_ACCESS = {
    BindingKind.STORAGE_READ: "storage, read",
    BindingKind.STORAGE_READ_WRITE: "storage, read_write",
}


def make_bindings(
    entries: Sequence[tuple[str, BindingKind, str]],
) -> tuple[tuple[Binding, ...], list[dict]]:
    """Build the binding table and the template's declaration list from (name, kind, wgsl type).

    The WGSL type of a uniform is ignored (it is always ``Params``).
    """
    table = []
    decls = []
    for index, (name, kind, wgsl_type) in enumerate(entries):
        table.append(Binding(index, name, kind))
        if kind is BindingKind.UNIFORM:
            decls.append({"index": index, "name": name, "space": "uniform", "type": "Params"})
        else:
            decls.append(
                {
                    "index": index,
                    "name": name,
                    "space": _ACCESS[kind],
                    "type": f"array<{wgsl_type}>",
                }
            )
    return tuple(table), decls


def enables_for(*precisions: Precision | None, subgroups: bool = False) -> tuple[str, ...]:
    """WGSL enable list: ``f16`` when any precision is FP16, ``subgroups`` on request."""
    out: list[str] = []
    if any(p is Precision.FP16 for p in precisions):
        out.append("f16")
    if subgroups:
        out.append("subgroups")
    return tuple(out)


def conv_bindings(spec: ConvSpec) -> tuple[tuple[Binding, ...], list[dict]]:
    """Conv binding table: input0..inputN-1, weights, bias, output, params."""
    entries: list[tuple[str, BindingKind, str]] = [
        (f"input{i}", BindingKind.STORAGE_READ, spec.precision.vec4)
        for i in range(len(spec.sources))
    ]
    out_vec4 = spec.out_precision.vec4  # type: ignore[union-attr]
    entries += [
        ("weights", BindingKind.STORAGE_READ, spec.precision.vec4),
        ("bias", BindingKind.STORAGE_READ, "vec4<f32>"),
        ("output", BindingKind.STORAGE_READ_WRITE, out_vec4),
        ("params", BindingKind.UNIFORM, ""),
    ]
    return make_bindings(entries)


def source_context(spec: ConvSpec) -> list[dict]:
    """Per-source template data: index, block count/offset consts, upsample flag."""
    out = []
    offset = 0
    for i, (s, b) in enumerate(zip(spec.sources, spec.source_blocks, strict=True)):
        out.append(
            {
                "index": i,
                "name": f"input{i}",
                "blocks": f"SRC{i}_BLOCKS",
                "offset": f"SRC{i}_OFFSET",
                "upsample": s.upsample,
                "block_count": b,
                "block_offset": offset,
                "end": f"SRC{i}_END",
                "block_end": offset + b,
                "branch": "if" if i == 0 else "} else if",
            }
        )
        offset += b
    return out


def source_consts(spec: ConvSpec) -> dict[str, int]:
    """``SRCi_BLOCKS`` / ``SRCi_OFFSET`` constants."""
    consts: dict[str, int] = {}
    for s in source_context(spec):
        consts[s["blocks"]] = s["block_count"]
        consts[s["offset"]] = s["block_offset"]
        consts[s["end"]] = s["block_end"]
    return consts


def conv_common_context(spec: ConvSpec, layout: WeightLayout, f32_sum: bool = False) -> dict:
    """Template variables every conv template uses (``f32_sum``: fp16 sums in f32)."""
    return {
        "f32_sum": f32_sum and spec.precision is Precision.FP16,
        "params_struct": SHAPE_PARAMS.wgsl(),
        "f16": spec.precision is Precision.FP16,
        "act_type": spec.precision.vec4,
        "scalar": spec.precision.scalar,
        "out_type": spec.out_precision.vec4,  # type: ignore[union-attr]
        "out_f16": spec.out_precision is Precision.FP16,
        "relu": spec.relu,
        "pool": spec.pool,
        "k_major": layout is WeightLayout.K_MAJOR,
        "sources": source_context(spec),
        "weight_array": "weights",
        "subgroup_weights": False,
    }


def conv_key(family: str, spec: ConvSpec, extra: str = "") -> str:
    """Deterministic cache key."""
    return f"{family}[{spec.describe()}{(' ' + extra) if extra else ''}]"


def f32_sum_key(spec: ConvSpec, f32_sum: bool) -> list[str]:
    """The key words of a direct-family conv that sums its fp16 products in f32."""
    return ["sum=f32"] if f32_sum and spec.precision is Precision.FP16 else []


def shape_params() -> ParamsLayout:
    return SHAPE_PARAMS


def wrap_linear(groups: int, max_dim: int) -> tuple[int, int]:
    """``(gx, gz)`` with ``gx * gz >= groups`` and ``gx <= max_dim``, for a kernel that
    numbers its workgroups linearly as ``x + z * gx``: the rows of z are made as even as
    possible, so at most ``gz - 1`` workgroups fall past the end. (Filling x to the limit
    first would leave up to ``max_dim - 1`` workgroups past the end: a 2016x2160 layer of
    68040 row tiles ran 131070 workgroups, twice the work, on an H200.)"""
    groups = max(1, groups)
    gz = ceil_div(groups, max_dim)
    return ceil_div(groups, gz), gz


def pixel_grid(wg_x: int, wg_y: int, z: int = 1) -> Callable[[int, int, int], tuple[int, int, int]]:
    """The grid of a kernel with one invocation per output pixel in ``wg_x x wg_y``
    workgroups, and ``z`` layers of them (output blocks, or 1)."""

    def grid(channels: int, height: int, width: int) -> tuple[int, int, int]:
        return (ceil_div(width, wg_x), ceil_div(height, wg_y), z)

    return grid
