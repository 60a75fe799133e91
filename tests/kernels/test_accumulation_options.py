"""The fp16 accumulations as GEMM options: the first conv's and the final layer's own
accumulation (`GemmOptions.for_layer`), its place in the network's kernels, and the f16
chains' registers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from oidn_gpu.backends.wgpu import kernel_choice
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels import gemm
from oidn_gpu.kernels.gemm import GemmOptions
from oidn_gpu.kernels.spec import DeviceLimits, Precision


def test_first_and_final_layer_accumulations() -> None:
    """``input_accumulation`` / ``final_accumulation`` replace ``accumulation`` in the first
    conv / the final layer (`GemmOptions.for_layer`, the final one first); unset, they leave
    the options (and every kernel key) as they were."""
    acc = gemm.Accumulation
    mixed = GemmOptions(
        accumulation="f16-partials", input_accumulation="f16-chains16", final_accumulation="f32"
    )
    assert mixed.input_accumulation is acc.F16_CHAINS16 and mixed.final_accumulation is acc.F32
    assert "input_accumulation=f16-chains16 final_accumulation=f32" in mixed.describe()
    assert "input_accumulation" not in GemmOptions().describe()
    assert "final_accumulation" not in GemmOptions().describe()
    resolved = {
        where: mixed.for_layer(*where)
        for where in ((False, False), (True, False), (False, True), (True, True))
    }
    assert {where: o.accumulation for where, o in resolved.items()} == {
        (False, False): acc.F16_PARTIALS,
        (True, False): acc.F16_CHAINS16,
        (False, True): acc.F32,
        (True, True): acc.F32,
    }
    for o in resolved.values():
        assert o.input_accumulation is None and o.final_accumulation is None
        assert replace(o, accumulation=acc.F32) == replace(
            mixed, input_accumulation=None, final_accumulation=None, accumulation=acc.F32
        )
    only_final = GemmOptions(final_accumulation="f32")
    assert only_final.for_layer(True, False).accumulation is acc.F32  # the default's
    plain = GemmOptions(accumulation="f16-pairs")
    assert plain.for_layer(True, True) is plain
    with pytest.raises(InvalidArgumentError, match="final_accumulation='f8'"):
        GemmOptions(final_accumulation="f8")


def test_first_conv_and_final_layer_kernels_take_their_accumulation() -> None:
    """In the network, the conv of the input alone and the final layer get their own
    accumulation; every other conv keeps ``accumulation``."""
    from oidn_gpu.graph.passes import optimize
    from oidn_gpu.model.unet import load_model
    from tests.datasets import DATA_DIR

    model = load_model(DATA_DIR / "tiny_base_ic9.tza")
    graph = optimize(model.graph, conv_pool=True, decoder=True, channel_align=1)
    limits = DeviceLimits(max_workgroup_storage_bytes=32768, shader_f16=True)
    mixed = GemmOptions(
        accumulation="f16-lanes", input_accumulation="f16-chains16", final_accumulation="f32"
    )
    keys = {}
    for node in graph.nodes:
        final = node.name == graph.output
        chosen = kernel_choice.kernel_for_node(
            graph, node, precision=Precision.FP16, final=final, limits=limits, gemm=mixed
        )
        keys[node.name] = chosen.kernel.key
    first = [n.name for n in graph.nodes if kernel_choice.is_input_conv(graph, n)]
    assert len(first) == 1 and "accumulation=f16-chains16" in keys[first[0]]
    assert "sum=f32" in keys[graph.output]
    others = [k for name, k in keys.items() if name not in (first[0], graph.output)]
    assert others and all("accumulation=f16-lanes" in k for k in others if "igemm" in k)
    assert all("input_accumulation" not in k for k in keys.values())


def test_f16_chains_count_in_the_register_estimate() -> None:
    tile = GemmOptions(rows_per_thread=8, cols_per_thread=2).base_tile(Precision.FP16)
    mode = gemm.AddressMode.INCREMENTAL
    one = tile.register_estimate(Precision.FP16, mode)
    assert tile.register_estimate(Precision.FP16, mode, chains=4) == one + 16 * 3 * 2
    lanes = GemmOptions(rows_per_thread=8, cols_per_thread=4, accumulation="f16-lanes")
    assert GemmOptions(rows_per_thread=8, cols_per_thread=4).within_register_budget(Precision.FP16)
    assert not lanes.within_register_budget(Precision.FP16)
    assert lanes.within_register_budget(Precision.FP32)  # fp32 kernels have no f16 chains
