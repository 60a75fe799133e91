"""Device creation, capabilities, wrapping a caller's device, fences."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest

from oidn_gpu.backends.gpu_device import DeferredRelease, GpuDevice
from oidn_gpu.backends.wgpu import device as dev
from oidn_gpu.errors import InvalidArgumentError


def test_open_device_enables_available_optional_features(gpu):
    adapter_features = set(gpu.adapter.features)
    for feature in dev.OPTIONAL_FEATURES:
        assert (feature in gpu.capabilities.features) == (feature in adapter_features)


def test_open_device_requests_the_adapter_maximum_of_kernel_limits(gpu):
    adapter_limits = dict(gpu.adapter.limits)
    for name in (
        "max-storage-buffer-binding-size",
        "max-compute-workgroup-storage-size",
        "max-buffer-size",
    ):
        assert gpu.capabilities.limit(name) == adapter_limits[name]


def test_capabilities_are_frozen_and_describe_the_adapter(gpu):
    caps = gpu.capabilities
    with pytest.raises(dataclasses.FrozenInstanceError):
        caps.features = frozenset()  # type: ignore[misc]
    assert caps.adapter.backend_type
    assert caps.max_compute_workgroup_size[0] >= 8
    assert caps.describe()
    with pytest.raises(KeyError):
        caps.limit("no-such-limit")


def test_wrapping_a_caller_device_does_not_take_ownership(gpu):
    wrapped = dev.open_device(gpu.device)
    assert not wrapped.owned
    wrapped.close()
    buffer = gpu.create_buffer("still-alive", 16)  # the device survived
    buffer.destroy()
    assert dev.open_device(gpu) is gpu


def test_open_device_rejects_non_devices():
    with pytest.raises(InvalidArgumentError, match=r"wgpu\.GPUDevice"):
        dev.open_device(object())
    with pytest.raises(InvalidArgumentError, match="power preference"):
        dev.open_device(power_preference="fast")


def test_fence_signals_after_submitted_work(gpu):
    data = np.arange(64, dtype=np.float32)
    buffer = gpu.create_buffer_with_data("fence-test", data, dev.STORAGE_USAGE)
    encoder = gpu.create_command_encoder("fence-test")
    zeros = gpu.create_buffer("fence-test-zeros", 16, dev.STORAGE_USAGE)
    encoder.copy_buffer(zeros, 0, buffer, 0, 16)
    gpu.submit([encoder.finish()])
    fence = gpu.fence()
    assert fence.wait(30.0)
    assert fence.is_done()
    out = np.frombuffer(gpu.read_buffer(buffer), np.float32)
    assert (out[:4] == 0).all() and (out[4:] == data[4:]).all()
    buffer.destroy()


def test_deferred_release_waits_for_work_submitted_before_retiring(gpu):
    data = np.zeros(1 << 16, np.float32)
    buffers = [
        gpu.create_buffer_with_data(f"deferred-{i}", data, dev.STORAGE_USAGE) for i in (0, 1)
    ]
    released = []

    def release(item):
        fence = fences[item]
        assert fence.is_done(), "released while its work was in flight"
        released.append(item)

    deferred = DeferredRelease(gpu, release)
    fences = {}
    for index in range(3):
        encoder = gpu.create_command_encoder("deferred")
        encoder.copy_buffer(buffers[0], 0, buffers[1], 0, data.nbytes)
        gpu.submit([encoder.finish()])
        fences[index] = gpu.fence()  # the same work as the fence `retire` takes next
        deferred.retire(index)
    assert len(deferred) + len(released) == 3
    assert fences[2].wait(30.0)
    for _ in range(100):
        deferred.collect()
        if not len(deferred):
            break
        gpu.fence().wait(0.1)
    assert sorted(released) == [0, 1, 2] and len(deferred) == 0
    deferred.retire(3)
    fences[3] = gpu.fence()
    deferred.release_all()  # waits for the queue
    assert released[-1] == 3 and len(deferred) == 0
    for buffer in buffers:
        buffer.destroy()


def test_the_wgpu_device_implements_the_interface(gpu):
    assert isinstance(gpu, dev.WgpuDevice) and isinstance(gpu, GpuDevice)
    assert not isinstance(gpu.device, GpuDevice)  # a raw wgpu device gets wrapped
    assert gpu.handle is gpu.device
    buffer = gpu.create_buffer("rounded", 5)
    assert buffer.size == 8
    buffer.destroy()


def test_wgpu_buffer_usage_bits_are_webgpus(gpu):
    for name in ("MAP_READ", "COPY_SRC", "COPY_DST", "UNIFORM", "STORAGE", "QUERY_RESOLVE"):
        assert int(getattr(dev.BufferUsage, name)) == int(getattr(dev.wgpu.BufferUsage, name))


_OPEN_AND_REPORT = """
import os
from oidn_gpu.backends.gpu_device import DeferredRelease, GpuDevice
from oidn_gpu.backends.wgpu import device as dev
d = dev.open_device()
with dev._xdg_notice_silenced():
    os.write(2, b"native-line\\n")
