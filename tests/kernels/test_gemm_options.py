"""Implicit-GEMM options: validation, every value swept, a pairwise-covering set, bit identity.

The sweep and the pairwise rows run a decoder conv (upsampled 5 + skip 9
channels -> 64, so the output-aligned tile policy widens the tile) on lavapipe.
Every variant must match the float64 reference and be bit-identical to the
default options' output: the options change scheduling, never the K order or
the f16 partial grouping.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError
from oidn_gpu.kernels import conv_igemm, conv_spatial, final_rgb, gemm, gemm_tile, select
from oidn_gpu.kernels.final_rgb import FinalVariant
from oidn_gpu.kernels.gemm import FinalLayer, GemmOptions
from oidn_gpu.kernels.spec import ConvSpec, DeviceLimits, Precision, WeightLayout

from .conv_ref import make_case, reference, rel_l2, run_conv, tolerance

H, W = 6, 10
# Options that shape the implicit-GEMM kernel (pool_layout and the final_* options pick other
# kernels: they are swept in test_conv_families, tests/gpu/test_gemm_sweep.py and below).
IGEMM_OPTIONS = [
    "tile_policy",
    "decoder_load",
    "shared_layout",
    "accumulation_order",
    "load_mode",
    "address_mode",
    "weight_layout",
    "rows_per_thread",
    "workgroup_size",
    "cols_per_thread",
    "k_tile",
    "shared_load",
    "prefetch",
]


def _values(name: str) -> list[object]:
    values = list(gemm.option_values()[name])
    if name == "shared_layout":
        values = [None, *values]
    return values


def _spec(precision: Precision):
    from oidn_gpu.kernels.decoder import decoder_spec

    return decoder_spec(5, 9, 64, precision)


_CASES: dict[Precision, tuple] = {}
_DEFAULT_OUT: dict[Precision, np.ndarray] = {}


def _case(precision: Precision):
    if precision not in _CASES:
        spec = _spec(precision)
        _CASES[precision] = (spec, *make_case(spec, H, W, np.random.default_rng(7)))
    return _CASES[precision]


def _run(options: GemmOptions, precision: Precision, limits: DeviceLimits) -> np.ndarray:
    spec, srcs, wt, bias = _case(precision)
    kernel = conv_igemm.generate(spec, options, limits)
    got = run_conv(kernel, spec, srcs, wt, bias, H, W)
    assert np.all(np.isfinite(got))
    err = rel_l2(got, reference(spec, srcs, wt.astype(np.float64), bias))
    assert err <= tolerance(precision), f"{kernel.key}: relative L2 {err:.3g}"
    return got


def _default(precision: Precision, limits: DeviceLimits) -> np.ndarray:
    if precision not in _DEFAULT_OUT:
        _DEFAULT_OUT[precision] = _run(GemmOptions(), precision, limits)
    return _DEFAULT_OUT[precision]


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("option", "bad"),
    [
        ("tile_policy", "sometimes"),
        ("decoder_load", "lazy"),
        ("pool_layout", "rows"),
        ("shared_layout", "banked"),
        ("accumulation_order", "diagonal"),
        ("final_layer", "tensor-core"),
        ("load_mode", "packed-some"),
        ("address_mode", "magic"),
        ("weight_layout", "input-major"),
        ("tile_policy", "wide"),
        ("rows_per_thread", 3),
        ("rows_per_thread", True),
        ("workgroup_size", (8, 32)),
        ("workgroup_size", (32, 8)),
        ("cols_per_thread", 3),
        ("cols_per_thread", 8),
        ("k_tile", 4),
        ("k_tile", 32),
        ("workgroup_size", 8),
        ("shared_load", "quad"),
        ("prefetch", "global"),
        ("final_pixels", 3),
        ("final_pixels", 8),
        ("final_pixels", True),
        ("final_patch", "banked"),
        ("accumulation", "f64"),
    ],
)
def test_invalid_option_names_option_value_and_allowed(option: str, bad: object) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        GemmOptions(**{option: bad})
    text = str(info.value)
    assert option in text and repr(bad) in text and "allowed" in text


def test_wgpu_accumulation_option_is_validated_and_reaches_the_gemm_options() -> None:
    from oidn_gpu.backends.wgpu.options import ACCUMULATIONS, WgpuOptions

    assert ACCUMULATIONS == (
        "f32",
        "f16-chains",
        "f16-partials",
        "f16-chains16",
        "f16-pairs",
        "f16-lanes",
    )
    assert GemmOptions().accumulation is gemm.Accumulation.F32
    assert WgpuOptions(accumulation="f16-partials").accumulation == "f16-partials"
    with pytest.raises(InvalidArgumentError, match="unknown accumulation 'f8'; expected 'f32'"):
        WgpuOptions(accumulation="f8")


def test_options_accept_strings_and_enums() -> None:
    a = GemmOptions(
        weight_layout="output-major", address_mode="base-offset", workgroup_size=[16, 4]
    )
    b = GemmOptions(
        weight_layout=WeightLayout.OUTPUT_MAJOR,
        address_mode=gemm.AddressMode.BASE_OFFSET,
        workgroup_size=(16, 4),
    )
    assert a == b and hash(a) == hash(b)


def test_limits_checks() -> None:
    small = DeviceLimits(max_workgroup_storage_bytes=8192, max_invocations_per_workgroup=64)
    big = GemmOptions(workgroup_size=(16, 8))
    assert not big.fits(Precision.FP32, small)
    with pytest.raises(UnsupportedDeviceError, match="invocations"):
        big.check_limits(Precision.FP32, small)
    with pytest.raises(UnsupportedDeviceError, match="shader-f16"):
        GemmOptions().check_limits(Precision.FP16, DeviceLimits())
    GemmOptions().check_limits(Precision.FP32, DeviceLimits())
    # output-aligned widening only when the wide tile fits
    lim = DeviceLimits(max_workgroup_storage_bytes=16384)
    assert GemmOptions().tile_for(Precision.FP32, 16, lim).workgroup_x == 8
    assert GemmOptions().tile_for(Precision.FP16, 16, lim).workgroup_x == 16
    assert GemmOptions(tile_policy="fixed").tile_for(Precision.FP16, 16, lim).workgroup_x == 8


def test_register_budget() -> None:
    """The tile that the NVIDIA Vulkan driver could not compile is refused before any shader
    exists; the analytic address mode (nothing cached per load) or a smaller tile fits."""
    lim = DeviceLimits(max_workgroup_storage_bytes=49152, shader_f16=True)
    heavy = dict(rows_per_thread=8, workgroup_size=(4, 16), cols_per_thread=4, k_tile=16)
    spilled = GemmOptions(tile_policy="fixed", address_mode="base-offset", **heavy)
    tile = spilled.base_tile(Precision.FP32)
    assert tile.input_slots == 32
    # 32 vec4<f32> accumulators + 32 slots x (mask, parity x/y, two source bases)
    assert tile.register_estimate(Precision.FP32, spilled.address_mode) == 128 + 32 * 5
    assert not spilled.fits(Precision.FP32, lim)
    assert not spilled.within_register_budget(Precision.FP32)
    with pytest.raises(UnsupportedDeviceError) as info:
        spilled.check_limits(Precision.FP32, lim)
    assert "288 registers" in str(info.value) and "analytic" in str(info.value)
    with pytest.raises(UnsupportedDeviceError, match="registers per invocation"):
        conv_igemm.generate(_spec(Precision.FP32), spilled, lim)
    analytic = GemmOptions(tile_policy="fixed", address_mode="analytic", **heavy)
    assert analytic.fits(Precision.FP16, lim) and analytic.within_register_budget(Precision.FP32)
    for options in (GemmOptions(), gemm.LARGE_GPU_OPTIONS[Precision.FP16]):
        for p in Precision:
            assert options.within_register_budget(p)


def test_prefetch_registers_and_paired_storage() -> None:
    """Prefetch holds one K tile's loaded vec4s in registers (counted in the estimate);
    paired tiles pad with whole 16-byte elements; double buffering doubles the shared
    tiles; no tile may pass 48 KiB, whatever the device reports."""
    plain = GemmOptions().base_tile(Precision.FP16)
    pre = GemmOptions(prefetch="registers").base_tile(Precision.FP16)
    assert (plain.input_slots, plain.weight_slots) == (8, 4)
    mode = gemm.AddressMode.INCREMENTAL
    assert pre.register_estimate(Precision.FP16, mode) == (
        plain.register_estimate(Precision.FP16, mode) + (8 + 4) * 2
    )
    assert pre.register_estimate(Precision.FP32, mode) == (
        plain.register_estimate(Precision.FP32, mode) + (8 + 4) * 4
    )
    pair = GemmOptions(shared_load="pair", shared_layout="padded")
    assert not pair.base_tile(Precision.FP32).paired  # fp32 vec4s are 16 bytes already
    tile = pair.base_tile(Precision.FP16)
    assert tile.paired and "paired" in tile.describe()
    assert tile.input_tile_size == 64 * 8 + 2 * 8  # one 2-block hole per thread row
    assert tile.weight_tile_size == 8 * 8 * 6  # one 2-vec4 hole per (k, output block)
    consts = conv_igemm.constants(_spec(Precision.FP16), tile)
    assert consts["INPUT_TILE_SIZE"] * 2 == tile.input_tile_size
    assert consts["INPUT_ROW_STRIDE"] == 8 * 8 // 2 + 1 and consts["W_STRIDE"] == 3
    double = GemmOptions(shared_load="pair", shared_layout="padded", prefetch="shared")
    two = double.base_tile(Precision.FP16)
    assert two.prefetch and two.shared_buffers == 2 and "double-buffered" in two.describe()
    assert two.storage_bytes(Precision.FP16) == 2 * tile.storage_bytes(Precision.FP16)
    assert two.register_estimate(Precision.FP16, mode) == pre.register_estimate(
        Precision.FP16, mode
    )
    consts = conv_igemm.constants(_spec(Precision.FP16), two)
    assert consts["INPUT_ARRAY_SIZE"] == 2 * consts["INPUT_TILE_SIZE"]
    assert consts["WEIGHT_ARRAY_SIZE"] == 2 * consts["WEIGHT_TILE_SIZE"]
    huge = DeviceLimits(max_workgroup_storage_bytes=1 << 20, max_invocations_per_workgroup=1024)
    big = GemmOptions(
        workgroup_size=(16, 16), cols_per_thread=4, k_tile=16, address_mode="analytic"
    )
    need = big.base_tile(Precision.FP32).storage_bytes(Precision.FP32)
    assert need > gemm_tile.MAX_TILE_STORAGE_BYTES
    with pytest.raises(UnsupportedDeviceError, match="> max 49152"):
        big.check_limits(Precision.FP32, huge)


def test_final_layer_variants_fit_the_workgroup_storage() -> None:
    """The final layer's pixels per invocation and patch layout resolve to what fits the
    device and 48 KiB: cached weights first, then the patch alone, then fewer pixels; a
    patch over the limit is refused before any shader exists."""
    h200 = DeviceLimits(max_workgroup_storage_bytes=49152, shader_f16=True, large_gpu=True)
    fp16 = ConvSpec.simple(32, 3, Precision.FP16, relu=False, out_precision=Precision.FP32)
    fp32 = ConvSpec.simple(32, 3, Precision.FP32, relu=False, out_precision=Precision.FP32)
    auto, both = FinalLayer.SHARED_AUTO, FinalLayer.SHARED_INPUT_WEIGHTS
    # the defaults: one pixel, dense patch, weights cached
    assert final_rgb.resolve(fp16, auto, h200) == FinalVariant(both)
    # 10 rows of 34 pixels x 9 vec4<f16>, each row padded from 306 to 312 (8 modulo 16)
    # elements, + 288 weight vec4s = 27,264 bytes
    layout = conv_spatial.patch_layout(fp16, 4, True)
    assert (layout.width, layout.pixel_stride, layout.row_stride) == (34, 9, 312)
    assert conv_spatial.storage_bytes(fp16, True, 4, True) == 10 * 312 * 8 + 288 * 8
    assert conv_spatial.patch_layout(fp32, 4, True).row_stride == 34 * 9  # fp32: no row pad
    assert conv_spatial.patch_layout(fp16, 4).dense
    assert final_rgb.resolve(fp16, auto, h200, 4, "padded") == FinalVariant(both, 4, True)
    # fp32: 4 pixels dense with weights is 48,128 bytes; padded only the patch (48,960) fits
    assert final_rgb.resolve(fp32, auto, h200, 4) == FinalVariant(both, 4)
    assert final_rgb.resolve(fp32, auto, h200, 4, "padded") == FinalVariant(
        FinalLayer.SHARED_INPUT, 4, True
    )
    # 64 input channels on a device reporting 64 KiB: 48 KiB still bound it; 2 pixels fit
    big = DeviceLimits(max_workgroup_storage_bytes=65536)
    wide = ConvSpec.simple(64, 3, Precision.FP32, relu=False, out_precision=Precision.FP32)
    assert final_rgb.resolve(wide, auto, big, 4) == FinalVariant(FinalLayer.SHARED_INPUT, 2)
    with pytest.raises(UnsupportedDeviceError, match="> max 49152"):
        conv_spatial.generate(wide, pixels=4, limits=big)
    with pytest.raises(UnsupportedDeviceError, match="87040 bytes"):
        conv_spatial.generate(wide, pixels=4)
    with pytest.raises(InvalidArgumentError, match="allowed values: 1, 2, 4"):
        conv_spatial.generate(wide, pixels=3)
    # shared-input-weights keeps the weights cached or runs the direct conv (oidn-webgpu):
    # 4 padded pixels with weights do not fit, 2 do; 112 channels fit without cached weights
    assert final_rgb.resolve(fp32, both, h200, 4, "padded") == FinalVariant(both, 2, True)
    widest = ConvSpec.simple(112, 3, Precision.FP32, relu=False, out_precision=Precision.FP32)
    assert final_rgb.resolve(widest, both, big, 4) == FinalVariant(FinalLayer.DIRECT)
    assert final_rgb.generate(widest, both, big, pixels=4).name == "conv-direct"
    assert final_rgb.resolve(widest, auto, big) == FinalVariant(FinalLayer.SHARED_INPUT)
    # nothing fits: the direct conv
    tiny = DeviceLimits(max_workgroup_storage_bytes=4096)
    assert final_rgb.resolve(fp32, auto, tiny, 4) == FinalVariant(FinalLayer.DIRECT)
    assert final_rgb.generate(fp32, auto, tiny, pixels=4).name == "conv-direct"
    # 5 input blocks: an odd pixel stride already, so padding changes nothing in fp32;
    # in fp16 it pads the rows (18 x 5 = 90 -> 104 elements)
    odd = ConvSpec.simple(20, 3, Precision.FP32, relu=False, out_precision=Precision.FP32)
    assert final_rgb.resolve(odd, auto, h200, 2, "padded") == FinalVariant(both, 2)
    odd16 = ConvSpec.simple(20, 3, Precision.FP16, relu=False, out_precision=Precision.FP32)
    assert final_rgb.resolve(odd16, auto, h200, 2, "padded") == FinalVariant(both, 2, True)
    assert conv_spatial.patch_layout(odd16, 2, True).row_stride == 104
    # select passes the options on: a 32x8-pixel workgroup tile, and its grid
    options = GemmOptions(final_pixels=4, final_patch="padded")
    chosen = select.select_conv(fp16, h200, gemm=options, final=True)
    assert chosen.kind is select.KernelKind.FINAL_RGB
    assert "pixels=4 patch=padded" in chosen.kernel.key
    assert chosen.kernel.grid(3, 1080, 1920) == (60, 135, 1)
    # the large-GPU default: 2 pixels per invocation in a padded patch, summed in f32
    default = select.select_conv(fp16, h200, final=True).kernel
    assert "pixels=2 patch=padded sum=f32" in default.key
    assert default.grid(3, 1080, 1920) == (120, 135, 1)
    one = select.select_conv(fp16, h200, gemm=GemmOptions(), final=True).kernel
    assert "pixels" not in one.key and one.grid(3, 1080, 1920) == (240, 135, 1)


@pytest.mark.gpu
def test_select_falls_back_from_a_tile_over_the_register_budget(limits) -> None:
    from oidn_gpu.kernels import select

    spilled = GemmOptions(
        tile_policy="fixed",
        address_mode="base-offset",
        rows_per_thread=8,
        workgroup_size=(4, 16),
        cols_per_thread=4,
        k_tile=16,
    )
    chosen = select.select_conv(_spec(Precision.FP32), limits, gemm=spilled)
    assert chosen.kind.value == "direct"
    assert "does not fit" in chosen.fallback_reason


# ----------------------------------------------------------------------------- sweep


def _sweep_cases() -> list[tuple[str, object]]:
    cases = []
    for name in IGEMM_OPTIONS:
        default = getattr(GemmOptions(), name)
        for value in _values(name):
            if value != default:
                cases.append((name, value))
    return cases


def _id(case: tuple[str, object]) -> str:
    name, value = case
    v = getattr(value, "value", value)
    if isinstance(v, tuple):
        v = "x".join(map(str, v))
    return f"{name}={v}"


def _sweep_params() -> list[object]:
    """Every (option value, precision); load_mode and shared_load change fp16 kernels only,
    so their fp32 cases would repeat the default's text and are left out."""
    return [
        pytest.param(case, precision, id=f"{_id(case)}-{precision.value}")
        for precision in (Precision.FP32, Precision.FP16)
        for case in _sweep_cases()
        if not (case[0] in FP16_ONLY and precision is Precision.FP32)
    ]


