"""The fp16 conv kernels compute the bits that bench/fp16_emulator.py predicts.

docs/benchmarks.md ("Where fp16 loses accuracy") splits the wgpu fp16 error by source with
that emulation; these tests keep it true to the kernels, for every ``accumulation``: f16
partials of 32 (``f16-partials``), 16 (``f16-chains16``) or 8 (``f16-chains``) products in the
implicit-GEMM K order (taps outer, input blocks inner, each source padded to whole vec4s), partials
of 32 made of 2 (``f16-pairs``) or 4 (``f16-lanes``) f16 chains added in f16, partials of 4 in the
final layer, or every product summed in f32 (``f32``); f32 accumulation from the bias, f16 output
storage; in each FMA include of the generator (K steps or rows outer, paired shared loads or
not). A
device's f16 ``fma`` may round once (native f16 hardware) or after the product and the sum
(lavapipe); there the output must be one of the two emulations, bit for bit. Vulkan lets a
GPU driver evaluate f16 operations at higher precision (NVIDIA's H200 driver does: most values
differ from both emulations), so on a GPU adapter the kernel must be at least as close to the
exact result as the emulated binary16 arithmetic is.
"""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.graph import ir
from oidn_gpu.kernels import conv_igemm, decoder, final_rgb
from oidn_gpu.kernels.gemm import Accumulation, FinalLayer, GemmOptions
from oidn_gpu.kernels.spec import ConvSpec, Precision
from tests import bench_scripts

from . import gpu_runner
from .conv_ref import make_case, pool2, reference, rel_l2, run_conv, upsample2

pytestmark = pytest.mark.gpu

FP16 = Precision.FP16


emu = bench_scripts.load("fp16_emulator")


def _emulate(
    spec: ConvSpec, srcs, wt, bias, group: int, fused_fma: bool, chains: int = 1
) -> np.ndarray:
    """The emulated kernel output, dense ``[H_out, W_out, O]`` float64."""
    parts = [upsample2(s) if src.upsample else s for s, src in zip(srcs, spec.sources, strict=True)]
    x = np.ascontiguousarray(np.concatenate(parts, axis=2).transpose(2, 0, 1), np.float32)
    y = emu.conv3x3_fp16_partials(
        x,
        wt,
        bias,
        ir.Activation.RELU if spec.relu else ir.Activation.NONE,
        source_channels=tuple(s.channels for s in spec.sources),
        group=group,
        fused_fma=fused_fma,
        chains=chains,
    ).transpose(1, 2, 0)
    if spec.pool:
        y = pool2(y)
    if spec.out_precision is FP16:
        y = emu.store_f16(y)
    return y.astype(np.float64)


# products per f16 partial of each accumulation in the implicit-GEMM and the final-layer
# kernels (0: summed in f32), and the implicit GEMM's f16 chains per partial
GROUPS = {
    Accumulation.F16_PARTIALS: (emu.GEMM_GROUP_PRODUCTS, emu.DIRECT_GROUP_PRODUCTS, 1),
    Accumulation.F16_CHAINS: (emu.CHAIN_GROUP_PRODUCTS, emu.DIRECT_GROUP_PRODUCTS, 1),
    Accumulation.F32: (0, 0, 1),
    Accumulation.F16_CHAINS16: (16, emu.DIRECT_GROUP_PRODUCTS, 1),
    Accumulation.F16_PAIRS: (emu.GEMM_GROUP_PRODUCTS, emu.DIRECT_GROUP_PRODUCTS, 2),
    Accumulation.F16_LANES: (emu.GEMM_GROUP_PRODUCTS, emu.DIRECT_GROUP_PRODUCTS, 4),
}


def _igemm(spec: ConvSpec, limits, accumulation: Accumulation, **options):
    return conv_igemm.generate(spec, GemmOptions(accumulation=accumulation, **options), limits)


def _igemm_paired(spec: ConvSpec, limits, accumulation: Accumulation):
    """Paired shared loads (two K blocks per shared element: the kpairs include)."""
    return _igemm(spec, limits, accumulation, shared_load="pair", shared_layout="padded")


