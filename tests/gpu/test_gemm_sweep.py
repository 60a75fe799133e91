"""Every GEMM option value on a whole network: a performance knob, never a different image.

For each option and each of its values (the other options at their defaults), a
`WgpuExecutor` runs a tiny base U-Net (``tiny_base_ic3`` with ``dec_conv1b``
widened to 64 output channels, so that the tile policy and the columns per
thread act; fused conv+pool encoder, fused decoders, the final RGB layer) on
one 16x16 input. Its
output is compared with the default options' output: bit for bit in fp32 and in
fp16 (the options keep every output's K order and the fp16 partial grouping, and
max pooling is exact), and with the float64 reference. Each value must change
some kernel of the network, unless it is what the default resolves to.
"""

from __future__ import annotations

import contextlib
import gc

import numpy as np
import pytest

from oidn_gpu.backends.wgpu import kernel_choice
from oidn_gpu.backends.wgpu.device import open_device
from oidn_gpu.backends.wgpu.executor import WgpuExecutor
from oidn_gpu.graph.reference import run_graph
from oidn_gpu.kernels import final_rgb, gemm
from oidn_gpu.kernels.gemm import FinalLayer, GemmOptions
from oidn_gpu.kernels.spec import Precision
from tests.compare import assert_close

from .conftest import FP16_REL_L2, FP32_REL_L2

SIZE = 16
WIDE = 64  # dec_conv1b's output channels: 16 vec4 blocks


# How fp16 sums is not a performance knob: each accumulation has its own bits
# (tests/kernels/test_fp16_emulation.py, tests/golden/test_fp16_accuracy.py), on every layer
# or on the first conv and the final layer alone; nor is the decoder convs' parity form, whose
# folded weights and K order round differently (tests/kernels/test_conv_parity.py).
NOT_KNOBS = ("accumulation", "input_accumulation", "final_accumulation", "decoder_form")


def _cases() -> list[tuple[str, object]]:
    """(option, value) for every allowed value that is not the default."""
    default = GemmOptions()
    cases = []
    for name, values in gemm.option_values().items():
        if name in NOT_KNOBS:
            continue
        for value in values:
            if value != getattr(default, name):
                cases.append((name, value))
    return cases


def _id(name: str, value: object) -> str:
    v = getattr(value, "value", value)
    return f"{name}={'x'.join(map(str, v)) if isinstance(v, tuple) else v}"


CASES = _cases()


@pytest.fixture(scope="module")
def model():
    from oidn_gpu.model import tza, unet

    from .conftest import DATA

    tensors = dict(tza.parse_tza((DATA / "tiny_base_ic3.tza").read_bytes()))
    rng = np.random.default_rng(4)
    in1b = tensors["dec_conv1b.weight"].shape[1]
    out0 = tensors["dec_conv0.weight"].shape[0]
    for name, shape in (("dec_conv1b", (WIDE, in1b)), ("dec_conv0", (out0, WIDE))):
        scale = np.sqrt(2.0 / (9 * shape[1]))
        tensors[f"{name}.weight"] = (rng.standard_normal((*shape, 3, 3)) * scale).astype(np.float16)
        tensors[f"{name}.bias"] = (rng.standard_normal(shape[0]) * 0.1).astype(np.float16)
    return unet.validate_model(tensors, unet.detect_spec(tensors), name="tiny_base_wide")


@pytest.fixture(scope="module")
def sweep_input(model):
    x = np.random.default_rng(3).random((model.input_channels, SIZE, SIZE), np.float32)
    return x, run_graph(model.graph, model.convs, x, dtype=np.float64)


@pytest.fixture(scope="module")
def default_outputs(gpu, model, sweep_input):
    x, _ = sweep_input
    out = {}
    for precision in ("fp32", "fp16"):
        with WgpuExecutor(model, device=gpu, precision=precision, gemm=GemmOptions()) as executor:
            out[precision] = executor.run(x), [_body(k.source) for k in executor.kernels]
    return out


