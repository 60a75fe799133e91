"""bench/fp16_emulator.py: the NumPy emulation of the wgpu fp16 arithmetic used by
bench/fp16_error_budget.py.

With every error source off it must be the golden interpreter bit for bit; its f16
rounding must be NumPy's float16 rounding; its f16 partial sums must follow the
kernels' K order, checked against a scalar loop written independently here.
"""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.graph import ir, reference
from oidn_gpu.graph.passes import optimize
from oidn_gpu.model.unet import load_model
from tests import bench_scripts
from tests.datasets import DATA_DIR

emu = bench_scripts.load("fp16_emulator")


@pytest.fixture(scope="module")
def model():
    return load_model(DATA_DIR / "tiny_base_ic9.tza")


@pytest.mark.parametrize("fused", [False, True], ids=["unfused-graph", "fused-graph"])
def test_every_source_off_is_the_golden_interpreter(model, fused):
    graph = optimize(model.graph) if fused else model.graph
    x = np.random.default_rng(3).random((9, 32, 48), dtype=np.float32) * 2
    golden = reference.run_graph(graph, model.convs, x)
    assert np.array_equal(emu.run_graph(graph, model.convs, x), golden)
    # sources on for no layer at all change nothing either
    none = emu.Fp16Sources(weights=True, storage=True, partials=True, layers=frozenset())
    assert np.array_equal(emu.run_graph(graph, model.convs, x, none), golden)
    # ...while on every layer they do, by an fp16-sized amount
    every = emu.run_graph(graph, model.convs, x, emu.ALL_SOURCES)
    err = np.linalg.norm(every - golden) / np.linalg.norm(golden)
    assert 1e-5 < err < 2e-2


def test_fused_and_unfused_graphs_give_the_same_fp16_bits(model):
    x = np.random.default_rng(4).random((9, 32, 32), dtype=np.float32)
    plain = emu.run_graph(model.graph, model.convs, x, emu.ALL_SOURCES)
    fused = emu.run_graph(optimize(model.graph), model.convs, x, emu.ALL_SOURCES)
    assert np.array_equal(plain, fused)


def _known_vector() -> np.ndarray:
    halves = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16)  # every finite half >= 0
    halves = halves[halves < np.float16(65504)]
    above = np.nextafter(halves, np.float16(np.inf))
    wide = halves.astype(np.float64)
    midpoints = ((wide + above.astype(np.float64)) / 2).astype(np.float32)  # exact ties
    near = np.concatenate(
        [
            np.nextafter(midpoints, np.float32(0)),
            np.nextafter(midpoints, np.float32(np.inf)),
        ]
    )
    specials = np.float32([0.0, 1.0, 1 / 3, np.pi, 6.1e-5, 5.96e-8, 2.9e-8, 3e-8, 65504.0])
    values = np.concatenate([halves.astype(np.float32), midpoints, near, specials])
    return np.concatenate([values, -values])


def test_round_f16_matches_numpy_float16():
    x = _known_vector()
    expected = x.astype(np.float16).astype(np.float32)
    got = emu.round_f16(x)
    mismatch = np.flatnonzero(got != expected)  # value equality: -0.0 == 0.0
    assert mismatch.size == 0, (x[mismatch[:5]], got[mismatch[:5]], expected[mismatch[:5]])
    # in place, with a work array
    y = x.copy()
    emu.round_f16(y, out=y, scratch=np.empty(y.shape, np.int32))
    assert np.array_equal(y, got)


def test_store_f16_saturates_to_the_largest_half():
    got = emu.store_f16(np.float32([1e6, -1e6, 65519.0, 70000.0, 0.1]))
    assert got.tolist() == [65504.0, -65504.0, 65504.0, 65504.0, float(np.float16(0.1))]