def _igemm_rows(spec: ConvSpec, limits, accumulation: Accumulation):
    """Rows outer (the rows include), with two columns per invocation."""
    return _igemm(spec, limits, accumulation, accumulation_order="row-major", cols_per_thread=2)


def _igemm_rows_paired(spec: ConvSpec, limits, accumulation: Accumulation):
    return _igemm(
        spec, limits, accumulation, accumulation_order="row-major", shared_load="pair", k_tile=16
    )


CASES = {
    # name: (spec, kernel factory, height, width, final layer)
    "igemm-plain": (ConvSpec.simple(13, 32, FP16, relu=False), _igemm, 9, 13, False),
    "igemm-pool": (ConvSpec.simple(9, 13, FP16, pool=True), _igemm, 12, 10, False),
    "igemm-decoder": (decoder.decoder_spec(5, 3, 13, FP16), _igemm, 12, 10, False),
    "igemm-paired": (ConvSpec.simple(13, 32, FP16, relu=False), _igemm_paired, 9, 13, False),
    "igemm-rows": (decoder.decoder_spec(5, 3, 13, FP16), _igemm_rows, 12, 10, False),
    "igemm-rows-paired": (
        ConvSpec.simple(9, 13, FP16, pool=True),
        _igemm_rows_paired,
        12,
        10,
        False,
    ),
    "final-rgb": (
        ConvSpec.simple(32, 3, FP16, relu=True, out_precision=Precision.FP32),
        lambda spec, limits, accumulation: final_rgb.generate(
            spec, FinalLayer.SHARED_AUTO, limits, f32_sum=accumulation is Accumulation.F32
        ),
        11,
        9,
        True,
    ),
    # 4 pixels per invocation in a padded patch: the same partials, the same bits
    "final-rgb-4-pixels": (
        ConvSpec.simple(32, 3, FP16, relu=True, out_precision=Precision.FP32),
        lambda spec, limits, accumulation: final_rgb.generate(
            spec,
            FinalLayer.SHARED_AUTO,
            limits,
            pixels=4,
            patch="padded",
            f32_sum=accumulation is Accumulation.F32,
        ),
        11,
        37,
        True,
    ),
}


@pytest.mark.parametrize("accumulation", list(Accumulation), ids=lambda a: a.value)
@pytest.mark.parametrize("case", list(CASES))
def test_fp16_kernel_bits_match_the_emulation(
    case: str, accumulation: Accumulation, rng, limits
) -> None:
    spec, factory, height, width, final = CASES[case]
    group = GROUPS[accumulation][1 if final else 0]
    chains = 1 if final else GROUPS[accumulation][2]
    srcs, wt, bias = make_case(spec, height, width, rng)
    srcs = [np.abs(s) for s in srcs]  # activations after a ReLU, as in the network
    got = run_conv(factory(spec, limits, accumulation), spec, srcs, wt, bias, height, width)
    rounded_product = _emulate(spec, srcs, wt, bias, group, fused_fma=False, chains=chains)
    fused = _emulate(spec, srcs, wt, bias, group, fused_fma=True, chains=chains)
    # f32 sums round only the sum (the product of two halves is exact), however the FMA is made
    can_differ = group != 0
    assert can_differ != np.array_equal(rounded_product, fused), "the FMAs cannot be told apart"
    if not gpu_runner.is_cpu_adapter():
        exact = reference(spec, srcs, wt.astype(np.float64), bias)
        emulated = min(rel_l2(e, exact) for e in (rounded_product, fused))
        assert rel_l2(got, exact) <= 1.25 * emulated, f"{case}: less accurate than binary16"
        return
    matches = [np.array_equal(got, e) for e in (rounded_product, fused)]
    differ = min(np.count_nonzero(got != e) for e in (rounded_product, fused))
    assert any(matches), f"{case}: {differ} of {got.size} values differ from the emulation"
