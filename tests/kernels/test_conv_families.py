"""Every conv family, the pool and the fused variants on lavapipe vs a float64 NumPy conv.

fp32: relative L2 <= 1e-5; fp16: <= 2e-3 and finite. Odd channel counts,
non-square sizes, ReLU on and off; repeated runs are bit-identical.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from oidn_gpu.kernels import (
    _common,
    conv_direct,
    conv_igemm,
    conv_pool,
    conv_spatial,
    conv_subgroup,
    decoder,
    final_rgb,
    gemm,
    pool,
)
from oidn_gpu.kernels import weights as wpack
from oidn_gpu.kernels.gemm import FinalLayer, FinalPatch, GemmOptions, PoolLayout
from oidn_gpu.kernels.spec import ConvSource, ConvSpec, PoolSpec, Precision

from . import gpu_runner
from .conv_ref import check_conv, make_case, pool2, reference, rel_l2, run_conv, tolerance

pytestmark = pytest.mark.gpu

PRECISIONS = [Precision.FP32, Precision.FP16]


def _plain(p: Precision, relu: bool = True) -> ConvSpec:
    return ConvSpec.simple(9, 13, p, relu=relu)


def _decoder(p: Precision) -> ConvSpec:
    return decoder.decoder_spec(5, 3, 13, p)


@pytest.mark.parametrize("precision", PRECISIONS, ids=lambda p: p.value)
@pytest.mark.parametrize(
    "case",
    ["plain-relu", "plain-linear", "pool", "decoder", "wide-in"],
)
def test_direct(case: str, precision: Precision, rng) -> None:
    spec = {
        "plain-relu": _plain(precision),
        "plain-linear": _plain(precision, relu=False),
        "pool": ConvSpec.simple(5, 9, precision, pool=True),
        "decoder": _decoder(precision),
        "wide-in": ConvSpec.simple(73, 32, precision, relu=False),
    }[case]
    h, w = (10, 14) if spec.pool or spec.decoder else (7, 11)
    check_conv(conv_direct.generate(spec), spec, h, w, rng, repeat=case == "plain-relu")


@pytest.mark.parametrize("precision", PRECISIONS, ids=lambda p: p.value)
@pytest.mark.parametrize("case", ["plain", "pool", "decoder"])
def test_igemm(case: str, precision: Precision, rng, limits) -> None:
    spec = {
        "plain": ConvSpec.simple(13, 32, precision, relu=False),
        "pool": ConvSpec.simple(9, 13, precision, pool=True),
        "decoder": _decoder(precision),
    }[case]
    h, w = (12, 10) if case != "plain" else (9, 13)
    kernel = conv_igemm.generate(spec, GemmOptions(), limits)
    check_conv(kernel, spec, h, w, rng, repeat=case == "plain")


@pytest.mark.parametrize("precision", PRECISIONS, ids=lambda p: p.value)
@pytest.mark.parametrize("rows", [2, 4, 8])
def test_conv_pool_forms(rows: int, precision: Precision, rng, limits) -> None:
    spec = ConvSpec.simple(3, 9, precision, relu=rows == 4, pool=True)
    gemm = conv_pool.generate(spec, "implicit-gemm", GemmOptions(rows_per_thread=rows), limits)
    direct = conv_pool.generate(spec, "direct")
    a = check_conv(gemm, spec, 8, 14, rng)
    assert direct.name == "conv-direct"
    check_conv(direct, spec, 8, 14, rng)
    assert a.shape == (4, 7, 9)


@pytest.mark.parametrize("precision", PRECISIONS, ids=lambda p: p.value)
@pytest.mark.parametrize("case", ["plain", "decoder"])
def test_spatial(case: str, precision: Precision, rng) -> None:
    spec = _plain(precision) if case == "plain" else _decoder(precision)
    check_conv(conv_spatial.generate(spec), spec, 10, 18, rng)


@pytest.mark.parametrize("precision", PRECISIONS, ids=lambda p: p.value)
@pytest.mark.parametrize("case", ["plain", "decoder"])
def test_subgroup(case: str, precision: Precision, rng, limits) -> None:
    assert limits.subgroups, "lavapipe exposes subgroups; the subgroup kernel must run"
    spec = _plain(precision, relu=False) if case == "plain" else _decoder(precision)
    check_conv(conv_subgroup.generate(spec), spec, 10, 6, rng)


@pytest.mark.parametrize("precision", PRECISIONS, ids=lambda p: p.value)
@pytest.mark.parametrize("mode", [m for m in FinalLayer if m is not FinalLayer.SHARED_AUTO])
def test_final_rgb(mode: FinalLayer, precision: Precision, rng, limits) -> None:
    spec = ConvSpec.simple(32, 3, precision, relu=False, out_precision=Precision.FP32)
    kernel = final_rgb.generate(spec, mode, limits)
    expected = "conv-direct" if mode is FinalLayer.DIRECT else "conv-final-rgb"
    assert kernel.name == expected
    check_conv(kernel, spec, 11, 9, rng)


# Sizes that are no multiple of the 8x8 (1 pixel), 16x8 or 32x8 (2, 4 pixels) workgroup tile,
# among them one narrower than a 4-pixel tile's second pixel column (9 < 8 + 8 = 16 is not,
# 7 < 8 is: a workgroup whose invocations all stop after their first pixel).
FINAL_SIZES = [(11, 9), (13, 17), (9, 37), (5, 7)]
FINAL_MODES = [FinalLayer.SHARED_INPUT, FinalLayer.SHARED_INPUT_WEIGHTS]
SENTINEL = np.float32(-12345.0)  # fills the slack after the output: no store may reach it


def _run_final(kernel, spec: ConvSpec, case, h: int, w: int) -> np.ndarray:
    """The final layer's dense ``[H, W, 3]`` output; the output buffer has a sentinel-filled
    slack of one 32-pixel row after the image, which must stay untouched."""
    srcs, wt, bias = case
    packed = wpack.pack_conv(spec, wt, bias, kernel.weight_layout)
    size = h * w * 4
    slack = 32 * 4
    init = np.concatenate([np.zeros(size, np.float32), np.full(slack, SENTINEL, np.float32)])
    raw = gpu_runner.run(
        kernel,
        {
            "input0": wpack.pack_activation(srcs[0], spec.precision),
            "weights": packed.weights,
            "bias": packed.bias,
        },
        {"output": init.nbytes},
        {"height": h, "width": w},
        (spec.out_channels, h, w),
        output_init={"output": init},
    )["output"]
    data = np.frombuffer(raw, np.float32)
    assert np.all(data[size:] == SENTINEL), f"{kernel.key} {h}x{w}: a store past the image"
    return wpack.unpack_activation(data[:size], spec.out_channels, h, w).astype(np.float64)


@pytest.mark.parametrize("precision", PRECISIONS, ids=lambda p: p.value)
@pytest.mark.parametrize("in_channels", [32, 13, 20])
def test_final_rgb_pixels_and_patch_give_the_default_bits(
    in_channels: int, precision: Precision, rng, limits
) -> None:
    """Every final_pixels x final_patch x shared variant computes the one-pixel default's
    bits, at sizes that are not multiples of the tile; the default itself matches the
    float64 reference. With 32 input channels in fp32 the 4-pixel patch (43,520 bytes)
    exceeds lavapipe's 32 KiB, so those variants resolve to 2 pixels; 20 channels are 5
    blocks, an odd pixel stride already, so padding changes only fp16's row stride."""
    spec = ConvSpec.simple(in_channels, 3, precision, relu=True, out_precision=Precision.FP32)
    default = final_rgb.generate(spec, FinalLayer.SHARED_AUTO, limits)
    assert "pixels=" not in default.key and "patch=" not in default.key
    cases = {hw: make_case(spec, *hw, rng) for hw in FINAL_SIZES}
    expected = {}
    for (h, w), case in cases.items():
        expected[h, w] = _run_final(default, spec, case, h, w)
        srcs, wt, bias = case
        ref = reference(spec, srcs, wt.astype(np.float64), bias)
        assert rel_l2(expected[h, w], ref) <= tolerance(precision), (h, w)
    variants = 0
    for mode in FINAL_MODES:
        for pixels in gemm.FINAL_PIXELS:
            for patch in FinalPatch:
                chosen = final_rgb.resolve(spec, mode, limits, pixels, patch)
                kernel = final_rgb.generate(spec, mode, limits, pixels=pixels, patch=patch)
                assert kernel.name == final_rgb.FAMILY
                assert kernel.workgroup_storage_bytes <= limits.max_workgroup_storage_bytes
                assert kernel.grid(3, 8, 8 * chosen.pixels + 1) == (2, 1, 1)
                if chosen.pixels > 1:
                    assert f"pixels={chosen.pixels}" in kernel.key
                assert ("patch=padded" in kernel.key) is chosen.padded
                # padding acts on an even block count (the pixel stride) and in fp16 (rows)
                acts = spec.in_blocks % 2 == 0 or precision is Precision.FP16
                assert chosen.padded is (patch is FinalPatch.PADDED and acts)
                if (chosen.mode, chosen.pixels, chosen.padded) != (mode, pixels, chosen.padded):
                    # only a patch over the device's storage shrinks the variant
                    asked = conv_spatial.storage_bytes(
                        spec, mode is FinalLayer.SHARED_INPUT_WEIGHTS, pixels, chosen.padded
                    )
                    assert asked > limits.max_workgroup_storage_bytes, (mode, pixels, patch)
                for (h, w), case in cases.items():
                    got = _run_final(kernel, spec, case, h, w)
                    np.testing.assert_array_equal(got, expected[h, w], err_msg=f"{kernel.key}")
                variants += 1
    assert variants == 12


