"""What this installation has: versions, optional dependencies, backends and adapters.

Used by ``oidn-gpu info``. Every probe is defensive: a missing or broken optional
part is reported as such, never raised, so ``info`` works on any machine.
"""

from __future__ import annotations

import importlib
import platform
import sys
from dataclasses import dataclass, field
from typing import Any

OPTIONAL_MODULES = (
    ("numpy", "numpy"),
    ("wgpu", "wgpu"),
    ("jinja2", "jinja2"),
    ("OpenImageIO", "OpenImageIO"),
    ("tqdm", "tqdm"),
    ("pyoidn", "pyoidn"),
)


@dataclass(frozen=True)
class AdapterDescription:
    """One WebGPU adapter as wgpu reports it."""

    device: str
    adapter_type: str
    backend_type: str
    vendor: str
    features: tuple[str, ...] = ()


@dataclass
class SystemInfo:
    """The report of ``oidn-gpu info``."""

    version: str
    python: str
    platform: str
    modules: list[tuple[str, str | None]] = field(default_factory=list)  # (name, version|None)
    adapters: list[AdapterDescription] = field(default_factory=list)
    adapter_error: str | None = None
    backends: list[tuple[str, bool, str]] = field(default_factory=list)  # (name, ok, note)
    auto_backend: str | None = None
    auto_note: str = ""
    weights_dir: str = ""
    large_weights: list[tuple[str, bool]] = field(default_factory=list)


def _module_version(module: str) -> str | None:
    try:
        mod = importlib.import_module(module)
    except Exception:
        return None
    return str(getattr(mod, "__version__", None) or getattr(mod, "VERSION", "") or "installed")


def _adapters() -> tuple[list[AdapterDescription], str | None]:
    try:
        pass
    except Exception as err:
        return [], f"wgpu not importable ({err})"
    try:
        from oidn_gpu.backends.wgpu.device import enumerate_adapters

        adapters = enumerate_adapters()
    except Exception as err:
        return [], f"enumerating adapters failed ({err})"
    found = []
    for adapter in adapters:
        info: dict[str, Any] = dict(getattr(adapter, "info", {}) or {})
        try:
            features = tuple(sorted(str(f) for f in adapter.features))
        except Exception:
            features = ()
        found.append(
            AdapterDescription(
                device=str(info.get("device", "") or "?"),
                adapter_type=str(info.get("adapter_type", "") or "?"),
                backend_type=str(info.get("backend_type", "") or "?"),
                vendor=str(info.get("vendor", "") or ""),
                features=features,
            )
        )
    return found, None


def _auto_backend() -> tuple[str | None, str]:
    """Which backend 'auto' resolves to (``backends.resolve_backend``), without denoising."""
    from oidn_gpu.backends import resolve_backend

    try:
        return resolve_backend("auto"), ""
    except Exception as err:  # a broken driver must not break `info`
        return None, f"resolve_backend('auto') failed: {err}"


def _try_import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except Exception:
        return None


def collect(*, probe_auto: bool = True) -> SystemInfo:
    """Gather the report. ``probe_auto`` creates a Denoiser to see what 'auto' picks."""
    import oidn_gpu

    report = SystemInfo(
        version=oidn_gpu.__version__,
        python=sys.version.split()[0],
        platform=platform.platform(),
    )
    report.modules = [(name, _module_version(module)) for name, module in OPTIONAL_MODULES]
    report.adapters, report.adapter_error = _adapters()
    report.backends.append(("reference", True, "NumPy, always available"))
    wgpu_ok = bool(report.adapters) and _try_import("oidn_gpu.backends.wgpu") is not None
    if report.adapters:
        note = f"{len(report.adapters)} adapter(s)"
    else:
        note = report.adapter_error or "no adapter found"
    report.backends.append(("wgpu", wgpu_ok, note))
    if probe_auto:
        report.auto_backend, report.auto_note = _auto_backend()
    try:
        from oidn_gpu.fetch import LARGE_WEIGHTS
        from oidn_gpu.model.weights import user_weights_dir

        folder = user_weights_dir()
        report.weights_dir = str(folder)
        report.large_weights = [(n, (folder / f"{n}.tza").is_file()) for n in LARGE_WEIGHTS]
    except Exception as err:
        report.weights_dir = f"unknown ({err})"
    return report


def format_report(report: SystemInfo) -> str:
    """Human-readable lines for ``oidn-gpu info``."""
    lines = [
        f"oidn-gpu {report.version} (OIDN 2.5.1 networks)",
        f"python {report.python} on {report.platform}",
        "modules:",
    ]
    for name, version in report.modules:
        lines.append(f"  {name:<12} {version or 'not installed'}")
    lines.append("backends:")
    for name, ok, note in report.backends:
        lines.append(f"  {name:<12} {'available' if ok else 'unavailable'} ({note})")
    if report.adapters:
        lines.append("adapters:")
        for a in report.adapters:
            extra = ", ".join(
                f for f in a.features if f in ("shader-f16", "subgroup", "timestamp-query")
            )
            lines.append(
                f"  {a.device} ({a.backend_type}, {a.adapter_type})"
                + (f" features: {extra}" if extra else "")
            )
    if report.auto_backend is not None:
        device = f" on {report.auto_note}" if report.auto_note else ""
        lines.append(f"auto backend: {report.auto_backend}{device}")
    elif report.auto_note:
        lines.append(f"auto backend: unknown ({report.auto_note})")
    lines.append(f"user weights: {report.weights_dir}")
    for name, present in report.large_weights:
        lines.append(f"  {name}.tza {'present' if present else 'missing (oidn-gpu weights fetch)'}")
    return "\n".join(lines)
