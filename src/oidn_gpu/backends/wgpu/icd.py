"""Whether a Vulkan GPU can exist on this Linux machine, decided without loading wgpu.

On Linux wgpu reaches GPUs only through Vulkan (its OpenGL backend is left out,
see `device`), and the Vulkan loader finds its drivers through ICD manifests: JSON
files naming each driver's library. ``backend="auto"`` needs to know whether a
real GPU adapter exists; importing wgpu to ask costs about a second (cffi parses
wgpu-native's header). `no_gpu_reason` answers from the manifests and the device
nodes instead, and says why no GPU adapter can exist, or None when one may (then
the caller asks wgpu):

- the manifests the loader reads: ``VK_DRIVER_FILES`` (or the older
  ``VK_ICD_FILENAMES``) when set, else the ``vulkan/icd.d`` folders of the
  XDG configuration and data folders, ``/usr/local/etc`` and ``/etc``; plus
  ``VK_ADD_DRIVER_FILES`` (the Vulkan loader's search order on Linux);
- CPU drivers (Mesa's lavapipe ``libvulkan_lvp``, SwiftShader ``libvk_swiftshader``)
  are never picked by ``auto``, so only CPU drivers means no GPU adapter;
- every other Vulkan driver on Linux talks to its GPU through a device node
  (``/dev/dri/renderD*`` for Mesa's drivers, ``/dev/nvidia*`` for NVIDIA's,
  ``/dev/dxg`` under WSL), so GPU drivers without any such node (Mesa's
  ``mesa-vulkan-drivers`` installs them beside lavapipe) mean no GPU adapter either.

A manifest that cannot be read or parsed counts as a possible GPU (None).
"""

from __future__ import annotations

import glob
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

# Library name fragments of Vulkan drivers that run on the CPU.
CPU_DRIVERS = {"libvulkan_lvp": "lavapipe", "libvk_swiftshader": "SwiftShader"}
# Device nodes through which Linux Vulkan drivers reach a GPU.
GPU_DEVICE_NODES = ("dri/renderD*", "nvidia[0-9]*", "dxg")


def _split(value: str | None) -> list[str]:
    return [part for part in (value or "").split(os.pathsep) if part]


def manifest_paths(env: Mapping[str, str] | None = None) -> list[Path]:
    """The ICD manifest files the Vulkan loader reads on Linux, in its order."""
    env = os.environ if env is None else env
    explicit = _split(env.get("VK_DRIVER_FILES")) or _split(env.get("VK_ICD_FILENAMES"))
    if explicit:
        entries = [Path(p) for p in explicit]
    else:
        home = Path(env.get("HOME") or "~").expanduser()
        config_home = env.get("XDG_CONFIG_HOME") or str(home / ".config")
        data_home = env.get("XDG_DATA_HOME") or str(home / ".local" / "share")
        config_dirs = _split(env.get("XDG_CONFIG_DIRS")) or ["/etc/xdg"]
        data_dirs = _split(env.get("XDG_DATA_DIRS")) or ["/usr/local/share", "/usr/share"]
        roots = [config_home, *config_dirs, "/usr/local/etc", "/etc", data_home, *data_dirs]
        entries = [Path(root) / "vulkan" / "icd.d" for root in roots]
    entries += [Path(p) for p in _split(env.get("VK_ADD_DRIVER_FILES"))]
    files: list[Path] = []
    for entry in entries:
        if entry.is_dir():
            files += sorted(p for p in entry.iterdir() if p.suffix == ".json")
        elif entry.exists():
            files.append(entry)
    return list(dict.fromkeys(files))


def driver_library(manifest: Path) -> str | None:
    """The ``ICD.library_path`` a manifest names; None when it cannot be read."""
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        library = data["ICD"]["library_path"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return library if isinstance(library, str) and library else None


def cpu_driver_name(library: str) -> str | None:
    """``"lavapipe"`` or ``"SwiftShader"`` for a CPU driver's library, else None."""
    base = os.path.basename(library)
    for fragment, name in CPU_DRIVERS.items():
        if base.startswith(fragment):
            return name
    return None


def cpu_drivers(env: Mapping[str, str] | None = None) -> list[str]:
    """Names of the CPU Vulkan drivers installed (``"lavapipe"``, ``"SwiftShader"``)."""
    names = (cpu_driver_name(lib) for m in manifest_paths(env) if (lib := driver_library(m)))
    return sorted({name for name in names if name is not None})


def gpu_device_nodes(dev: Path = Path("/dev")) -> list[str]:
    """The GPU device nodes present (render nodes, NVIDIA's, WSL's)."""
    return sorted(hit for pattern in GPU_DEVICE_NODES for hit in glob.glob(str(dev / pattern)))


def no_gpu_reason(
    env: Mapping[str, str] | None = None, dev: Path = Path("/dev"), platform: str | None = None
) -> str | None:
    """Why no Vulkan GPU adapter can exist here, or None when one may (or not Linux)."""
    if not (platform or sys.platform).startswith("linux"):
        return None
    manifests = manifest_paths(env)
    if not manifests:
        return "no Vulkan driver is installed (no ICD manifest)"
    libraries = [driver_library(m) for m in manifests]
    if any(library is None for library in libraries):
        return None
    cpu = sorted({name for lib in libraries if (name := cpu_driver_name(lib)) is not None})
    gpu = [lib for lib in libraries if cpu_driver_name(lib) is None]
    if not gpu:
        return f"only CPU Vulkan drivers ({', '.join(cpu)})"
    if gpu_device_nodes(dev):
        return None
    return "Vulkan GPU drivers are installed but no GPU device (/dev/dri/renderD*, /dev/nvidia*)"