FP16_ONLY = ("load_mode", "shared_load")  # options without effect on fp32 kernels


@pytest.mark.gpu
@pytest.mark.parametrize(("case", "precision"), _sweep_params())
def test_sweep_each_value(case: tuple[str, object], precision: Precision, limits) -> None:
    name, value = case
    options = GemmOptions(**{name: value})
    got = _run(options, precision, limits)
    np.testing.assert_array_equal(got, _default(precision, limits))


# ----------------------------------------------------------------------------- pairwise


def all_pairs(
    parameters: dict[str, list[object]],
    valid: Callable[[dict[str, object]], bool] = lambda row: True,
) -> list[dict[str, object]]:
    """A greedy covering array of strength 2: every value pair of every two parameters appears
    in some row for which ``valid`` holds.

    Deterministic: rows are built one at a time, each starting from the first uncovered pair
    and choosing, parameter by parameter, the value covering the most uncovered pairs (ties:
    first value). A row that is not ``valid`` is repaired by changing one parameter outside
    the starting pair, the last parameters first, to its best-scoring value that makes the
    row valid; when no single change does, the parameters outside the starting pair are
    reset to their first values, the last parameters first, until the row is valid.
    """
    names = list(parameters)
    uncovered = {
        (a, va, b, vb)
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        for va in range(len(parameters[a]))
        for vb in range(len(parameters[b]))
    }

    def key(x: str, vx: int, y: str, vy: int) -> tuple[str, int, str, int]:
        return (x, vx, y, vy) if names.index(x) < names.index(y) else (y, vy, x, vx)

    def ranked(name: str, row: dict[str, int]) -> list[int]:
        """Values of ``name`` by how many uncovered pairs they make with ``row`` (best first)."""
        score = {
            v: sum(key(name, v, o, ov) in uncovered for o, ov in row.items() if o != name)
            for v in range(len(parameters[name]))
        }
        return sorted(score, key=lambda v: (-score[v], v))

    def values(row: dict[str, int]) -> dict[str, object]:
        return {n: parameters[n][row[n]] for n in names}

    rows: list[dict[str, int]] = []
    while uncovered:
        a, va, b, vb = min(
            uncovered, key=lambda t: (names.index(t[0]), t[1], names.index(t[2]), t[3])
        )
        row = {a: va, b: vb}
        for name in names:
            if name not in row:
                row[name] = ranked(name, row)[0]
        if not valid(values(row)):
            repaired = next(
                (
                    {**row, name: v}
                    for name in reversed(names)
                    if name not in (a, b)
                    for v in ranked(name, row)
                    if valid(values({**row, name: v}))
                ),
                None,
            )
            if repaired is None:  # reset the others to their first values, last ones first
                trial = dict(row)
                for name in reversed(names):
                    if name not in (a, b):
                        trial[name] = 0
                        if valid(values(trial)):
                            repaired = trial
                            break
            if repaired is None:
                raise ValueError(f"no valid row holds {a}={va!r} with {b}={vb!r}")
            row = repaired
        for i, x in enumerate(names):
            for y in names[i + 1 :]:
                uncovered.discard((x, row[x], y, row[y]))
        rows.append(row)
    return [values(row) for row in rows]


