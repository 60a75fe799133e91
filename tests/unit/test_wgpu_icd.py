"""backends.wgpu.icd: ruling a Vulkan GPU out from the driver manifests, without wgpu."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from oidn_gpu.backends.base import probe
from oidn_gpu.backends.wgpu import icd

REPO = Path(__file__).resolve().parents[2]
LAVAPIPE = "/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so"
SWIFTSHADER = "/opt/swiftshader/libvk_swiftshader.so"
INTEL = "/usr/lib/x86_64-linux-gnu/libvulkan_intel.so"
NVIDIA = "libGLX_nvidia.so.0"


def _manifest(folder: Path, name: str, library: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"file_format_version": "1.0.0", "ICD": {"library_path": library}}))
    return path


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment whose manifest search sees only folders under tmp_path (and /etc)."""
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_DIRS": str(tmp_path / "xdg-config"),
        "XDG_DATA_DIRS": str(tmp_path / "share"),
        **extra,
    }


def test_explicit_driver_files_replace_the_search(tmp_path: Path) -> None:
    lvp = _manifest(tmp_path / "a", "lvp", LAVAPIPE)
    folder_one = _manifest(tmp_path / "b", "intel", INTEL)
    _manifest(tmp_path / "share" / "vulkan" / "icd.d", "nvidia", NVIDIA)  # not searched
    added = _manifest(tmp_path / "c", "swiftshader", SWIFTSHADER)
    env = _env(
        tmp_path,
        VK_DRIVER_FILES=f"{lvp}{os.pathsep}{folder_one.parent}",
        VK_ADD_DRIVER_FILES=str(added),
    )
    assert icd.manifest_paths(env) == [lvp, folder_one, added]
    old = _env(tmp_path, VK_ICD_FILENAMES=str(lvp))
    assert icd.manifest_paths(old) == [lvp]


def test_the_xdg_folders_are_searched(tmp_path: Path) -> None:
    user = _manifest(tmp_path / "home" / ".local" / "share" / "vulkan" / "icd.d", "u", INTEL)
    system = _manifest(tmp_path / "share" / "vulkan" / "icd.d", "lvp", LAVAPIPE)
    config = _manifest(tmp_path / "xdg-config" / "vulkan" / "icd.d", "c", NVIDIA)
    found = icd.manifest_paths(_env(tmp_path))
    assert [p for p in found if str(p).startswith(str(tmp_path))] == [config, user, system]


@pytest.mark.parametrize(
    ("libraries", "nodes", "expected"),
    [
        ([LAVAPIPE], [], "only CPU Vulkan drivers (lavapipe)"),
        (
            [LAVAPIPE, SWIFTSHADER],
            ["dri/renderD128"],
            "only CPU Vulkan drivers (SwiftShader, lavapipe)",
        ),
        ([LAVAPIPE, INTEL], [], "Vulkan GPU drivers are installed but no GPU device"),
        ([LAVAPIPE, INTEL], ["dri/renderD128"], None),
        ([NVIDIA], ["nvidia0"], None),
        ([INTEL], ["dxg"], None),
        ([], [], "no Vulkan driver is installed"),
    ],
)
def test_no_gpu_reason(tmp_path: Path, libraries, nodes, expected) -> None:
    folder = tmp_path / "icd"
    folder.mkdir()
    for index, library in enumerate(libraries):
        _manifest(folder, f"driver{index}", library)
    dev = tmp_path / "dev"
    for node in nodes:
        (dev / node).parent.mkdir(parents=True, exist_ok=True)
        (dev / node).touch()
    env = {"VK_DRIVER_FILES": str(folder)}
    reason = icd.no_gpu_reason(env, dev, platform="linux")
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith(expected)


def test_an_unreadable_manifest_may_be_a_gpu(tmp_path: Path) -> None:
    _manifest(tmp_path, "lvp", LAVAPIPE)
    (tmp_path / "broken.json").write_text("{not json")
    assert icd.no_gpu_reason({"VK_DRIVER_FILES": str(tmp_path)}, tmp_path, "linux") is None
    assert icd.driver_library(tmp_path / "broken.json") is None


def test_other_systems_always_ask_wgpu(tmp_path: Path) -> None:
    _manifest(tmp_path, "lvp", LAVAPIPE)
    for platform in ("darwin", "win32"):
        assert icd.no_gpu_reason({"VK_DRIVER_FILES": str(tmp_path)}, tmp_path, platform) is None


def test_auto_does_not_import_wgpu_where_only_cpu_drivers_exist(tmp_path: Path) -> None:
    """A fresh process with only lavapipe installed: auto is a CPU backend, and
    wgpu (whose import parses wgpu-native's header, about a second) is never imported."""
    _manifest(tmp_path, "lvp", LAVAPIPE)
    env = {k: v for k, v in os.environ.items() if k not in ("OIDN_GPU_BACKEND", "VK_ICD_FILENAMES")}
    env["VK_DRIVER_FILES"] = str(tmp_path / "lvp.json")
    code = (
        "import sys, oidn_gpu, numpy as np\n"
        "from oidn_gpu.backends.base import probe, resolve_backend\n"
        "den = oidn_gpu.Denoiser(hdr=True)\n"
        "den.denoise(np.ones((16, 16, 3), np.float32))\n"
        "print(den.backend, probe('wgpu').available, probe('wgpu').auto, 'wgpu' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    if sys.platform.startswith("linux"):
        # a CPU machine's auto backend: Intel OIDN's CPU device where pyoidn is installed
        cpu_backend = "oidn" if probe("oidn").available else "reference"
        assert result.stdout.split() == [cpu_backend, "True", "False", "False"]
