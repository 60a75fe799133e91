"""WgpuExecutor against the NumPy reference: numerics, lifetimes, GPU buffers, profiling."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from oidn_gpu.backends.base import NetworkExecutor
from oidn_gpu.backends.wgpu.device import STORAGE_USAGE
from oidn_gpu.backends.wgpu.executor import WgpuExecutor
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError, UnsupportedDeviceError
from oidn_gpu.graph.reference import run_graph
from tests.compare import assert_close

from .conftest import FP16_REL_L2, FP32_REL_L2

MODELS = ("tiny_base_ic3", "tiny_base_ic9", "tiny_large_ic6")


def _input(model, height=32, width=48, seed=0):
    return np.random.default_rng(seed).random((model.input_channels, height, width), np.float32)


def _reference(model, x):
    return run_graph(model.graph, model.convs, x, dtype=np.float64)


@pytest.fixture(scope="module")
def executors(gpu, tiny_models):
    """One executor per (model, precision), shared by the module's tests."""
    made = {}
    for name in MODELS:
        for precision in ("fp32", "fp16"):
            if precision == "fp16" and not gpu.capabilities.has_f16:
                continue
            made[name, precision] = WgpuExecutor(tiny_models[name], device=gpu, precision=precision)
    yield made
    for executor in made.values():
        executor.close()


@pytest.mark.parametrize("name", MODELS)
def test_fp32_matches_reference(executors, tiny_models, name):
    model = tiny_models[name]
    x = _input(model)
    assert_close(
        executors[name, "fp32"].run(x),
        _reference(model, x),
        rel_l2_tol=FP32_REL_L2,
        label=name,
        check_dtype=False,
    )


@pytest.mark.parametrize("name", MODELS)
def test_fp16_matches_reference_and_is_finite(executors, tiny_models, name):
    if (name, "fp16") not in executors:
        pytest.fail("the device has no shader-f16; the fp16 tests need it (lavapipe has it)")
    model = tiny_models[name]
    x = _input(model, seed=1)
    assert_close(
        executors[name, "fp16"].run(x),
        _reference(model, x),
        rel_l2_tol=FP16_REL_L2,
        label=name,
        check_dtype=False,
    )


def test_real_small_model_fp32_matches_reference(gpu, package_weights_dir):
    from oidn_gpu.model.unet import load_model

    model = load_model(package_weights_dir / "rt_hdr_alb_nrm_small.tza")
    x = _input(model, 32, 32, seed=2)
    with WgpuExecutor(model, device=gpu, precision="fp32") as executor:
        assert_close(
            executor.run(x),
            _reference(model, x),
            rel_l2_tol=FP32_REL_L2,
            label="rt_hdr_alb_nrm_small",
            check_dtype=False,
        )


def test_repeated_runs_are_bit_identical(executors, tiny_models):
    model = tiny_models["tiny_base_ic9"]
    x = _input(model, seed=3)
    keys = [("tiny_base_ic9", p) for p in ("fp32", "fp16")]
    for executor in (executors[key] for key in keys if key in executors):
        first = executor.run(x)
        assert np.array_equal(first, executor.run(x))


def test_trusted_and_checked_kernels_give_identical_results(gpu, tiny_models):
    model = tiny_models["tiny_large_ic6"]
    x = _input(model, seed=4)
    results = []
    for checks in (False, True):
        with WgpuExecutor(model, device=gpu, precision="fp32", shader_checks=checks) as executor:
            assert executor.info().trusted is (not checks)
            results.append(executor.run(x))
    assert np.array_equal(results[0], results[1])


def test_executor_satisfies_the_protocol_and_reports_info(executors):
    executor = executors["tiny_base_ic3", "fp32"]
    assert isinstance(executor, NetworkExecutor)
    info = executor.info()
    assert info.backend == "wgpu" and info.precision == "fp32"
    assert set(info.kernels) == {node.name for node in executor.graph.nodes}


