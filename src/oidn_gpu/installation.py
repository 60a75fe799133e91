"""What this installation has: versions, optional dependencies, backends and adapters.

`info` (``oidn_gpu.info()``) returns it, and ``oidn-gpu info`` prints the same. Backends
come from the registry (`backends.base`):
each one's probe and the devices it describes. Every probe is defensive: a
missing or broken optional part is reported as such, never raised, so ``info``
works on any machine.
"""

from __future__ import annotations

import importlib
import platform
import sys
from dataclasses import dataclass, field

from oidn_gpu.backends.base import auto_choice, backend_names, get_backend, probe
from oidn_gpu.model.weights import LARGE_WEIGHTS_SHA256, user_weights_dir

OPTIONAL_MODULES = (
    ("numpy", "numpy"),
    ("wgpu", "wgpu"),
    ("jinja2", "jinja2"),
    ("OpenImageIO", "OpenImageIO"),
    ("tqdm", "tqdm"),
    ("pyoidn", "pyoidn"),
)


@dataclass(frozen=True)
class BackendReport:
    """One registered backend: whether it runs here, and what it sees."""

    name: str
    available: bool
    note: str
    details: tuple[str, ...] = ()


@dataclass
class SystemInfo:
    """The report of `info` and ``oidn-gpu info``; ``str()`` gives its text."""

    version: str
    python: str
    platform: str
    modules: list[tuple[str, str | None]] = field(default_factory=list)  # (name, version|None)
    backends: list[BackendReport] = field(default_factory=list)
    auto_backend: str | None = None
    auto_note: str = ""
    weights_dir: str = ""
    large_weights: list[tuple[str, bool]] = field(default_factory=list)

    def __str__(self) -> str:
        return format_report(self)


def _module_version(module: str) -> str | None:
    try:
        mod = importlib.import_module(module)
    except Exception:
        return None
    return str(getattr(mod, "__version__", None) or getattr(mod, "VERSION", "") or "installed")


def _auto_backend() -> tuple[str | None, str]:
    """Which backend 'auto' resolves to (``backends.auto_choice``) and why, without
    denoising."""
    try:
        choice = auto_choice()
    except Exception as err:  # a broken driver must not break `info`
        return None, f"resolve_backend('auto') failed: {err}"
    return choice.name, choice.reason


def _backend_report(name: str, *, probe_devices: bool) -> BackendReport:
    # A broken optional package or driver must not break `info`: failures are reported.
    try:
        backend = get_backend(name)
    except Exception as err:
        return BackendReport(name, False, f"failed to load ({type(err).__name__}: {err})")
    availability = probe(name)  # never raises
    try:
        details = tuple(backend.describe()) if probe_devices else ()
    except Exception as err:
        details = (f"describing it failed ({type(err).__name__}: {err})",)
    return BackendReport(name, availability.available, availability.note, details)


def collect(*, probe_auto: bool = True) -> SystemInfo:
    """Gather the report: every registered backend's probe (and, with ``probe_auto``,
    the devices it sees and what 'auto' picks)."""
    # the package's __version__, read where it is (the package imports this module)
    version = getattr(sys.modules.get("oidn_gpu"), "__version__", "unknown")
    report = SystemInfo(
        version=version,
        python=sys.version.split()[0],
        platform=platform.platform(),
    )
    report.modules = [(name, _module_version(module)) for name, module in OPTIONAL_MODULES]
    report.backends = [_backend_report(name, probe_devices=probe_auto) for name in backend_names()]
    if probe_auto:
        report.auto_backend, report.auto_note = _auto_backend()
    try:
        folder = user_weights_dir()
        report.weights_dir = str(folder)
        report.large_weights = [(n, (folder / f"{n}.tza").is_file()) for n in LARGE_WEIGHTS_SHA256]
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
    for backend in report.backends:
        state = "available" if backend.available else "unavailable"
        lines.append(f"  {backend.name:<12} {state} ({backend.note})")
        lines.extend(f"    {line}" for line in backend.details)
    if report.auto_backend is not None:
        why = f": {report.auto_note}" if report.auto_note else ""
        lines.append(f"auto backend: {report.auto_backend}{why}")
    elif report.auto_note:
        lines.append(f"auto backend: unknown ({report.auto_note})")
    lines.append(f"user weights: {report.weights_dir}")
    for name, present in report.large_weights:
        where = "here (used before the package's copy)" if present else "from the package"
        lines.append(f"  {name}.tza {where}")
    return "\n".join(lines)


def info(*, probe_devices: bool = True) -> SystemInfo:
    """What this installation has, as ``oidn-gpu info`` prints it: the version, optional
    modules, every backend (whether it runs here and why, and with ``probe_devices`` the
    devices it sees), what ``backend="auto"`` picks, and the weights folder.

    Never raises for a missing or broken optional part: it is reported instead.
    ``print(oidn_gpu.info())`` shows the text.
    """
    return collect(probe_auto=probe_devices)
