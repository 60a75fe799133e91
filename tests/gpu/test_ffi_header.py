"""wgpu-native's header parse shipped (`ffi_header`): the same declarations and types as a
parse made now, used by a fresh process where it matches the installed cffi, and a plain
parse where it does not."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from oidn_gpu.backends.wgpu import ffi_header, ffi_types

SRC = Path(__file__).resolve().parents[2] / "src"


def _c_text(value: object) -> str:
    """A model type's C spelling; other declared values (macros' numbers) as they are."""
    name = getattr(value, "_get_c_name", None)
    return name() if name is not None else repr(value)


def _described(state: dict) -> dict:
    """Every declaration, constant and type of a parse, as C text (comparable across
    parses: the model objects themselves are new in each)."""
    parser = state["parser"]
    return {
        "declarations": {
            name: (_c_text(tp), quals) for name, (tp, quals) in parser["_declarations"].items()
        },
        "constants": dict(parser["_int_constants"]),
        "types": {cdecl: _c_text(tp) for cdecl, tp in state["types"].items()},
    }


def test_the_shipped_parse_equals_a_parse_made_now() -> None:
    header = ffi_header.header_text()
    path = ffi_header.state_path(header)
    if not path.exists():  # another cffi or wgpu-py: the header is parsed as before
        assert not ffi_header._shipped_state(header)
        return
    shipped = ffi_header._shipped_state(header)
    types = ffi_header.IMPORT_TYPES + ffi_types.FIRST_IMAGE_TYPES
    assert shipped is not None and set(shipped["types"]) == set(types)
    now = ffi_header.parsed_state(header, types)
    assert _described(shipped) == _described(now)
    assert path.read_bytes() == ffi_header.state_bytes(header, types), (
        "run python -m oidn_gpu.backends.wgpu.ffi_header"
    )


def _fresh_process(script: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("shipped", [True, False], ids=["shipped", "parsed"])
def test_a_fresh_process_opens_a_device_with_the_shipped_parse_or_without(shipped: bool) -> None:
    """With the shipped state (where it matches the installed cffi) nothing is parsed; with
    none (here: its file hidden) cffi parses as before; a device opens either way."""
    script = f"""
        import json
        from pathlib import Path
        from oidn_gpu.backends.wgpu import device, ffi_header, ffi_types
        if not {shipped}:
            ffi_header.SHIPPED_DIR = Path("/nonexistent")
        gpu = device.open_device()
        ffi = ffi_types.wgpu_ffi()
        types = ffi_header.shipped_types(ffi._parser)
        buffer = gpu.create_buffer("probe", 256, 0x80 | 0x8)  # STORAGE | COPY_DST
        print(json.dumps({{
            "exists": ffi_header.state_path(ffi_header.header_text()).exists(),
            "shipped_types": len(types),
            "declarations": len(ffi._parser._declarations),
            "buffer": buffer is not None,
        }}))
    """
    result = _fresh_process(script)
    used = shipped and result["exists"]
    assert result["buffer"] and result["declarations"] > 500
    assert (result["shipped_types"] > 40) is used
