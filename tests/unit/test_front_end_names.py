"""The front ends (command line, farm, sequence loop) and the facade never name a backend:
what they need to know of one, the backend declares (`backends.base.Backend`)."""

from __future__ import annotations

import ast
from pathlib import Path

from oidn_gpu.backends.base import backend_names
from tests.datasets import REPO_ROOT

SRC = REPO_ROOT / "src" / "oidn_gpu"
FRONT_ENDS = [
    *sorted((SRC / "cli").glob("*.py")),
    *sorted((SRC / "farm").glob("*.py")),
    *sorted((SRC / "sequence").glob("*.py")),
    *sorted(SRC.glob("filter*.py")),
    SRC / "config.py",
]
# Names that are not backends': Python packages of `oidn-gpu info`'s list of optional
# modules, and the folder of a sequence's converged reference images.
PACKAGE_LISTS = ("OPTIONAL_MODULES", "REFERENCE_FOLDER")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add(id(value))
    return found


def _package_lists(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in PACKAGE_LISTS for t in node.targets
        ):
            found |= {id(n) for n in ast.walk(node.value)}
    return found


def backend_names_in(path: Path) -> list[str]:
    """``line: 'name'`` of each string constant of ``path`` that is a backend's name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _docstrings(tree) | _package_lists(tree)
    names = set(backend_names())
    return [
        f"{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in skipped
    ]


def test_no_front_end_module_names_a_backend() -> None:
    found = {
        str(path.relative_to(SRC)): names
        for path in FRONT_ENDS
        if (names := backend_names_in(path))
    }
    assert found == {}


def test_the_check_finds_a_backend_name(tmp_path: Path) -> None:
    source = tmp_path / "front_end.py"
    source.write_text(
        '"""Runs on the wgpu backend."""\n'
        'OPTIONAL_MODULES = (("wgpu", "wgpu"),)\n'
        'def gpu_slots(backend):\n    return backend != "reference"\n'
    )
    assert backend_names_in(source) == ["4: 'reference'"]
