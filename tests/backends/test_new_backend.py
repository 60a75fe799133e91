"""A new backend is its folder and one registry line: the toy backend proves it.

The toy backend (`toy_backend`) is registered only by `conftest.TEST_BACKENDS` and runs
the whole contract suite (`test_contract`); these tests check that nothing else in the
code names it, that ``oidn-gpu bench`` runs its benchmark by asking the backend, and the
registry's ``register_backend``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from oidn_gpu.backends import (
    REGISTRY,
    backend_names,
    get_backend,
    probe,
    register_backend,
    unregister_backend,
)
from oidn_gpu.backends.benchmark import benchmark_names, load_benchmark
from oidn_gpu.cli import main
from oidn_gpu.errors import InvalidArgumentError

REPO = Path(__file__).resolve().parents[2]
FOLDER = Path(__file__).resolve().parent / "toy_backend"
REGISTRY_LINE = Path(__file__).resolve().parent / "conftest.py"
# What names the toy backend: its package, its registry name, its classes.
NAMES_TOY = re.compile(r"toy_backend|[\"']toy[\"']|\bToy[A-Z]\w*")


def _code_files() -> list[Path]:
    files = [*(REPO / "src").rglob("*.py"), *(REPO / "tests").rglob("*.py")]
    return [*files, REPO / "pyproject.toml"]


def test_the_toy_backend_touches_its_folder_and_the_registry_line_only() -> None:
    assert sorted(p.name for p in FOLDER.iterdir() if p.suffix == ".py") == [
        "__init__.py",
        "backend.py",
    ]
    naming = {path for path in _code_files() if NAMES_TOY.search(path.read_text(encoding="utf-8"))}
    outside = {p for p in naming if FOLDER not in p.parents} - {REGISTRY_LINE, Path(__file__)}
    assert not outside, f"files outside {FOLDER.name}/ name the toy backend: {sorted(outside)}"
    assert REGISTRY_LINE in naming


def test_the_toy_backend_is_registered_last_with_its_benchmark() -> None:
    assert backend_names()[-1] == "toy" and "toy" in benchmark_names()
    assert REGISTRY["toy"] == "tests.backends.toy_backend.backend:BACKEND"


def test_bench_asks_the_backend_for_its_benchmark(tmp_path, capsys) -> None:
    out = tmp_path / "toy.json"
    assert main(["bench", "--backend", "toy", "--size", "40x24", "--json", str(out)]) == 0
    assert "toy network 40x24:" in capsys.readouterr().out
    assert len(json.loads(out.read_text())["network_ms"]) == 1
    assert load_benchmark("toy").description == "Time the toy backend's network."


def test_register_backend_refuses_taken_and_malformed_names() -> None:
    with pytest.raises(InvalidArgumentError, match="'reference' is already registered"):
        register_backend("reference", "somewhere:BACKEND")
    with pytest.raises(InvalidArgumentError, match="must be an identifier"):
        register_backend("auto", "somewhere:BACKEND")
    with pytest.raises(InvalidArgumentError, match="expected 'module:attribute'"):
        register_backend("plugin", "somewhere")
    with pytest.raises(InvalidArgumentError, match="not a backend added by register_backend"):
        unregister_backend("wgpu")
    assert "plugin" not in REGISTRY


def test_a_registered_backend_is_forgotten_when_unregistered() -> None:
    register_backend("plugin", "tests.backends.toy_backend.backend:BACKEND")
    try:
        assert get_backend("plugin") is get_backend("toy") and probe("plugin").available
    finally:
        unregister_backend("plugin")
    with pytest.raises(InvalidArgumentError, match="unknown backend 'plugin'"):
        get_backend("plugin")