def test_resources_are_empty_after_close_and_close_is_idempotent(gpu, tiny_models):
    executor = WgpuExecutor(tiny_models["tiny_base_ic3"], device=gpu, precision="fp32")
    executor.prewarm([(16, 16), (32, 32)])
    executor.profile_next_execution()
    executor.run(_input(tiny_models["tiny_base_ic3"], 16, 16))
    held = executor.resources()
    assert held.buffer_count > 0 and held.shapes == ((32, 32), (16, 16))
    executor.close()
    assert executor.resources().is_empty
    executor.close()
    with pytest.raises(InvalidOperationError, match="closed"):
        executor.run(_input(tiny_models["tiny_base_ic3"], 16, 16))


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"precision": "fp64"}, InvalidArgumentError, "precision"),
        ({"kernel": "winograd"}, InvalidArgumentError, "kernel"),
        ({"gemm": {"no_such_option": 1}}, InvalidArgumentError, "gemm|option"),
        ({"shape_cache_size": 0}, InvalidArgumentError, "shape_cache_size"),
    ],
)
def test_invalid_options_raise_clear_errors(gpu, tiny_models, options, error, match):
    with pytest.raises(error, match=match):
        WgpuExecutor(tiny_models["tiny_base_ic3"], device=gpu, **options)


def test_gemm_options_that_cannot_run_fall_back_with_a_warning(gpu, tiny_models):
    """A tile over the register budget is refused before any shader is built: the affected
    layers run the direct conv, the caller is warned and `info().fallbacks` says why."""
    model = tiny_models["tiny_base_ic3"]
    spilled = {
        "tile_policy": "fixed",
        "address_mode": "base-offset",
        "rows_per_thread": 8,
        "workgroup_size": (4, 16),
        "cols_per_thread": 4,
        "k_tile": 16,
    }
    with pytest.warns(RuntimeWarning, match="registers per invocation"):
        executor = WgpuExecutor(model, device=gpu, precision="fp32", gemm=spilled)
    try:
        info = executor.info()
        assert info.fallbacks and set(info.fallbacks) <= set(info.kernels)
        for layer, reason in info.fallbacks.items():
            assert info.kernels[layer].startswith("conv-direct")
            assert "registers per invocation" in reason
        x = _input(model)
        assert_close(
            executor.run(x),
            _reference(model, x),
            rel_l2_tol=FP32_REL_L2,
            label="fallback",
            check_dtype=False,
        )
    finally:
        executor.close()
    default = WgpuExecutor(model, device=gpu, precision="fp32")
    try:
        assert not default.info().fallbacks
    finally:
        default.close()


def test_fp16_without_shader_f16_is_unsupported(gpu, tiny_models):
    from oidn_gpu.backends.wgpu.device import open_device

    plain = open_device(features=())
    try:
        with pytest.raises(UnsupportedDeviceError, match="shader-f16"):
            WgpuExecutor(tiny_models["tiny_base_ic3"], device=plain, precision="fp16")
        with WgpuExecutor(tiny_models["tiny_base_ic3"], device=plain) as executor:
            assert executor.precision.value == "fp32"
    finally:
        plain.close()


def test_unaligned_network_input_is_rejected(executors):
    with pytest.raises(InvalidArgumentError, match="multiple of 16"):
        executors["tiny_base_ic3", "fp32"].run(np.zeros((3, 20, 16), np.float32))


def _gpu_input(gpu, x):
    return gpu.create_buffer_with_data(
        "test-input", np.ascontiguousarray(x.transpose(1, 2, 0)), STORAGE_USAGE
    )


def test_execution_on_caller_owned_buffers_matches_host_run(gpu, executors, tiny_models):
    executor = executors["tiny_base_ic9", "fp32"]
    model = tiny_models["tiny_base_ic9"]
    x = _input(model, 32, 32, seed=5)
    source = _gpu_input(gpu, x)
    target = gpu.create_buffer("test-output", 32 * 32 * 3 * 4, STORAGE_USAGE)
    try:
        assert executor.execute_buffers(source, 32, 32, output=target) is target
        out = np.frombuffer(gpu.read_buffer(target), np.float32)
        out = out.reshape(32, 32, 3).transpose(2, 0, 1)
        assert np.array_equal(out, executor.run(x))
    finally:
        source.destroy()
        target.destroy()