print(d.capabilities.adapter.device)
d.close()
"""


@pytest.mark.parametrize("xdg", ["unset", "usable"])
def test_opening_a_device_prints_no_driver_notice(gpu, tmp_path, xdg):
    """Without a usable XDG_RUNTIME_DIR (CI, headless shells) Mesa's notice is silenced while
    the device opens; with one, nothing is silenced (a native write still shows)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    if xdg == "usable":
        env["XDG_RUNTIME_DIR"] = str(tmp_path)
    run = subprocess.run(
        [sys.executable, "-c", _OPEN_AND_REPORT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert run.stdout.strip() == gpu.capabilities.adapter.device
    assert "XDG_RUNTIME_DIR" not in run.stderr
    assert ("native-line" in run.stderr) is (xdg == "usable")


# A machine whose only WebGPU adapter is OpenGL: the Vulkan loader finds no driver
# (lavapipe hidden) and wgpu is asked for its OpenGL backend. Mesa's llvmpipe still
# offers an OpenGL adapter through EGL there, which wgpu would otherwise use.
GL_ONLY_ENV = {
    "VK_ICD_FILENAMES": "/nonexistent/vulkan-icd.json",
    "VK_DRIVER_FILES": "/nonexistent/vulkan-icd.json",
    "WGPU_BACKEND_TYPE": "OpenGL",
}

GL_ONLY_PROBE = """
import numpy as np
import oidn_gpu
from oidn_gpu.backends.wgpu import device as dev
from oidn_gpu.errors import UnsupportedDeviceError

print("adapters:", len(dev.enumerate_adapters()), dev.has_hardware_adapter())
try:
    oidn_gpu.denoise(np.ones((16, 16, 3), np.float32), backend="wgpu")
except UnsupportedDeviceError as err:
    print("error:", err)
else:
    print("error: none")
with open("/proc/self/maps") as maps:
    print("egl loaded:", "libEGL" in maps.read())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux driver environment")
def test_a_machine_with_only_an_opengl_adapter_gets_a_clean_error():
    env = {**os.environ, **GL_ONLY_ENV}
    result = subprocess.run(
        [sys.executable, "-c", GL_ONLY_PROBE], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr  # no abort, no Rust panic
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    assert lines["adapters"] == "0 False"
    # the backend's probe says it, as the command line does: what is missing, the fix,
    # and the backends that run here instead
    assert lines["error"].startswith("the wgpu backend cannot run on this machine: no Vulkan")
    assert "mesa-vulkan-drivers" in lines["error"]
    assert "the backends that run here: 'reference'" in lines["error"]
    assert lines["egl loaded"] == "False"  # wgpu's OpenGL backend was never started


APP_INSTANCE_PROBE = """
import wgpu
from oidn_gpu.backends.wgpu import device as dev

wgpu.gpu.enumerate_adapters_sync()  # the application creates wgpu's instance, OpenGL included
print("backend:", dev.open_device().capabilities.adapter.backend_type)
print("adapters:", sorted({a.info["backend_type"] for a in dev.enumerate_adapters()}))
"""


def test_an_opengl_adapter_of_the_applications_instance_is_passed_over():
    env = {**os.environ, "WGPU_BACKEND_TYPE": "OpenGL"}  # wgpu would pick OpenGL first
    result = subprocess.run(
        [sys.executable, "-c", APP_INSTANCE_PROBE],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    assert lines["backend"] in ("Vulkan", "Metal", "D3D12")
    assert "OpenGL" not in lines["adapters"]