# The pairwise rows must run on every test device: lavapipe has 32 KiB of workgroup storage
# (the H200 48 KiB), and no tile may exceed the register budget.
_TEST_DEVICES = DeviceLimits(
    max_workgroup_storage_bytes=32768,
    max_invocations_per_workgroup=1024,
    max_workgroup_size_x=1024,
    max_workgroup_size_y=1024,
    shader_f16=True,
)


def _runs_everywhere(row: dict[str, object]) -> bool:
    options = {k: v for k, v in row.items() if k != "precision"}
    return GemmOptions(**options).fits(row["precision"], _TEST_DEVICES)  # type: ignore[arg-type]


def _pairwise_params() -> dict[str, list[object]]:
    params = {name: _values(name) for name in IGEMM_OPTIONS}
    params["precision"] = [Precision.FP32, Precision.FP16]
    return params


def _pairwise_rows() -> list[dict[str, object]]:
    """Rows that fit every test device (the limits exclude no pair, only larger tuples)."""
    return all_pairs(_pairwise_params(), _runs_everywhere)


def test_all_pairs_covers_every_pair() -> None:
    params = _pairwise_params()
    rows = _pairwise_rows()
    names = list(params)
    for a, b in itertools.combinations(names, 2):
        seen = {(repr(r[a]), repr(r[b])) for r in rows}
        assert len(seen) == len(params[a]) * len(params[b]), (a, b)
    assert all(_runs_everywhere(r) for r in rows)
    assert not all(_runs_everywhere(r) for r in all_pairs(params))  # the repair was needed
    assert len(rows) < 60
    assert rows == _pairwise_rows()  # deterministic


