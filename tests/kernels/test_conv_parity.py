"""The decoder convs' parity form (``GemmOptions.decoder_form="parity"``, `conv_parity`).

In fp32 it computes the fused decoder conv as the full form does, up to the rounding of
the folded weights and its K order; in fp16 it computes the bits that
bench/fp16_emulator.py's `decoder_parity_fp16` predicts for each accumulation (lavapipe: one
of the two f16 FMA roundings, bit for bit; a GPU: at least as close to the exact result as
binary16). Sizes: odd low-resolution sources and row counts that are not multiples of the
tile (so some workgroups of every parity run past the last row).
"""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.graph import ir
from oidn_gpu.kernels import conv_igemm, decoder, weights
from oidn_gpu.kernels.gemm import Accumulation, GemmOptions
from oidn_gpu.kernels.spec import ConvSpec, DecoderForm, Precision
from tests import bench_scripts

from . import gpu_runner
from .conv_ref import make_case, reference, rel_l2, run_conv

FP16 = Precision.FP16
FP32 = Precision.FP32
PARITY = {"decoder_form": "parity"}

emu = bench_scripts.load("fp16_emulator")

# (name, (upsampled, skip, out) channels, height, width): low-resolution sources of odd sizes
SHAPES = [
    ("5u-3-13", (5, 3, 13), 10, 14),
    ("16u-9-8-long", (16, 9, 8), 6, 38),
    ("12u-12-20-square", (12, 12, 20), 18, 18),
]
# other options the parity form must keep working with (fp32 and fp16)
VARIANTS = {
    "default": {},
    "k16-rows-output-major": {
        "k_tile": 16,
        "accumulation_order": "row-major",
        "weight_layout": "output-major",
        "cols_per_thread": 2,
    },
    "prefetch-shared-4x16": {
        "prefetch": "shared",
        "workgroup_size": (4, 16),
        "rows_per_thread": 2,
    },
    "paired-packed": {"shared_load": "pair", "shared_layout": "padded", "load_mode": "packed-all"},
}


def _spec(channels: tuple[int, int, int], precision: Precision) -> ConvSpec:
    up, skip, out = channels
    return decoder.decoder_spec(up, skip, out, precision)


def test_fold_sums_the_taps_of_each_parity() -> None:
    w = np.arange(2 * 3 * 9, dtype=np.float32).reshape(2, 3, 3, 3)
    folded = weights.fold_parity(w)
    assert folded.shape == (4, 4, 2, 3)
    # parity (0, 0): tap (0, 0) is kernel tap (0, 0) alone; tap (1, 1) the rows/cols 1, 2
    np.testing.assert_array_equal(folded[0, 0], w[:, :, 0, 0])
    np.testing.assert_array_equal(folded[0, 3], w[:, :, 1:, 1:].sum(axis=(2, 3)))
    # parity (1, 0): tap (0, 1) sums kernel rows 0, 1 and columns 1, 2
    np.testing.assert_array_equal(folded[2, 1], w[:, :, :2, 1:].sum(axis=(2, 3)))
    # every parity's four taps hold all nine weights
    every = np.broadcast_to(w.sum(axis=(2, 3)), (4, 2, 3))
    np.testing.assert_array_equal(folded.sum(axis=1), every)


def test_parity_weights_pack_per_parity_and_k() -> None:
    spec = decoder.decoder_spec(5, 3, 6, FP32)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 8, 3, 3)).astype(np.float32)
    layout = conv_igemm.WeightLayout.K_MAJOR
    packed = weights.pack_conv(spec, w, np.zeros(6), layout, parity=True)
    k = 4 * 2 + 9 * 1  # 2 upsampled blocks x 4 taps, 1 skip block x 9 taps
    table = packed.weights.reshape(4, k, 2, 4, 4)  # parity, k, ob, il, ol
    folded = weights.fold_parity(w[:, :5])
    # parity 3, tap 2 (dy 1, dx 0), upsampled block 1 lane 0 = channel 4, output 5 (block 1)
    assert table[3, 2 * 2 + 1, 1, 0, 1] == folded[3, 2, 5, 4]
    # the skip source's tap 7 (ky 2, kx 1), channel 2 (its lane 2), output 0
    assert table[1, 8 + 7, 0, 2, 0] == w[0, 5 + 2, 2, 1]
    assert not table[:, 8:, :, 3].any()  # the skip source's padding lane


def test_the_option_is_validated() -> None:
    assert GemmOptions(decoder_form="parity").decoder_form is DecoderForm.PARITY
    assert "decoder_form" not in GemmOptions().describe()  # the full form's keys stay
    with pytest.raises(InvalidArgumentError, match=r"decoder_form='half'.*'full', 'parity'"):
        GemmOptions(decoder_form="half")