@pytest.mark.parametrize("precision", PRECISIONS, ids=lambda p: p.value)
@pytest.mark.parametrize("layout", list(PoolLayout), ids=lambda v: v.value)
def test_max_pool(layout: PoolLayout, precision: Precision, rng, limits) -> None:
    channels, oh, ow = 13, 5, 7
    kernel = pool.generate(PoolSpec(channels, precision), layout, limits)
    x = rng.standard_normal((2 * oh, 2 * ow, channels)).astype(precision.numpy_dtype)
    out = gpu_runner.run(
        kernel,
        {"input": wpack.pack_activation(x, precision)},
        {"output": oh * ow * 4 * 4 * precision.itemsize},
        {"height": oh, "width": ow},
        (channels, oh, ow),
    )["output"]
    got = wpack.unpack_activation(np.frombuffer(out, precision.numpy_dtype), channels, oh, ow)
    np.testing.assert_array_equal(got, pool2(x))


def test_pool_channels_grid_wraps_into_z() -> None:
    from oidn_gpu.kernels.spec import DeviceLimits

    kernel = pool.generate(
        PoolSpec(64), PoolLayout.CHANNELS, DeviceLimits(max_workgroups_per_dimension=10)
    )
    x, y, z = kernel.grid(64, 3, 7)  # 7 * 16 blocks = 112 invocations = 14 groups
    assert (x, y, z) == (7, 1, 2)  # two even rows, none past the end