def test_all_pairs_repairs_invalid_rows_and_reports_impossible_pairs() -> None:
    params = {"x": [0, 1], "y": [0, 1], "z": [0, 1]}
    rows = all_pairs(params, lambda r: not (r["x"] == 1 and r["y"] == 1 and r["z"] == 1))
    assert all(not (r["x"] == r["y"] == r["z"] == 1) for r in rows)
    for a, b in itertools.combinations(params, 2):
        assert {(r[a], r[b]) for r in rows} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    with pytest.raises(ValueError, match="no valid row"):
        all_pairs(params, lambda r: not (r["x"] == 1 and r["y"] == 1))


@pytest.mark.gpu
@pytest.mark.parametrize(
    "row", _pairwise_rows(), ids=lambda r: "-".join(_id(kv)[len(kv[0]) + 1 :] for kv in r.items())
)
def test_pairwise(row: dict[str, object], limits) -> None:
    row = dict(row)
    precision = row.pop("precision")
    got = _run(GemmOptions(**row), precision, limits)  # type: ignore[arg-type]
    np.testing.assert_array_equal(got, _default(precision, limits))  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- other shapes

# Shapes the decoder case above does not reach: 8 and 13 output blocks (no widening, so
# BALANCED takes its tall workgroup and columns per thread narrow), few input blocks (enc_conv0)
# and a fused pool (13 output blocks: several output-block tiles, so the pool layout orders
# workgroups differently), each against the default options' bits.
_SHAPES = {
    "plain-9-32": lambda p: ConvSpec.simple(9, 32, p),
    "pool-13-32": lambda p: ConvSpec.simple(13, 32, p, pool=True),
    "plain-20-52": lambda p: ConvSpec.simple(20, 52, p, relu=False),
}
# (each fits lavapipe's 32 KiB of workgroup storage in fp32)
_SHAPE_OPTIONS = [
    GemmOptions(tile_policy="balanced"),
    GemmOptions(tile_policy="balanced", cols_per_thread=2, load_mode="packed-all"),
    GemmOptions(
        cols_per_thread=2,
        k_tile=16,
        workgroup_size=(8, 16),
        rows_per_thread=4,
        shared_layout="linear",
        tile_policy="output-aligned",
    ),
    GemmOptions(
        cols_per_thread=4,
        rows_per_thread=4,
        workgroup_size=(4, 16),
        k_tile=16,
        tile_policy="output-aligned",
    ),
    GemmOptions(cols_per_thread=2, tile_policy="fixed", accumulation_order="row-major"),
    # a fused pool's quad split over two invocations, and the spatial workgroup order
    GemmOptions(rows_per_thread=2),
    GemmOptions(rows_per_thread=2, cols_per_thread=2, pool_layout="spatial"),
    GemmOptions(pool_layout="spatial", workgroup_size=(4, 4)),
    # paired shared tiles and register prefetch, with the shapes they were swept with on an
    # H200 (bench/wgsl_sweep/fp16_configs.json) and the layouts and orders they change
    GemmOptions(tile_policy="balanced", shared_load="pair", prefetch="registers"),
    GemmOptions(tile_policy="balanced", shared_load="pair", prefetch="registers", k_tile=16),
    GemmOptions(tile_policy="balanced", shared_load="pair", cols_per_thread=2),
    GemmOptions(shared_load="pair", shared_layout="padded", accumulation_order="row-major"),
    GemmOptions(shared_load="pair", rows_per_thread=2, prefetch="registers"),
    GemmOptions(prefetch="registers", address_mode="base-offset", decoder_load="source-first"),
    GemmOptions(
        tile_policy="balanced", shared_load="pair", shared_layout="padded", prefetch="shared"
    ),
    GemmOptions(prefetch="shared", rows_per_thread=2, k_tile=16, address_mode="analytic"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("precision", [Precision.FP32, Precision.FP16], ids=lambda p: p.value)
@pytest.mark.parametrize("shape", list(_SHAPES))
def test_other_shapes_bit_identical(shape: str, precision: Precision, limits) -> None:
    spec = _SHAPES[shape](precision)
    h, w = (8, 10) if spec.pool else (7, 9)
    srcs, wt, bias = make_case(spec, h, w, np.random.default_rng(11))
    ref = reference(spec, srcs, wt.astype(np.float64), bias)
    base = run_conv(conv_igemm.generate(spec, GemmOptions(), limits), spec, srcs, wt, bias, h, w)
    assert rel_l2(base, ref) <= tolerance(precision)
    for options in _SHAPE_OPTIONS:
        got = run_conv(conv_igemm.generate(spec, options, limits), spec, srcs, wt, bias, h, w)
        np.testing.assert_array_equal(got, base, err_msg=options.describe())
