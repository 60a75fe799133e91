"""The package's layering: import-linter contracts and a NumPy-only ``import oidn_gpu``."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.datasets import REPO_ROOT

# Runs import-linter's command line in this interpreter (its contracts live in pyproject.toml).
LINT_IMPORTS = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def test_import_contracts_are_kept() -> None:
    result = subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--no-cache"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_import_oidn_gpu_loads_no_gpu_backend() -> None:
    code = (
        "import sys, oidn_gpu; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('wgpu', 'torch') "
        "or m.startswith('oidn_gpu.backends.wgpu')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


# Modules that import wgpu or torch when loaded: the only oidn_gpu modules imported inside
# functions.
OPTIONAL_DEPENDENCY_MODULES = (
    "oidn_gpu.backends.wgpu",
    "oidn_gpu.backends.cuda",
    "oidn_gpu.record.api",
    "oidn_gpu.record.replay",
)
# The wgpu backend's registry entry, which must import without wgpu.
WGPU_REGISTRY_ENTRY = "oidn_gpu.backends.wgpu.backend"
# The cuda backend's Triton kernels, which import Triton when loaded: its loader imports
# them on first use, off the path of a first frame that cuDNN serves.
TRITON_KERNELS = (
    "oidn_gpu.backends.cuda.triton_kernels",
    "oidn_gpu.backends.cuda.fused_kernels",
    "oidn_gpu.backends.cuda.io_kernels",
    "oidn_gpu.backends.cuda.row_kernels",
)
# The cold-start benchmark's child process times `import oidn_gpu` itself.
TIMED_IMPORT = ("src/oidn_gpu/cli/bench_cold.py", "oidn_gpu")


def _function_level_imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom) and inner.module and inner.level == 0:
                names = [inner.module] + [f"{inner.module}.{a.name}" for a in inner.names]
            elif isinstance(inner, ast.Import):
                names = [a.name for a in inner.names]
            else:
                continue
            for name in names[:1] if isinstance(inner, ast.ImportFrom) else names:
                if name.split(".")[0] == "oidn_gpu":
                    found.append((inner.lineno, name))
    return found


def test_oidn_gpu_modules_are_imported_inside_functions_only_for_wgpu_or_torch() -> None:
    offenders = []
    for path in sorted((REPO_ROOT / "src" / "oidn_gpu").rglob("*.py")):
        for line, name in _function_level_imports(path):
            lazy_ok = name.startswith(OPTIONAL_DEPENDENCY_MODULES) and name != WGPU_REGISTRY_ENTRY
            posix = path.as_posix()
            inside = ("backends/wgpu/" in posix or "backends/cuda/" in posix) and (
                path.name not in ("backend.py", "__init__.py")
            )
            relative = path.relative_to(REPO_ROOT)
            if (relative.as_posix(), name) == TIMED_IMPORT:
                continue
            if name in TRITON_KERNELS and path.name == "triton_loader.py" and inside:
                continue
            if not lazy_ok or inside:
                offenders.append(f"{relative}:{line} imports {name}")
    assert not offenders, "\n".join(offenders)
