"""The source's size bounds: every module under src/ at most 700 lines, every function at
most 80, and the formatter switched off only where a table reads better by hand.

Lines are counted after `ruff format` (scripts/test.sh checks the formatting first), so a
bound is met by splitting a module or a function by meaning, never by squeezing lines.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 80

# The only places the formatter is switched off, with why: (module, number of markers).
FORMATTER_OFF = {
    # BASE_SPEC and LARGE_SPEC: the encoder's convs and pools one resolution level per line,
    # as the network diagrams read (the formatter would put one name per line).
    "oidn_gpu/model/unet.py": 2,
}

_MARKER = re.compile(r"#\s*fmt:\s*(off|skip)\b")


def _modules() -> list[Path]:
    modules = sorted(SRC.rglob("*.py"))
    assert modules, f"no Python modules under {SRC}"
    return modules


def _name(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def _is_triton_kernel(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a `jit` decorator (``triton.jit``, or a module's ``_jit`` around it) makes the
    function a Triton kernel: one GPU program, whose parts would be further kernels to
    inline, and whose source text is part of the shipped compiled kernels' fingerprint."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name.endswith("jit"):
            return True
    return False


def _module_problems(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    problems = []
    lines = len(text.splitlines())
    if lines > MAX_MODULE_LINES:
        problems.append(f"{_name(path)}: {lines} lines (at most {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        assert node.end_lineno is not None
        length = node.end_lineno - node.lineno + 1
        if length > MAX_FUNCTION_LINES and not _is_triton_kernel(node):
            problems.append(
                f"{_name(path)}:{node.lineno}: {node.name} has {length} lines "
                f"(at most {MAX_FUNCTION_LINES})"
            )
    return problems


def _formatter_markers(path: Path) -> int:
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    return sum(1 for t in tokens if t.type == tokenize.COMMENT and _MARKER.search(t.string))


def test_modules_and_functions_stay_within_their_bounds() -> None:
    problems = [p for path in _modules() for p in _module_problems(path)]
    assert not problems, "split these by meaning:\n" + "\n".join(problems)


def test_the_formatter_is_off_only_in_the_listed_tables() -> None:
    found = {_name(path): n for path in _modules() if (n := _formatter_markers(path))}
    assert found == FORMATTER_OFF, (
        f"'# fmt: off' / '# fmt: skip' markers per module: {found}; expected {FORMATTER_OFF} "
        "(let the formatter lay out new code; split what reads badly)"
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n" + "    x = 1\n" * 80, ["f has 81 lines"]),
        ("def f():\n" + "    x = 1\n" * 79, []),
        ("@triton.jit\ndef k():\n" + "    x = 1\n" * 90, []),
        ("@_jit('n')\ndef k():\n" + "    x = 1\n" * 90, []),
        ("class C:\n    def m(self):\n" + "        x = 1\n" * 85, ["m has 86 lines"]),
    ],
)
def test_the_function_bound_counts_from_def_to_last_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, expected: list[str]
) -> None:
    monkeypatch.setattr(f"{__name__}.SRC", tmp_path)
    module = tmp_path / "m.py"
    module.write_text(source)
    problems = _module_problems(module)
    assert len(problems) == len(expected)
    for problem, text in zip(problems, expected, strict=True):
        assert text in problem


def test_markers_are_found_in_comments_only(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('x = (1,)  # fmt: skip\ntext = "# fmt: off"\n# fmt: off\ny = 2\n# fmt: on\n')
    assert _formatter_markers(module) == 2
