"""The shared pipeline cache: keys, sharing, concurrent prepare, compile errors, trust."""

from __future__ import annotations

import pytest

from oidn_gpu.backends.wgpu.pipeline_cache import KernelCompileError, _use_trusted, pipeline_cache
from oidn_gpu.errors import ShaderCompileError
from oidn_gpu.kernels import conv_direct
from oidn_gpu.kernels.spec import ConvSpec, Kernel, Precision


def _kernel(in_channels: int, out_channels: int) -> Kernel:
    return conv_direct.generate(ConvSpec.simple(in_channels, out_channels, Precision.FP32))


def test_cache_is_shared_per_device_and_keyed_by_kernel(gpu):
    from oidn_gpu.backends.wgpu.device import open_device

    cache = pipeline_cache(gpu)
    assert pipeline_cache(open_device(gpu.device)) is cache
    kernel = _kernel(4, 8)
    first = cache.get(kernel)
    assert cache.get(_kernel(4, 8)) is first
    assert cache.is_ready(kernel)


def test_a_dropped_device_is_freed_with_its_cache(tiny_models):
    """Executors compile into the device's cache; once the executor and the device are closed
    and dropped, the wgpu device, its cache and pipelines are garbage, not kept alive by
    the cache registry."""
    import gc
    import weakref

    from oidn_gpu.backends.wgpu.device import open_device
    from oidn_gpu.backends.wgpu.executor import WgpuExecutor

    device = open_device()
    executor = WgpuExecutor(tiny_models["tiny_base_ic3"], device=device, precision="fp32")
    cache = pipeline_cache(device)
    assert len(cache) > 0
    alive = weakref.ref(device.device), weakref.ref(cache)
    executor.close()
    device.close()
    del executor, device, cache
    gc.collect()
    assert [ref() for ref in alive] == [None, None]


def test_prepare_compiles_concurrently_and_once(gpu):
    cache = pipeline_cache(gpu)
    kernels = [_kernel(c, 7) for c in (13, 14, 15)] * 2
    before = cache.compiled_count
    futures = cache.prepare(kernels)
    assert len(futures) == 3
    assert cache.compiled_count - before == 3
    assert all(cache.is_ready(k) for k in kernels)


def test_compile_error_names_kernel_key_and_compiler_message(gpu):
    good = _kernel(4, 4)
    broken = Kernel(
        name="broken",
        key="broken[test]",
        source="// test broken kernel\n@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }",
        entry_point="main",
        workgroup_size=(1, 1, 1),
        bindings=(),
        grid=good.grid,
        trusted=True,
    )
    cache = pipeline_cache(gpu)
    for checks in (False, True):
        with pytest.raises(ShaderCompileError) as info:
            cache.get(broken, shader_checks=checks)
        err = info.value
        assert isinstance(err, KernelCompileError)
        assert err.kernel_name == "broken" and err.key == "broken[test]"
        assert "u32" in err.compiler_message
    with pytest.raises(ShaderCompileError):
        cache.prepare([broken])


def test_trusted_modules_follow_the_kernel_flag_and_the_checks_switch(monkeypatch):
    trusted = _kernel(4, 4)
    assert trusted.trusted
    monkeypatch.delenv("OIDN_GPU_SHADER_CHECKS", raising=False)
    assert _use_trusted(trusted, None)
    assert not _use_trusted(trusted, True)
    monkeypatch.setenv("OIDN_GPU_SHADER_CHECKS", "1")
    assert not _use_trusted(trusted, None)
    assert _use_trusted(trusted, False)