def test_the_option_leaves_other_convs_and_the_full_form_alone(limits) -> None:
    plain = ConvSpec.simple(13, 32, FP32)
    pool = ConvSpec.simple(9, 8, FP32, pool=True)
    for spec in (plain, pool):
        full = conv_igemm.generate(spec, GemmOptions(), limits)
        assert conv_igemm.generate(spec, GemmOptions(**PARITY), limits) == full
    spec = decoder.decoder_spec(5, 3, 13, FP32)
    kernel = conv_igemm.generate(spec, GemmOptions(**PARITY), limits)
    assert kernel.parity_weights and "decoder_form=parity" in kernel.key
    # K: 4 taps x 2 upsampled blocks + 9 taps x 1 skip block
    assert "const TOTAL_K = 17u" in kernel.source.replace(": u32", "")
    assert not conv_igemm.generate(spec, GemmOptions(), limits).parity_weights
    assert kernel.grid(13, 10, 14) == (4, 1, 1)  # 4 parities x one 64-row tile of 35 pixels


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize(
    ("name", "channels", "height", "width"), SHAPES, ids=[s[0] for s in SHAPES]
)
def test_fp32_parity_matches_the_full_form(name, channels, height, width, variant, limits, rng):
    spec = _spec(channels, FP32)
    srcs, wt, bias = make_case(spec, height, width, rng)
    options = VARIANTS[variant]
    full_kernel = conv_igemm.generate(spec, GemmOptions(**options), limits)
    full = run_conv(full_kernel, spec, srcs, wt, bias, height, width)
    kernel = conv_igemm.generate(spec, GemmOptions(**options, **PARITY), limits)
    got = run_conv(kernel, spec, srcs, wt, bias, height, width)
    exact = reference(spec, srcs, wt.astype(np.float64), bias)
    assert rel_l2(got, exact) <= 1e-6, f"{name} {variant}: {rel_l2(got, exact):.3g}"
    assert rel_l2(got, full) <= 1e-6
    assert np.abs(got - exact).max() <= 1e-5 * np.abs(exact).max()


def _emulate(spec: ConvSpec, srcs, wt, bias, accumulation: Accumulation, fused_fma: bool):
    group = {
        Accumulation.F16_PARTIALS: emu.GEMM_GROUP_PRODUCTS,
        Accumulation.F16_CHAINS: emu.CHAIN_GROUP_PRODUCTS,
        Accumulation.F16_CHAINS16: 16,
        Accumulation.F16_PAIRS: emu.GEMM_GROUP_PRODUCTS,
        Accumulation.F16_LANES: emu.GEMM_GROUP_PRODUCTS,
        Accumulation.F32: 0,
    }[accumulation]
    chains = {Accumulation.F16_PAIRS: 2, Accumulation.F16_LANES: 4}.get(accumulation, 1)
    values = [np.ascontiguousarray(s.transpose(2, 0, 1), np.float32) for s in srcs]
    y = emu.decoder_parity_fp16(
        values,
        tuple(s.upsample for s in spec.sources),
        wt,
        bias,
        ir.Activation.RELU,
        group=group,
        fused_fma=fused_fma,
        chains=chains,
    )
    return emu.store_f16(y.transpose(1, 2, 0)).astype(np.float64)


# (accumulation, variant): every accumulation kind in the default tile, the two fastest
# accurate ones in the other FMA includes (rows outer, paired shared loads)
FP16_CASES = [
    *((a, "default") for a in ("f16-partials", "f16-chains16", "f16-pairs", "f16-lanes", "f32")),
    *((a, v) for a in ("f16-partials", "f16-chains16") for v in VARIANTS if v != "default"),
]


@pytest.mark.gpu
@pytest.mark.parametrize(("accumulation", "variant"), FP16_CASES, ids="-".join)
@pytest.mark.parametrize(
    ("name", "channels", "height", "width"), SHAPES[:2], ids=[s[0] for s in SHAPES[:2]]
)
def test_fp16_parity_bits_match_the_emulation(
    name, channels, height, width, accumulation, variant, limits, rng
):
    accumulation = Accumulation(accumulation)
    spec = _spec(channels, FP16)
    srcs, wt, bias = make_case(spec, height, width, rng)
    srcs = [np.abs(s) for s in srcs]  # activations after a ReLU, as in the network
    options = GemmOptions(accumulation=accumulation, **VARIANTS[variant], **PARITY)
    got = run_conv(conv_igemm.generate(spec, options, limits), spec, srcs, wt, bias, height, width)
    rounded_product = _emulate(spec, srcs, wt, bias, accumulation, fused_fma=False)
    fused = _emulate(spec, srcs, wt, bias, accumulation, fused_fma=True)
    if not gpu_runner.is_cpu_adapter():
        exact = reference(spec, srcs, wt.astype(np.float64), bias)
        emulated = min(rel_l2(e, exact) for e in (rounded_product, fused))
        assert rel_l2(got, exact) <= 1.25 * emulated, f"{name}: less accurate than binary16"
        return
    differ = min(np.count_nonzero(got != e) for e in (rounded_product, fused))
    assert differ == 0, f"{name}: {differ} of {got.size} values differ from the emulation"


@pytest.mark.gpu
def test_every_option_value_compiles_in_the_parity_form(limits) -> None:
    """Each value of each other option, with the parity form, on two decoder specs and both
    precisions, passes wgpu validation (create_shader_module and create_compute_pipeline)."""
    from oidn_gpu.kernels import gemm

    from .test_compile_sweep import _validate

    kernels = {}
    for name, values in gemm.option_values().items():
        if name in ("input_accumulation", "final_accumulation", "decoder_form"):
            continue
        for value in values:
            options = GemmOptions(**{name: value}, **PARITY)
            for precision in Precision:
                for spec in (_spec((5, 3, 13), precision), _spec((16, 9, 32), precision)):
                    if options.fits(precision, limits):
                        kernel = conv_igemm.generate(spec, options, limits)
                        assert kernel.parity_weights
                        kernels[kernel.key] = kernel
    assert len(kernels) > 100
    for kernel in kernels.values():
        _validate(kernel)
