"""Host-side tests of the kernel contract: params, specs, weight packing, templates, select."""

from __future__ import annotations

import struct
import subprocess
import sys

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError
from oidn_gpu.kernels import conv_direct, conv_igemm, select, template
from oidn_gpu.kernels import weights as wpack
from oidn_gpu.kernels.gemm import FinalLayer, GemmOptions
from oidn_gpu.kernels.spec import (
    SHAPE_PARAMS,
    ConvSource,
    ConvSpec,
    DeviceLimits,
    ParamField,
    ParamsLayout,
    ParamType,
    Precision,
    WeightLayout,
)


def test_params_wgsl_and_pack() -> None:
    layout = ParamsLayout(
        (ParamField("a"), ParamField("b", ParamType.I32), ParamField("s", ParamType.F32))
    )
    assert layout.wgsl() == "struct Params {\n  a: u32,\n  b: i32,\n  s: f32,\n}"
    data = layout.pack(a=3, b=-2, s=0.5)
    assert len(data) == 16 and struct.unpack("<Iif", data[:12]) == (3, -2, 0.5)
    with pytest.raises(InvalidArgumentError, match="missing"):
        layout.pack(a=1, b=2)
    with pytest.raises(InvalidArgumentError, match="unknown"):
        layout.pack(a=1, b=2, s=1.0, c=4)
    with pytest.raises(InvalidArgumentError, match="does not fit"):
        layout.pack(a=-1, b=0, s=0.0)
    assert SHAPE_PARAMS.pack(height=4, width=6)[:8] == struct.pack("<II", 4, 6)


def test_conv_spec_validation() -> None:
    with pytest.raises(InvalidArgumentError):
        ConvSpec((), 3)
    with pytest.raises(InvalidArgumentError):
        ConvSpec.simple(3, 0)
    with pytest.raises(InvalidArgumentError):
        ConvSpec((ConvSource(4, True),), 4, pool=True)
    spec = ConvSpec((ConvSource(5, True), ConvSource(9)), 13, Precision.FP16)
    assert spec.in_blocks == 2 + 3 and spec.out_blocks == 4 and spec.out_precision is Precision.FP16