def test_evicted_plans_are_destroyed_only_after_the_queue_finished(gpu, tiny_models):
    """Plans evicted while their work is in flight go through the device's deferred release
    (tests/gpu/test_device.py checks that it waits for the queue); every output is right."""
    model = tiny_models["tiny_base_ic3"]
    executor = WgpuExecutor(model, device=gpu, precision="fp32", shape_cache_size=1)
    shapes = [(16, 16), (32, 16), (16, 32), (32, 32)]
    inputs, outputs, xs = [], [], []
    try:
        weights_only = executor.resources().buffer_count
        for index, (h, w) in enumerate(shapes):
            x = _input(model, h, w, seed=10 + index)
            xs.append(x)
            inputs.append(_gpu_input(gpu, x))
            outputs.append(gpu.create_buffer("out", h * w * 12, STORAGE_USAGE))
            executor.execute_buffers(inputs[-1], h, w, output=outputs[-1])  # no wait
        assert executor.resources().shapes == ((32, 32),)
        gpu.wait_idle()
        for (h, w), x, out in zip(shapes, xs, outputs, strict=True):
            y = np.frombuffer(gpu.read_buffer(out), np.float32).reshape(h, w, 3).transpose(2, 0, 1)
            assert_close(
                y, _reference(model, x), rel_l2_tol=FP32_REL_L2, label=f"{h}x{w}", check_dtype=False
            )
        for _ in range(300):  # the fences signal from the device's poll thread
            if executor.resources().pending_operations == 0:
                break
            gpu.fence().wait(0.1)
        assert executor.resources().pending_operations == 0
        executor.prewarm([(32, 32)])  # the live plan alone is left besides the weights
        live = executor.resources().buffer_count - weights_only
        assert 0 < live < 2 * len(executor.graph.nodes) + 8
    finally:
        executor.close()
        for buffer in inputs + outputs:
            buffer.destroy()
    assert executor.resources().is_empty


def test_profiling_returns_per_layer_gpu_times(gpu, executors, tiny_models):
    executor = executors["tiny_base_ic3", "fp32"]
    if not gpu.capabilities.has_timestamps:
        assert executor.profile_next_execution() is False
        pytest.fail("the device has no timestamp-query; profiling tests need it (lavapipe has it)")
    assert executor.profile_next_execution() is True
    executor.run(_input(tiny_models["tiny_base_ic3"], 32, 32))
    profile = executor.last_profile()
    assert profile is not None and (profile.height, profile.width) == (32, 32)
    # run() packs its host input on the GPU: that pass is the profile's first entry
    names = [layer.name for layer in profile.layers]
    assert names == ["input-pack", *(node.name for node in executor.graph.nodes)]
    assert profile.layers[0].kernel == "input-pack" and profile.layers[0].flops == 0
    assert all(layer.elapsed_ms >= 0 for layer in profile.layers)
    assert profile.total_ms > 0 and profile.flops > 0
    assert executor.resources().count("gpu-query-set") == 0


def test_profiling_packed_input_has_no_input_pack_entry(gpu, executors, tiny_models):
    """`execute_packed` reads an already packed input: only the network layers are timed."""
    executor = executors["tiny_base_ic3", "fp32"]
    model = tiny_models["tiny_base_ic3"]
    x = _input(model, 32, 32, seed=5)
    expected = executor.run(x)
    packed = np.zeros((32, 32, 4), np.float32)  # blocked HWC: 3 channels and a zero lane
    packed[:, :, :3] = x.transpose(1, 2, 0)
    gpu.write_buffer(executor.packed_input_buffer(32, 32), 0, packed)
    assert executor.profile_next_execution() is True
    executor.execute_packed(32, 32)
    profile = executor.last_profile()
    assert [layer.name for layer in profile.layers] == [n.name for n in executor.graph.nodes]
    np.testing.assert_array_equal(executor.read_output(32, 32), expected)