@contextlib.contextmanager
def own_device():
    """A device of the session device's adapter for one test, destroyed after it with its
    compiled pipelines (on lavapipe, machine code): the sweep compiles ~900 distinct kernels,
    which the session device's pipeline cache would keep to the end of the run (3.8 GB)."""
    device = open_device()
    try:
        yield device
    finally:
        device.close()
        del device
        gc.collect()  # the device and its pipeline cache refer to each other


def _body(source: str) -> str:
    """A kernel's WGSL without its header comment (which names every option)."""
    return "\n".join(line for line in source.splitlines() if not line.startswith("// oidn_gpu."))


def _no_effect(name: str, value: object, executor: WgpuExecutor) -> bool:
    """Whether ``value`` is what the default resolves to on this network and device, or an
    option without effect at the executor's precision."""
    precision = executor.precision
    if name in ("load_mode", "shared_load"):
        return precision is Precision.FP32  # packed loads and paired tiles are fp16 features
    if name == "shared_layout":
        return value == GemmOptions().shared_layout_for(precision)
    if name.startswith("final_"):  # the variant the defaults pick for this final layer
        graph = executor.graph
        final = next(n for n in graph.nodes if n.name == graph.output)
        spec = kernel_choice.node_spec(graph, final, precision, final=True)
        limits = kernel_choice.device_limits(executor.device.capabilities)
        o = executor.gemm
        resolved = final_rgb.resolve(spec, o.final_layer, limits, o.final_pixels, o.final_patch)
        return resolved == final_rgb.resolve(spec, FinalLayer.SHARED_AUTO, limits)
    return False


def test_the_sweep_covers_every_value_of_every_option():
    values = {k: v for k, v in gemm.option_values().items() if k not in NOT_KNOBS}
    assert {name for name, _ in CASES} == set(values)
    for name, allowed in values.items():
        swept = {v for n, v in CASES if n == name} | {getattr(GemmOptions(), name)}
        # shared_layout's default (None) resolves by precision to one of its values
        expected = set(allowed) | ({None} if name == "shared_layout" else set())
        assert swept == expected, name
    # the values of the WebGPU runtime's options are all there
    assert {2, 4, 8} <= set(values["rows_per_thread"])
    assert {(x, y) for x in (4, 8, 16) for y in (4, 8)} <= set(values["workgroup_size"])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize(("name", "value"), CASES, ids=[_id(n, v) for n, v in CASES])
def test_option_value_gives_the_default_image(
    model, sweep_input, default_outputs, name, value, precision
):
    x, reference = sweep_input
    options = GemmOptions(**{name: value})
    with (
        own_device() as device,
        WgpuExecutor(model, device=device, precision=precision, gemm=options) as executor,
    ):
        assert executor.gemm == options.resolved(Precision(precision))  # its shared_layout
        # every layer runs the kernel the options ask for (nothing fell back), except the
        # seeds' rule for a final layer whose weights do not fit the shared tile: the direct
        # kernel (oidn-web 0.5's finalLayer "shared-input-weights")
        fallbacks = dict(executor.info().fallbacks)
        if (name, value) == ("final_layer", FinalLayer.SHARED_INPUT_WEIGHTS) and fallbacks:
            final = executor.graph.nodes[-1].name
            assert fallbacks == {final: "final tile does not fit"}, fallbacks
        else:
            assert not fallbacks, fallbacks
        changed = [
            kernel.name
            for kernel, default in zip(executor.kernels, default_outputs[precision][1], strict=True)
            if _body(kernel.source) != default
        ]
        got = executor.run(x)
        no_effect = _no_effect(name, value, executor)
    # the option acts: some kernel of the network is not the default one
    assert bool(changed) != no_effect, (_id(name, value), changed)
    tol = FP32_REL_L2 if precision == "fp32" else FP16_REL_L2
    assert_close(got, reference, rel_l2_tol=tol, label=_id(name, value), check_dtype=False)
    np.testing.assert_array_equal(got, default_outputs[precision][0], err_msg=_id(name, value))