def _naive_pack(weight, channels, layout):
    o, _, _, _ = weight.shape
    ob = -(-o // 4)
    ib_list = []
    c0 = 0
    for c in channels:
        for k in range(-(-c // 4) * 4):
            ib_list.append(c0 + k if k < c else None)
        c0 += c
    ib = len(ib_list) // 4
    out = np.zeros(ob * 9 * ib * 16, np.float32)
    for b in range(ob):
        for t in range(9):
            for i in range(ib):
                for il in range(4):
                    for ol in range(4):
                        src_in = ib_list[4 * i + il]
                        oc = 4 * b + ol
                        if src_in is None or oc >= o:
                            continue
                        if layout is WeightLayout.OUTPUT_MAJOR:
                            idx = ((b * 9 + t) * ib + i) * 4 + il
                        else:
                            idx = ((t * ib + i) * ob + b) * 4 + il
                        out[idx * 4 + ol] = weight[oc, src_in, t // 3, t % 3]
    return out


@pytest.mark.parametrize("layout", list(WeightLayout))
@pytest.mark.parametrize("channels", [(3,), (5, 9), (1, 2, 7)])
def test_weight_packing_matches_naive(layout, channels, rng) -> None:
    w = rng.standard_normal((13, sum(channels), 3, 3)).astype(np.float32)
    got = wpack.pack_weights(w, channels, Precision.FP32, layout)
    np.testing.assert_array_equal(got, _naive_pack(w, channels, layout))
    half = wpack.pack_weights(w, channels, Precision.FP16, layout)
    assert half.dtype == np.float16
    np.testing.assert_array_equal(half, got.astype(np.float16))


def test_pack_conv_bias_and_checks(rng) -> None:
    spec = ConvSpec.simple(5, 7)
    packed = wpack.pack_conv(spec, np.ones((7, 5, 3, 3)), np.arange(7))
    assert packed.bias.dtype == np.float32 and packed.bias.tolist() == [0, 1, 2, 3, 4, 5, 6, 0]
    with pytest.raises(InvalidArgumentError):
        wpack.pack_conv(spec, np.ones((7, 4, 3, 3)), np.arange(7))
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(wpack.unpack_activation(wpack.pack_activation(x), 5, 3, 4), x)


def test_template_strict_and_literals() -> None:
    assert template.wgsl_f32(0.1) == "1.0e-1f"
    assert template.wgsl_f32(1.0) == "1.0f"
    for value in [0.31896716, 3.4028234663852886e38, 1e-30, -2.5]:
        text = template.wgsl_f32(value)
        assert np.float32(float(text[:-1])) == np.float32(value)
    assert template.const_decl("N", 3) == "const N: u32 = 3u;"
    assert template.const_decl("S", template.I32(-3)) == "const S: i32 = -3i;"
    import jinja2

    with pytest.raises(jinja2.UndefinedError):
        template.render("pool.wgsl", header="x", consts={})


def test_generation_is_deterministic_and_headed() -> None:
    spec = ConvSpec((ConvSource(5, True), ConvSource(9)), 13, Precision.FP16)
    a = conv_igemm.generate(spec, GemmOptions(address_mode="base-offset"))
    b = conv_igemm.generate(spec, GemmOptions(address_mode="base-offset"))
    assert a.source == b.source and a.key == b.key
    assert a.source.splitlines()[0] == f"// oidn_gpu.kernels.conv_igemm {a.key}"
    assert conv_direct.generate(spec).key != a.key
    assert a.workgroup_storage_bytes > 0 and a.trusted


def test_kernels_package_never_imports_wgpu() -> None:
    code = (
        "import sys, oidn_gpu.kernels.select, oidn_gpu.kernels.io_passes, "
        "oidn_gpu.kernels.decoder, oidn_gpu.kernels.conv_pool; "
        "assert 'wgpu' not in sys.modules, 'wgpu imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_select_rules() -> None:
    lim = DeviceLimits(shader_f16=True, subgroups=True, max_workgroup_storage_bytes=32768)
    plain = ConvSpec.simple(32, 32, Precision.FP16)
    assert select.select_conv(plain, lim).kind is select.KernelKind.IMPLICIT_GEMM
    assert select.select_conv(plain, lim, "direct").kind is select.KernelKind.DIRECT
    assert select.select_conv(plain, lim, "spatial").kind is select.KernelKind.SPATIAL
    assert select.select_conv(plain, lim, "subgroup").kind is select.KernelKind.SUBGROUP
    no_sg = DeviceLimits(shader_f16=True)
    sel = select.select_conv(plain, no_sg, "subgroup")
    assert sel.kind is select.KernelKind.DIRECT and sel.fallback_reason
    pooled = ConvSpec.simple(32, 32, Precision.FP16, pool=True)
    # 2 rows per thread: the quad spans two invocations, still the implicit GEMM
    sel = select.select_conv(pooled, lim, gemm=GemmOptions(rows_per_thread=2))
    assert sel.kind is select.KernelKind.IMPLICIT_GEMM and sel.fallback_reason is None
    # its tiles take 3136 bytes and the half-quad exchange 512 more
    snug = DeviceLimits(shader_f16=True, max_workgroup_storage_bytes=3200)
    assert GemmOptions(rows_per_thread=2).fits(Precision.FP16, snug)
    sel = select.select_conv(pooled, snug, gemm=GemmOptions(rows_per_thread=2))
    assert sel.kind is select.KernelKind.DIRECT and "3648 bytes" in sel.fallback_reason
    tiny = DeviceLimits(shader_f16=True, max_workgroup_storage_bytes=2048)
    assert select.select_conv(plain, tiny).kind is select.KernelKind.DIRECT
    assert (
        select.select_conv(ConvSpec.simple(128, 64), tiny, "spatial").kind
        is select.KernelKind.DIRECT
    )
    final = ConvSpec.simple(32, 3, Precision.FP16, out_precision=Precision.FP32)
    assert select.select_conv(final, lim, final=True).kind is select.KernelKind.FINAL_RGB
    direct_final = select.select_conv(
        final, lim, final=True, gemm=GemmOptions(final_layer=FinalLayer.DIRECT)
    )
    assert direct_final.kind is select.KernelKind.DIRECT
    with pytest.raises(UnsupportedDeviceError):
        select.select_conv(plain, DeviceLimits())
    with pytest.raises(InvalidArgumentError, match="allowed"):
        select.select_conv(plain, lim, "tensor-core")
    assert select.select_precision("auto", lim) is Precision.FP16
    assert select.select_precision("auto", DeviceLimits()) is Precision.FP32
