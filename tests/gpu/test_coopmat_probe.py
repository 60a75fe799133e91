"""bench/coopmat_probe.py on lavapipe: the evidence docs/benchmarks.md cites ("Tensor cores
(cooperative matrices) through wgpu") comes from calls that work and read what they say."""

from __future__ import annotations

import pytest

from tests import bench_scripts

probe = bench_scripts.load("coopmat_probe")


@pytest.fixture(scope="module")
def report(gpu) -> dict:
    """The probe's findings, after the session's device (`gpu`) has created wgpu's
    instance without OpenGL, as every other test sees it."""
    found: dict = {}
    probe.wgpu_probe(found)
    probe.vulkan_probe(found)
    return found


def test_the_feature_name_maps_to_wgpu_natives_cooperative_matrix_enum(report):
    assert report["native_feature_enum"] == 0x0003003B  # WGPUNativeFeature_CooperativeMatrix
    assert report["wgpu_native"].count(".") >= 2


def test_a_device_request_with_the_feature_is_refused_and_says_why(report):
    vulkan = [a for a in report["adapters"] if a["backend"] == "Vulkan"]
    assert vulkan and not any(a["has_feature"] for a in vulkan)
    assert len(report["requests"]) == 2
    for answer in report["requests"].values():
        assert answer != "granted"
        assert "EXPERIMENTAL_COOPERATIVE_MATRIX" in answer
    assert "mma" not in report


def test_naga_knows_the_enable_extension_but_the_device_lacks_it(report):
    answer = report["shader_without_feature"]
    assert "wgpu_cooperative_matrix" in answer and "not supported" in answer


def test_the_vulkan_loader_probe_reads_the_devices_wgpu_sees(report):
    devices = report["vulkan"]
    assert isinstance(devices, list) and devices
    wgpu_names = {a["device"] for a in report["adapters"] if a["backend"] == "Vulkan"}
    assert wgpu_names & {d["device"] for d in devices}
    for device in devices:
        assert device["api"].startswith("1.")
        assert device["extension_count"] == len(device["extensions"]) > 10
        assert all(name.startswith("VK_") for name in device["extensions"])
        assert {device[k] for k in ("cooperativeMatrix", "vulkanMemoryModel")} <= {0, 1}
        if "VK_KHR_cooperative_matrix" in device["extensions"]:
            assert all(" scope " in c for c in device["configurations"])
