"""The scripts of ``bench/`` that tests exercise, imported from their files (``bench/`` is
not a package)."""

from __future__ import annotations

import functools
import importlib.util
import sys
from types import ModuleType

from tests.datasets import REPO_ROOT


@functools.cache
def load(name: str) -> ModuleType:
    """``bench/<name>.py`` as the module ``name`` (registered in `sys.modules`, where
    dataclasses look their module up)."""
    path = REPO_ROOT / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, f"cannot import {path}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
