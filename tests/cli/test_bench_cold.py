"""``oidn-gpu bench --cold``: the note a run gets when the Python environment holds no
compiled bytecode for the packages a fresh process imports."""

from __future__ import annotations

import py_compile
import types

from oidn_gpu.cli.bench_cold import ColdResult, _note_bytecode, without_bytecode


def _package(tmp_path, name):
    folder = tmp_path / name
    folder.mkdir()
    init = folder / "__init__.py"
    init.write_text("VALUE = 1\n")
    return types.SimpleNamespace(__file__=str(init))


def test_packages_without_bytecode_are_named(tmp_path):
    triton, numpy = _package(tmp_path, "triton"), _package(tmp_path, "numpy")
    py_compile.compile(numpy.__file__, doraise=True)  # numpy's bytecode is there
    modules = {
        "triton": triton,
        "numpy": numpy,
        "json": types.SimpleNamespace(),  # no source file (a built-in module)
        "triton.language": _package(tmp_path, "sub"),  # a submodule: its package counts
    }
    assert without_bytecode(modules) == ["triton"]
    py_compile.compile(triton.__file__, doraise=True)
    assert without_bytecode(modules) == []


def test_the_note_is_written_once_and_leaves_the_times_numeric():
    result = ColdResult((64, 64), (32, 32))
    for _ in range(2):
        times = {"first_denoise_s": 0.5, "no_bytecode": ["torch", "triton"]}
        _note_bytecode(result, times)
        assert times == {"first_denoise_s": 0.5}
    assert len(result.notes) == 1
    assert "no compiled bytecode for torch, triton" in result.notes[0]
    _note_bytecode(result, {"no_bytecode": []})
    assert len(result.notes) == 1
