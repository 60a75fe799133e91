"""Kernel options where oidn-gpu and oidn-webgpu differ on purpose (docs/architecture.md)."""

from __future__ import annotations

import re

import pytest

from oidn_gpu.backends.wgpu import kernel_choice
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels import conv_igemm, decoder, select
from oidn_gpu.kernels.gemm import GemmOptions
from oidn_gpu.kernels.spec import ConvSpec, DeviceLimits, Precision


@pytest.mark.parametrize("rows", [2, 4, 8])
def test_gemm_rows_are_always_unrolled(rows):
    """oidn-webgpu's recorder sets ``gemm.unrollRows: true``; here the generator always
    unrolls the rows (one named accumulator per row, no loop but the K loop), so there is
    no option to turn it off."""
    spec = ConvSpec.simple(32, 32, Precision.FP32)
    source = conv_igemm.generate(spec, GemmOptions(rows_per_thread=rows), DeviceLimits()).source
    assert re.findall(r"for \(var (\w+)", source) == ["k_base"]
    assert sorted(set(re.findall(r"var acc(\d+)_0\b", source))) == [str(r) for r in range(rows)]
    with pytest.raises(InvalidArgumentError, match="unroll_rows"):
        kernel_choice.validate_gemm({"unroll_rows": True})


def test_forced_subgroup_runs_the_subgroup_kernel_on_decoder_convs():
    """oidn-webgpu gives fused decoder convs the direct kernel under ``kernel: 'subgroup'``
    (its subgroup kernel reads one source); oidn-gpu's subgroup kernel reads both decoder
    sources (tests/kernels/test_conv_families.py checks it against a float64 conv)."""
    limits = DeviceLimits(subgroups=True)
    spec = decoder.decoder_spec(32, 32, 32, Precision.FP32)
    chosen = select.select_conv(spec, limits, kernel="subgroup")
    assert chosen.kind is select.KernelKind.SUBGROUP and chosen.fallback_reason is None