@pytest.mark.parametrize("groups", [1, 9, 10, 11, 68040, 131070, 200001])
def test_wrapped_grids_stay_even(groups: int) -> None:
    """A linear grid over the per-dimension limit wraps into rows of nearly equal length:
    at most one workgroup per extra row falls past the end (not a whole row's worth)."""
    limit = 10 if groups < 100 else 65535
    gx, gz = _common.wrap_linear(groups, limit)
    assert gx <= limit and gx * gz >= groups
    assert gx * gz - groups < gz


@pytest.mark.parametrize("case", ["plain", "pool"])
def test_igemm_wrapped_grid_gives_the_same_bits(case: str, rng, limits) -> None:
    """Row tiles wrapped into z by a small per-dimension limit give the unwrapped output."""
    spec = ConvSpec.simple(13, 32, Precision.FP16, relu=True, pool=case == "pool")
    h, w = (16, 18) if case == "pool" else (13, 17)
    plain = conv_igemm.generate(spec, GemmOptions(), limits)
    small = dataclasses.replace(limits, max_workgroups_per_dimension=3)
    wrapped = conv_igemm.generate(spec, GemmOptions(), small)
    gx, _, gz = wrapped.grid(
        spec.out_channels, h // 2 if spec.pool else h, w // 2 if spec.pool else w
    )
    assert gz > 1 and gx <= 3
    srcs, wt, bias = make_case(spec, h, w, rng)
    expected = run_conv(plain, spec, srcs, wt, bias, h, w)
    assert np.array_equal(run_conv(wrapped, spec, srcs, wt, bias, h, w), expected)


def test_decoder_spec_odd_sources(rng) -> None:
    """Three sources, the middle one upsampled, odd channel counts (fp32, direct)."""
    spec = ConvSpec((ConvSource(3), ConvSource(5, True), ConvSource(1)), 9, Precision.FP32)
    check_conv(decoder.generate(spec, "direct"), spec, 6, 10, rng)
