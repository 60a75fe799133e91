"""The decoder convs' parity form on a whole network (``decoder_form="parity"``).

`WgpuExecutor` runs a tiny U-Net (fused conv+pool encoder, fused decoders, the final RGB
layer) with every decoder conv in the parity form: in fp32 as close to the float64 NumPy
reference as the full form; in fp16 the bits bench/fp16_emulator.py predicts with its
parity K order (lavapipe), or at least as close to the reference as that emulation (a GPU).
"""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.backends.wgpu.executor import WgpuExecutor
from oidn_gpu.graph import ir
from oidn_gpu.graph.reference import run_graph
from tests import bench_scripts
from tests.kernels import gpu_runner

from .conftest import FP16_REL_L2, FP32_REL_L2

emu = bench_scripts.load("fp16_emulator")

PARITY = {"decoder_form": "parity"}
HEIGHT, WIDTH = 48, 80  # the deepest decoder reads a 3x5 low-resolution source


def _rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a64 - b64) / np.linalg.norm(b64))


@pytest.fixture(scope="module")
def case(tiny_models):
    model = tiny_models["tiny_base_ic9"]
    x = np.random.default_rng(11).random((model.input_channels, HEIGHT, WIDTH), np.float32)
    return model, x, run_graph(model.graph, model.convs, x, dtype=np.float64)


def test_fp32_parity_network_matches_the_reference(gpu, case) -> None:
    model, x, exact = case
    with WgpuExecutor(model, device=gpu, precision="fp32", gemm=PARITY) as executor:
        parity = [k for k in executor.kernels if k.parity_weights]
        decoders = [n for n in executor.graph.nodes if isinstance(n, ir.DecoderConv)]
        got = executor.run(x)
    assert len(parity) == len(decoders) > 0, "every decoder conv runs in the parity form"
    assert _rel_l2(got, exact) <= FP32_REL_L2
    with WgpuExecutor(model, device=gpu, precision="fp32") as executor:
        full = executor.run(x)
    assert not np.array_equal(got, full)  # folded weights: another rounding
    assert _rel_l2(got, exact) <= 2 * _rel_l2(full, exact) + 1e-7


@pytest.mark.parametrize("accumulation", ["f16-partials", "f16-chains16"])
def test_fp16_parity_network_bits_match_the_emulation(gpu, case, accumulation) -> None:
    model, x, exact = case
    gemm = {**PARITY, "accumulation": accumulation, "final_accumulation": "f32"}
    with WgpuExecutor(model, device=gpu, precision="fp16", gemm=gemm) as executor:
        got = executor.run(x)
    common = {"input": True, "weights": True, "storage": True, "partials": True}
    group = {"f16-partials": 32, "f16-chains16": 16}[accumulation]
    layer_groups = ((model.graph.output, 0),)
    emulated = emu.run_graph(
        model.graph,
        model.convs,
        x,
        emu.Fp16Sources(**common, gemm_group=group, layer_groups=layer_groups, parity=True),
    )
    full = emu.run_graph(
        model.graph,
        model.convs,
        x,
        emu.Fp16Sources(**common, gemm_group=group, layer_groups=layer_groups),
    )
    assert not np.array_equal(emulated, full)  # the parity form's own sums
    assert _rel_l2(got, exact) <= FP16_REL_L2
    if gpu_runner.is_cpu_adapter():
        differ = int(np.count_nonzero(got != emulated))
        assert differ == 0, f"{differ} of {got.size} values differ from the emulation"
    else:
        assert _rel_l2(got, exact) <= 1.25 * _rel_l2(emulated, exact)