def test_resolved_gemm_options_and_device_facts(gpu, tiny_models):
    """`gemm` is the options in effect (the device's defaults when none are given), and
    the executor says what the kernel choice knows of the device."""
    from oidn_gpu.backends.wgpu import kernel_choice
    from oidn_gpu.kernels import conv_spatial
    from oidn_gpu.kernels.gemm import (
        GemmOptions,
        SharedLayout,
        TilePolicy,
        default_options,
    )
    from oidn_gpu.kernels.gemm_tile import MAX_TILE_STORAGE_BYTES

    model = tiny_models["tiny_base_ic3"]
    limits = kernel_choice.device_limits(gpu.capabilities)
    for precision in ("fp32", "fp16"):
        with WgpuExecutor(model, device=gpu, precision=precision, prepare=False) as executor:
            assert isinstance(executor.gemm, GemmOptions)
            defaults = default_options(limits, executor.precision)
            # oidn-web resolves the shared layout: padded-input for fp16, else padded
            layout = defaults.shared_layout or SharedLayout(
                "padded-input" if precision == "fp16" else "padded"
            )
            assert executor.gemm.shared_layout is layout
            assert executor.gemm == dataclasses.replace(defaults, shared_layout=layout)
            # the kernels are those of the options as given (their headers name them so)
            given = f"shared_layout={defaults.shared_layout and defaults.shared_layout.value}"
            gemms = [k for k in executor.kernels if k.name == "conv-igemm"]
            assert gemms and all(given in k.source for k in gemms)
            assert executor.subgroups_available is gpu.capabilities.has_subgroups
            storage = min(
                gpu.capabilities.max_compute_workgroup_storage_size, MAX_TILE_STORAGE_BYTES
            )
            itemsize = executor.precision.itemsize
            # a 10x10 halo patch of vec4s per input block, within 48 KiB on any device
            assert executor.max_spatial_input_blocks == storage // (100 * 4 * itemsize)
            assert executor.max_spatial_input_blocks == conv_spatial.max_input_blocks(
                executor.precision, limits
            )
    with WgpuExecutor(
        model, device=gpu, precision="fp32", gemm={"workgroup_size": (8, 8)}, prepare=False
    ) as executor:
        assert executor.gemm.tile_policy is TilePolicy.FIXED
        assert executor.gemm.workgroup_size == (8, 8)
        try:
            executor.gemm.rows_per_thread = 4  # type: ignore[misc]
        except AttributeError:
            pass
        else:
            pytest.fail("the resolved GEMM options must be frozen")


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_weight_buffers_view(tiny_models, precision):
    """One entry per conv: the buffers its kernel binds, holding its weights packed in the
    layout that kernel reads (on a recording device, whose buffers keep their data)."""
    from oidn_gpu.backends.wgpu import kernel_choice
    from oidn_gpu.record.config import RecordConfig
    from oidn_gpu.record.device import RecordingDevice, recording_capabilities

    model = tiny_models["tiny_base_ic3"]
    config = RecordConfig(16, 16, features=frozenset({"shader-f16"}))
    device = RecordingDevice(recording_capabilities(config))
    executor = WgpuExecutor(model, device=device, precision=precision, prepare=False)
    view = executor.weight_buffers
    convs = [kernel_choice.conv_of(n) for n in executor.graph.nodes]
    assert list(view) == [c.name for c in convs if c is not None]
    assert set(view) == set(model.convs)
    # every weight and bias buffer the executor uploaded, and nothing else
    assert {id(b) for e in view.values() for b in (e.weights, e.bias)} == {
        id(b) for b in device.buffers
    }
    for node, kernel, conv in zip(executor.graph.nodes, executor.kernels, convs, strict=True):
        if conv is None:
            continue
        entry = view[conv.name]
        assert entry.layout is kernel.weight_layout and entry.precision is kernel.precision
        assert entry.precision is executor.precision
        spec = kernel_choice.node_spec(
            executor.graph, node, executor.precision, final=node.name == executor.graph.output
        )
        tensors = model.convs[conv.name]
        packed = kernel_choice.pack_conv(spec, kernel, tensors.weight, tensors.bias)
        for buffer, expected in ((entry.weights, packed.weights), (entry.bias, packed.bias)):
            assert buffer.data[: expected.nbytes] == expected.tobytes(), conv.name
    with pytest.raises(TypeError):
        view["x"] = None  # type: ignore[index]
    executor.close()
    assert len(executor.weight_buffers) == 0


def test_prepare_compiles_the_pack_and_unpack_kernels_so_no_execution_compiles(tiny_models):
    """As oidn-web's ``prepare``: the input-pack kernel (`run`, `execute_buffers`) and the
    output-unpack kernel (`execute_buffers` into a dense output) compile with the network."""
    from oidn_gpu.backends.wgpu.device import open_device

    model = tiny_models["tiny_base_ic3"]
    device = open_device(None)  # its own pipeline cache: nothing compiled by other tests
    try:
        with WgpuExecutor(model, device=device, precision="fp32") as executor:
            cache = executor.pipeline_cache
            compiled = len(cache)
            assert compiled == len(set(k.key for k in executor.kernels)) + 2
            x = _input(model, 16, 16)
            executor.run(x)
            source = device.create_buffer_with_data(
                "test/in", np.ascontiguousarray(x.transpose(1, 2, 0)), STORAGE_USAGE
            )
            out = device.create_buffer("test/out", 16 * 16 * 3 * 4, STORAGE_USAGE)
            executor.execute_buffers(source, 16, 16, output=out)
            device.wait_idle()
            assert len(cache) == compiled
    finally:
        device.close()
