"""Implicit-GEMM tiles chosen by the device: explicit workgroup sizes, the balanced tile
policy, each device's default options (the large-GPU rule) and the implicit-GEMM steps'
agreement on the tile (`tests/kernels/test_gemm_options.py` sweeps the options themselves).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from oidn_gpu.backends.gpu_device import AdapterInfo, Capabilities
from oidn_gpu.backends.wgpu import kernel_choice
from oidn_gpu.kernels import conv_igemm, gemm, select
from oidn_gpu.kernels.gemm import GemmOptions
from oidn_gpu.kernels.spec import ConvSource, ConvSpec, DeviceLimits, Precision

from .conv_ref import make_case, run_conv
from .test_gemm_options import _spec


def test_an_explicit_workgroup_size_keeps_its_tile() -> None:
    """As oidn-web: a given workgroup size means the fixed tile policy (64 output channels,
    16 blocks, stay 8 wide), unless a tile policy is given too; without one, output-aligned."""
    lim = DeviceLimits(max_workgroup_storage_bytes=32768, shader_f16=True)
    assert GemmOptions().tile_policy is gemm.TilePolicy.OUTPUT_ALIGNED
    assert GemmOptions().workgroup_size == (8, 8)
    assert GemmOptions().tile_for(Precision.FP16, 16, lim).workgroup_x == 16
    given = GemmOptions(workgroup_size=(8, 8))
    assert given.tile_policy is gemm.TilePolicy.FIXED
    assert given.tile_for(Precision.FP16, 16, lim).workgroup_x == 8
    both = GemmOptions(workgroup_size=(8, 8), tile_policy="output-aligned")
    assert both.tile_for(Precision.FP16, 16, lim).workgroup_x == 16
    assert GemmOptions(rows_per_thread=4).tile_policy is gemm.TilePolicy.OUTPUT_ALIGNED
    # the resolved options are what a cache key or a copy sees
    assert given.describe().startswith("tile_policy=fixed")
    assert replace(given, rows_per_thread=4).tile_policy is gemm.TilePolicy.FIXED
    assert GemmOptions(**{"workgroup_size": [8, 8]}) == given
    # the generated decoder conv of 64 outputs: 8 x 8 invocations as given
    kernel = conv_igemm.generate(_spec(Precision.FP16), given, lim)
    assert kernel.workgroup_size == (8, 8, 1)
    assert conv_igemm.generate(_spec(Precision.FP16), GemmOptions(), lim).workgroup_size == (
        16,
        8,
        1,
    )


def test_balanced_policy_tiles() -> None:
    lim = DeviceLimits(max_workgroup_storage_bytes=32768)
    balanced = GemmOptions(tile_policy="balanced")
    # 16 output blocks: widened as output-aligned
    t = balanced.tile_for(Precision.FP16, 16, lim)
    assert (t.workgroup_x, t.workgroup_y, t.rows_per_thread) == (16, 8, 8)
    # 8 or 24 output blocks: same 64-row tile, 128 invocations of 4 rows
    for blocks in (8, 24):
        t = balanced.tile_for(Precision.FP16, blocks, lim)
        assert (t.workgroup_x, t.workgroup_y, t.rows_per_thread, t.tile_m) == (8, 16, 4, 64)
    # columns per thread narrow to the output blocks (not under FIXED)
    assert GemmOptions(cols_per_thread=4).tile_for(Precision.FP16, 8, lim).cols_per_thread == 1
    fixed = GemmOptions(cols_per_thread=4, tile_policy="fixed")
    assert fixed.tile_for(Precision.FP16, 8, lim).cols_per_thread == 4


def test_default_options_by_device() -> None:
    small = DeviceLimits(max_workgroup_storage_bytes=32768, shader_f16=True)
    large = DeviceLimits(max_workgroup_storage_bytes=49152, shader_f16=True, large_gpu=True)
    for p in Precision:
        assert gemm.default_options(small, p) == GemmOptions()
        assert gemm.default_options(None, p) == GemmOptions()
        assert gemm.default_options(large, p) == gemm.LARGE_GPU_OPTIONS[p]
    # a large-GPU tile that does not fit falls back to the seeds' defaults
    tiny = DeviceLimits(max_workgroup_storage_bytes=1024, shader_f16=True, large_gpu=True)
    assert gemm.default_options(tiny, Precision.FP16) == GemmOptions()


@pytest.mark.gpu
@pytest.mark.parametrize("precision", [Precision.FP32, Precision.FP16], ids=lambda p: p.value)
def test_select_uses_device_defaults(precision: Precision, limits) -> None:
    """Small GPUs (lavapipe here) keep the seeds' tile; large GPUs get BALANCED's tall tile
    for 8 output blocks (and in fp16 the f16-chains accumulation); with the same
    accumulation both give the same bits."""
    import dataclasses

    spec = ConvSpec.simple(9, 32, precision)
    large_limits = dataclasses.replace(limits, large_gpu=True)
    large_sum = gemm.default_options(large_limits, precision).accumulation
    if precision is Precision.FP16:
        assert large_sum is gemm.Accumulation.F16_CHAINS
        assert gemm.default_options(limits, precision).accumulation is gemm.Accumulation.F32
    small = select.select_conv(spec, limits, gemm=GemmOptions(accumulation=large_sum))
    large = select.select_conv(spec, large_limits)
    assert small.kernel.workgroup_size == (8, 8, 1)
    assert large.kernel.workgroup_size == (8, 16, 1)
    assert "tile_policy=balanced" in large.kernel.key
    h, w = 7, 9
    srcs, wt, bias = make_case(spec, h, w, np.random.default_rng(3))
    a = run_conv(small.kernel, spec, srcs, wt, bias, h, w)
    b = run_conv(large.kernel, spec, srcs, wt, bias, h, w)
    np.testing.assert_array_equal(a, b)


def _caps(adapter_type: str, storage: int, invocations: int):
    limits = (
        ("max-compute-invocations-per-workgroup", invocations),
        ("max-compute-workgroup-size-x", 1024),
        ("max-compute-workgroup-size-y", 1024),
        ("max-compute-workgroup-size-z", 64),
        ("max-compute-workgroup-storage-size", storage),
        ("max-compute-workgroups-per-dimension", 65535),
    )
    adapter = AdapterInfo("vendor", "", "device", "", adapter_type, "Vulkan")
    return Capabilities(frozenset(), limits, 32, 32, adapter)


@pytest.mark.parametrize(
    ("adapter_type", "storage", "invocations", "large"),
    [
        ("DiscreteGPU", 49152, 1024, True),  # the H200 through Vulkan
        ("CPU", 32768, 1024, False),  # lavapipe's limits: a CPU adapter is never large
        ("IntegratedGPU", 65536, 1024, False),
        ("DiscreteGPU", 16384, 1024, False),
        ("DiscreteGPU", 49152, 256, False),
    ],
)
def test_large_gpu_rule(adapter_type: str, storage: int, invocations: int, large: bool) -> None:
    caps = _caps(adapter_type, storage, invocations)
    assert kernel_choice.is_large_gpu(caps) is large
    assert kernel_choice.device_limits(caps).large_gpu is large


@pytest.mark.gpu
def test_test_device_is_classified_by_its_adapter(gpu) -> None:
    """lavapipe (CI) is a CPU adapter and keeps the seeds' tiles; a discrete GPU with the
    large limits (the H200) takes the large-GPU defaults."""
    caps = gpu.capabilities
    expected = (
        caps.adapter.is_discrete
        and caps.max_compute_workgroup_storage_size >= kernel_choice.LARGE_GPU_MIN_WORKGROUP_STORAGE
        and caps.max_compute_invocations_per_workgroup >= kernel_choice.LARGE_GPU_MIN_INVOCATIONS
    )
    if caps.adapter.is_cpu:
        assert not expected
    assert kernel_choice.is_large_gpu(caps) is expected


@pytest.mark.parametrize("precision", [Precision.FP32, Precision.FP16])
@pytest.mark.parametrize(
    "options",
    [GemmOptions(), GemmOptions(rows_per_thread=4, cols_per_thread=2, k_tile=16)],
    ids=lambda o: o.describe(),
)
def test_igemm_steps_agree_on_the_tile(precision: Precision, options: GemmOptions) -> None:
    """validate -> plan_tile -> constants: every invocation's loads cover the shared tiles
    exactly once, and the constants describe the same tile."""
    spec = ConvSpec((ConvSource(32),), 48, precision)
    tile = conv_igemm.validate(spec, options, DeviceLimits(max_workgroup_storage_bytes=32768))
    plan = conv_igemm.plan_tile(spec, tile)
    consts = conv_igemm.constants(spec, tile)
    kt = tile.k_tile
    assert plan.input_loads * tile.threads == tile.tile_m * kt
    assert plan.weight_loads * tile.threads == kt * tile.tile_n * 4
    assert len(plan.accs) == tile.rows_per_thread * tile.cols_per_thread
    assert sum(len(g["ksteps"]) for g in plan.groups) == kt
    assert consts["ROW_GROUP"] == consts["ROWS"] * consts["K_TILE"] == tile.rows_per_thread * kt
    assert consts["TOTAL_K"] == 9 * spec.in_blocks
    assert consts["TILE_M"] == tile.tile_m and consts["TILE_N"] == tile.tile_n


def test_igemm_pool_with_two_rows_declares_its_exchange() -> None:
    spec = ConvSpec((ConvSource(32),), 32, Precision.FP32, pool=True)
    options = GemmOptions(rows_per_thread=2, cols_per_thread=2, tile_policy="fixed")
    tile = conv_igemm.validate(spec, options, DeviceLimits())
    kernel = conv_igemm.generate(spec, options, DeviceLimits())
    # 8 x 4 invocation pairs, 2 columns, one vec4<f32> each
    assert conv_igemm.pool_exchange_bytes(spec, tile) == 8 * 4 * 2 * 16
    assert kernel.workgroup_storage_bytes == tile.storage_bytes(Precision.FP32) + 1024
    assert "const POOL_HALF_SIZE: u32 = 64u;" in kernel.source
    assert "var<workgroup> pool_half" in kernel.source
    plain = conv_igemm.generate(spec, GemmOptions(rows_per_thread=4), DeviceLimits())
    assert "pool_half" not in plain.source
