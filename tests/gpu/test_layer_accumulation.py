"""The fp16 accumulations on a whole network: each layer sums as its options say.

`WgpuExecutor` runs a tiny U-Net in fp16 with ``accumulation`` on every conv but the first
(``input_accumulation``) and the final layer (``final_accumulation``); bench/fp16_emulator.py
predicts its bits from the same per-layer choice. On a CPU adapter (lavapipe: every f16
operation rounded, the product before the sum) the output must be the emulation's, value for
value; elsewhere (GPU drivers may evaluate f16 at higher precision) it must be at least as
close to the fp32 reference as the emulation. The executor's own ``accumulation`` option is
every layer's.
"""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.backends.wgpu import kernel_choice
from oidn_gpu.backends.wgpu.executor import WgpuExecutor
from oidn_gpu.graph.reference import run_graph
from oidn_gpu.kernels.gemm import Accumulation, GemmOptions
from tests import bench_scripts
from tests.kernels import gpu_runner

emu = bench_scripts.load("fp16_emulator")

MIXED = {
    "accumulation": "f16-pairs",
    "input_accumulation": "f16-chains16",
    "final_accumulation": "f32",
}


def _rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a64 - b64) / np.linalg.norm(b64))


def _first_conv(executor: WgpuExecutor) -> str:
    graph = executor.graph
    (node,) = [n for n in graph.nodes if kernel_choice.is_input_conv(graph, n)]
    return kernel_choice.conv_of(node).name


@pytest.mark.parametrize(
    "gemm",
    [{"accumulation": "f16-partials"}, MIXED],
    ids=["f16-partials", "pairs-chains16-f32"],
)
def test_each_layer_sums_as_its_accumulation_says(gpu, tiny_models, gemm) -> None:
    model = tiny_models["tiny_base_ic9"]
    x = np.random.default_rng(7).random((model.input_channels, 32, 48), np.float32)
    with WgpuExecutor(model, device=gpu, precision="fp16", gemm=gemm) as executor:
        got = executor.run(x)
        first = _first_conv(executor)
    options = GemmOptions(**gemm)
    groups = {"f16-partials": 32, "f16-pairs": 32, "f16-chains16": 16, "f32": 0}
    chains = {"f16-pairs": 2}.get(options.accumulation.value, 1)
    layer_groups = []
    if options.input_accumulation is not None:
        layer_groups.append((first, (groups[options.input_accumulation.value], 1)))
    if options.final_accumulation is not None:
        layer_groups.append((model.graph.output, groups[options.final_accumulation.value]))
    sources = emu.Fp16Sources(
        input=True,
        weights=True,
        storage=True,
        partials=True,
        gemm_group=groups[options.accumulation.value],
        chains=chains,
        layer_groups=tuple(layer_groups),
    )
    emulated = emu.run_graph(model.graph, model.convs, x, sources)
    uniform = emu.run_graph(
        model.graph,
        model.convs,
        x,
        emu.Fp16Sources(
            input=True,
            weights=True,
            storage=True,
            partials=True,
            gemm_group=sources.gemm_group,
            chains=chains,
        ),
    )
    if layer_groups:  # the per-layer choice changes the image
        assert not np.array_equal(emulated, uniform)
    if gpu_runner.is_cpu_adapter():
        differ = int(np.count_nonzero(got != emulated))
        assert differ == 0, f"{differ} of {got.size} values differ from the emulation"
    else:
        exact = run_graph(model.graph, model.convs, x, dtype=np.float64)
        assert _rel_l2(got, exact) <= 1.25 * _rel_l2(emulated, exact)


def test_the_executor_accumulation_option_is_every_layers(gpu, tiny_models) -> None:
    model = tiny_models["tiny_base_ic9"]
    with WgpuExecutor(
        model, device=gpu, precision="fp16", gemm=MIXED, accumulation="f16-partials"
    ) as executor:
        gemm = executor.gemm
    assert gemm.accumulation is Accumulation.F16_PARTIALS
    assert gemm.input_accumulation is None and gemm.final_accumulation is None
