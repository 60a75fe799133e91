"""Probe whether wgpu (through wgpu-py) can enable cooperative matrices on this machine.

    python bench/coopmat_probe.py [--json out.json]

Prints, for the wgpu-py and wgpu-native versions installed:
- every Vulkan/Metal/D3D12 adapter and its features (``cooperative-matrix`` marked);
- what ``request_device(required_features=[... "cooperative-matrix"])`` answers;
- what naga answers to a shader with ``enable wgpu_cooperative_matrix;`` on a device
  opened without the feature (16x16 f16 multiply-add, the shape tensor cores run);
- where a device with the feature was granted: that shader's result on one 16x16 tile
  against NumPy;
- from the Vulkan loader itself (ctypes, no wgpu): each physical device's
  ``VK_KHR_cooperative_matrix`` / ``VK_NV_cooperative_matrix2`` extensions, its
  ``cooperativeMatrix`` and Vulkan memory model features and the matrix configurations
  ``vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR`` lists.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
from typing import Any

import numpy as np

FEATURE = "cooperative-matrix"

# naga's WGSL spelling (gfx-rs/wgpu naga/tests/in/wgsl/cooperative-matrix.wgsl):
# coop_matCxR<T, role>, coopLoad / coopMultiplyAdd / coopStore.
MMA_SHADER = """enable f16;
enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read_write> ab: array<f16>;
@group(0) @binding(1) var<storage, read_write> c: array<f32>;
@compute @workgroup_size(32)
fn main() {
  let a = coopLoad<coop_mat16x16<f16, A>>(&ab[0], 16u);
  let b = coopLoad<coop_mat16x16<f16, B>>(&ab[256], 16u);
  var acc = coopLoad<coop_mat16x16<f32, C>>(&c[0], 16u);
  acc = coopMultiplyAdd(a, b, acc);
  coopStore(acc, &c[0], 16u);
}
"""


def first_error_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    useful = [line for line in lines if "rror" in line or "not" in line or "nsupported" in line]
    return " | ".join(useful[-3:] or lines[:3])


def wgpu_probe(report: dict[str, Any]) -> None:
    import wgpu
    import wgpu.backends.wgpu_native as native
    from wgpu.backends.wgpu_native._mappings import enum_str2int

    report["wgpu_py"] = wgpu.__version__
    report["wgpu_native"] = native.__version__
    report["native_feature_enum"] = enum_str2int["NativeFeature"].get(FEATURE)
    print(
        f"wgpu-py {wgpu.__version__}, wgpu-native {native.__version__}, "
        f"'{FEATURE}' -> WGPUNativeFeature {report['native_feature_enum']:#x}"
    )
    adapters = []
    for adapter in wgpu.gpu.enumerate_adapters_sync():
        info = dict(adapter.info)
        features = sorted(str(f) for f in adapter.features)
        entry = {
            "device": info.get("device"),
            "backend": info.get("backend_type"),
            "adapter_type": info.get("adapter_type"),
            "driver": info.get("description"),
            "features": features,
            "has_feature": FEATURE in features,
        }
        adapters.append(entry)
        print(
            f"adapter {entry['device']} ({entry['backend']}, {entry['adapter_type']}), "
            f"driver {entry['driver']}: {FEATURE} {'YES' if entry['has_feature'] else 'no'}"
        )
        print("  features:", " ".join(features))
    report["adapters"] = adapters
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    report["requests"] = {}
    granted = None
    for wanted in ([FEATURE], ["shader-f16", "subgroup", FEATURE]):
        key = "+".join(wanted)
        try:
            device = adapter.request_device_sync(required_features=wanted)
            report["requests"][key] = "granted"
            granted = granted or device
            print(f"request_device({wanted}): granted")
        except Exception as error:
            report["requests"][key] = first_error_line(error)
            print(f"request_device({wanted}): {type(error).__name__}: {first_error_line(error)}")
    plain = adapter.request_device_sync(required_features=["shader-f16"])
    try:
        plain.create_shader_module(code=MMA_SHADER)
        report["shader_without_feature"] = "compiled"
    except Exception as error:
        report["shader_without_feature"] = first_error_line(error)
    print("shader on a device without the feature:", report["shader_without_feature"])
    if granted is not None:
        report["mma"] = run_mma(granted)
        print("16x16x16 f16 multiply-add:", report["mma"])


def run_mma(device: Any) -> str:
    """One 16x16 tile C += A B through coopMultiplyAdd, checked against NumPy."""
    import wgpu

    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 16)).astype(np.float16)
    c = rng.standard_normal((16, 16)).astype(np.float32)
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
    try:
        module = device.create_shader_module(code=MMA_SHADER)
        pipeline = device.create_compute_pipeline(
            layout="auto", compute={"module": module, "entry_point": "main"}
        )
        ab_buf = device.create_buffer_with_data(data=np.concatenate([a, b]).tobytes(), usage=usage)
        c_buf = device.create_buffer_with_data(data=c.tobytes(), usage=usage)
        group = device.create_bind_group(
            layout=pipeline.get_bind_group_layout(0),
            entries=[
                {"binding": 0, "resource": {"buffer": ab_buf}},
                {"binding": 1, "resource": {"buffer": c_buf}},
            ],
        )
        encoder = device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, group)
        compute.dispatch_workgroups(1)
        compute.end()
        device.queue.submit([encoder.finish()])
        out = np.frombuffer(device.queue.read_buffer(c_buf), np.float32).reshape(16, 16)
    except Exception as error:
        return f"failed: {first_error_line(error)}"
    # naga's coopLoad reads column-major by default: compare both layouts
    row = a.astype(np.float32) @ b.astype(np.float32) + c
    col = (a.T.astype(np.float32) @ b.T.astype(np.float32)).T + c
    return (
        f"max |err| row-major {np.abs(out - row).max():.3g}, "
        f"column-major {np.abs(out - col).max():.3g}"
    )


# --- Vulkan loader, through ctypes -------------------------------------------------------

VK_API_1_3 = (1 << 22) | (3 << 12)
ST_APP_INFO, ST_INSTANCE_INFO, ST_FEATURES2 = 0, 1, 1000059000
ST_MEMORY_MODEL, ST_COOP_FEATURES, ST_COOP_PROPS = 1000211000, 1000506000, 1000506001
COMPONENT = {
    0: "f16",
    1: "f32",
    2: "f64",
    3: "s8",
    4: "s16",
    5: "s32",
    6: "s64",
    7: "u8",
    8: "u16",
    9: "u32",
    10: "u64",
    1000141000: "bf16",
    1000491002: "e4m3",
    1000491003: "e5m2",
}
SCOPE = {1: "device", 2: "workgroup", 3: "subgroup", 5: "queue-family"}


def vulkan_probe(report: dict[str, Any]) -> None:
    try:
        vk = ctypes.CDLL("libvulkan.so.1")
    except OSError as error:
        report["vulkan"] = f"no loader: {error}"
        print("Vulkan loader:", report["vulkan"])
        return
    vk.vkGetInstanceProcAddr.restype = ctypes.c_void_p
    vk.vkGetInstanceProcAddr.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    app = (ctypes.c_uint32 * 12)()  # VkApplicationInfo, 48 bytes
    app[0] = ST_APP_INFO
    app[11] = VK_API_1_3  # apiVersion at byte offset 44
    create = (ctypes.c_uint64 * 8)()  # VkInstanceCreateInfo, 64 bytes
    create[0] = ST_INSTANCE_INFO
    create[3] = ctypes.addressof(app)  # pApplicationInfo at byte offset 24
    instance = ctypes.c_void_p()
    result = vk.vkCreateInstance(ctypes.byref(create), None, ctypes.byref(instance))
    if result != 0:
        report["vulkan"] = f"vkCreateInstance returned {result}"
        print(report["vulkan"])
        return
    count = ctypes.c_uint32()
    vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
    physical = (ctypes.c_void_p * count.value)()
    vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), physical)
    proc = vk.vkGetInstanceProcAddr(instance, b"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
    query = None
    if proc:
        query = ctypes.CFUNCTYPE(
            ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p
        )(proc)
    report["vulkan"] = [vulkan_device(vk, device, query) for device in physical]
    vk.vkDestroyInstance(instance, None)


def vulkan_device(vk: Any, device: int, query: Any) -> dict[str, Any]:
    props = ctypes.create_string_buffer(4096)  # VkPhysicalDeviceProperties (824 bytes)
    vk.vkGetPhysicalDeviceProperties(ctypes.c_void_p(device), props)
    api, driver = np.frombuffer(props.raw[:8], np.uint32)
    name = props.raw[20:276].split(b"\0")[0].decode()
    count = ctypes.c_uint32()
    vk.vkEnumerateDeviceExtensionProperties(
        ctypes.c_void_p(device), None, ctypes.byref(count), None
    )
    ext = ctypes.create_string_buffer(260 * count.value)
    vk.vkEnumerateDeviceExtensionProperties(ctypes.c_void_p(device), None, ctypes.byref(count), ext)
    extensions = sorted(
        ext.raw[i * 260 : i * 260 + 256].split(b"\0")[0].decode() for i in range(count.value)
    )
    entry: dict[str, Any] = {
        "device": name,
        "api": f"{api >> 22}.{(api >> 12) & 1023}.{api & 4095}",
        "driver_version": int(driver),
        "extension_count": len(extensions),
        "coop_extensions": [e for e in extensions if "cooperative" in e],
        "extensions": extensions,
    }
    entry.update(vulkan_features(vk, device))
    if query is not None and "VK_KHR_cooperative_matrix" in extensions:
        entry["configurations"] = vulkan_configurations(device, query)
    print(
        f"Vulkan {name} (API {entry['api']}): {len(extensions)} extensions, "
        f"{entry['coop_extensions']}"
    )
    print(
        "  features:",
        {
            k: entry[k]
            for k in ("cooperativeMatrix", "vulkanMemoryModel", "vulkanMemoryModelDeviceScope")
        },
    )
    for config in entry.get("configurations", []):
        print("  config", config)
    return entry


def vulkan_features(vk: Any, device: int) -> dict[str, int]:
    coop = (ctypes.c_uint32 * 6)()  # sType, pad, pNext, cooperativeMatrix, robust access
    coop[0] = ST_COOP_FEATURES
    memory = (ctypes.c_uint32 * 8)()  # sType, pad, pNext, model, device scope, chains
    memory[0] = ST_MEMORY_MODEL
    ctypes.c_uint64.from_address(ctypes.addressof(memory) + 8).value = ctypes.addressof(coop)
    features2 = (ctypes.c_uint32 * 64)()  # sType, pad, pNext, VkPhysicalDeviceFeatures
    features2[0] = ST_FEATURES2
    ctypes.c_uint64.from_address(ctypes.addressof(features2) + 8).value = ctypes.addressof(memory)
    vk.vkGetPhysicalDeviceFeatures2(ctypes.c_void_p(device), features2)
    return {
        "vulkanMemoryModel": memory[4],
        "vulkanMemoryModelDeviceScope": memory[5],
        "cooperativeMatrix": coop[4],
    }


def vulkan_configurations(device: int, query: Any) -> list[str]:
    count = ctypes.c_uint32()
    query(device, ctypes.byref(count), None)
    size = 56  # VkCooperativeMatrixPropertiesKHR
    table = (ctypes.c_uint32 * (size // 4 * count.value))()
    for i in range(count.value):
        table[i * size // 4] = ST_COOP_PROPS
    query(device, ctypes.byref(count), table)
    configs = []
    for i in range(count.value):
        m, n, k, a, b, c, r, sat, scope = table[i * 14 + 4 : i * 14 + 13]
        configs.append(
            f"M{m} N{n} K{k} A {COMPONENT.get(a, a)} B {COMPONENT.get(b, b)} "
            f"C {COMPONENT.get(c, c)} result {COMPONENT.get(r, r)}"
            f"{' saturating' if sat else ''} scope {SCOPE.get(scope, scope)}"
        )
    return configs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    report: dict[str, Any] = {"python": platform.python_version(), "machine": platform.node()}
    wgpu_probe(report)
    vulkan_probe(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
