"""The package's layering: import-linter contracts and a NumPy-only ``import oidn_gpu``."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT

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