def _scalar_conv(x, weight, bias, group, fused_fma, chains=1):
    """One output at a time: products in K order ``tap * padded_channels + channel``
    (channels padded to a multiple of 4), f16 partials of ``group`` products, f32 sums;
    with ``chains`` 2 or 4, each partial in f16 chains (by K block parity, by lane) added
    in f16 as ``(c0 + c1) + (c2 + c3)``."""
    channels, height, width = x.shape
    padded = -(-channels // 4) * 4
    h16 = np.float16
    out = np.zeros((weight.shape[0], height, width), np.float32)
    for o in range(weight.shape[0]):
        for py in range(height):
            for px in range(width):
                acc = np.float32(bias[o])
                parts, current = [h16(0)] * chains, 0
                for k in range(9 * padded):
                    tap, c = divmod(k, padded)
                    if k // group != current:
                        acc = np.float32(acc + np.float32(_chain_sum(parts)))
                        parts, current = [h16(0)] * chains, k // group
                    iy, ix = py + tap // 3 - 1, px + tap % 3 - 1
                    if c >= channels or not (0 <= iy < height and 0 <= ix < width):
                        continue  # a zero product leaves the partial unchanged
                    chain = {1: 0, 2: (k // 4) % 2, 4: k % 4}[chains]
                    part = parts[chain]
                    w, v = h16(weight[o, c, tap // 3, tap % 3]), h16(x[c, iy, ix])
                    if fused_fma:
                        part = h16(np.float32(w) * np.float32(v) + np.float32(part))
                    else:
                        part = h16(np.float32(h16(np.float32(w) * np.float32(v))) + part)
                    parts[chain] = part
                acc = np.float32(acc + np.float32(_chain_sum(parts)))
                out[o, py, px] = acc
    return out


def _chain_sum(parts):
    """f16 chains added pairwise in f16: c0, c0 + c1, (c0 + c1) + (c2 + c3)."""
    while len(parts) > 1:
        parts = [np.float16(parts[i] + parts[i + 1]) for i in range(0, len(parts), 2)]
    return parts[0]


@pytest.mark.parametrize("group", [1, 4, 8, 32])
@pytest.mark.parametrize("fused_fma", [False, True], ids=["rounded-product", "fused"])
def test_f16_partials_follow_the_kernel_k_order(group, fused_fma):
    rng = np.random.default_rng(group)
    # 5 channels: 2 vec4 blocks with 3 zero padding lanes, so groups straddle taps and padding
    x = emu.round_f16(rng.random((5, 4, 5), dtype=np.float32) * 4)
    weight = emu.round_f16(rng.standard_normal((3, 5, 3, 3)).astype(np.float32))
    bias = rng.standard_normal(3).astype(np.float32)
    got = emu.conv3x3_fp16_partials(
        x,
        weight,
        bias,
        ir.Activation.NONE,
        source_channels=(5,),
        group=group,
        fused_fma=fused_fma,
    )
    np.testing.assert_array_equal(got, _scalar_conv(x, weight, bias, group, fused_fma))
    # and it is not the fp32 conv
    assert not np.array_equal(got, reference.conv3x3(x, weight, bias, ir.Activation.NONE))


def test_padding_of_concatenated_sources():
    index, padded = emu.padded_channels((6, 9))
    assert padded == 8 + 12
    assert index.tolist() == [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15, 16]


@pytest.mark.parametrize("chains", [2, 4])
def test_f16_chains_of_a_partial_are_added_in_f16_before_the_fold(chains):
    """The partials of ``f16-pairs`` (2 chains) and ``f16-lanes`` (4) against the scalar loop."""
    rng = np.random.default_rng(10 + chains)
    x = emu.round_f16(rng.random((6, 4, 5), dtype=np.float32) * 4)
    weight = emu.round_f16(rng.standard_normal((2, 6, 3, 3)).astype(np.float32))
    bias = rng.standard_normal(2).astype(np.float32)
    args = (x, weight, bias, ir.Activation.NONE)
    got = emu.conv3x3_fp16_partials(*args, source_channels=(6,), group=32, chains=chains)
    np.testing.assert_array_equal(got, _scalar_conv(x, weight, bias, 32, False, chains))
    one = emu.conv3x3_fp16_partials(*args, source_channels=(6,), group=32)
    assert not np.array_equal(got, one)
