"""Golden bytes of a small recorded program: any change to the format or the recording shows here.

The program is a whole denoise of a 16x16 LDR image by ``tiny_base_ic3`` in
fp32, recorded for WebGPU's baseline limits (no device involved), so the bytes
are the same on every machine. ``tests/data/program_golden.json`` holds its
SHA-256, size and section counts. A change of kernels (WGSL text), of the
executor's resources, or of the format changes the bytes: review the printed
differences, and if the change is deliberate regenerate with
``OIDN_GPU_UPDATE_GOLDEN=1 pytest tests/record/test_golden.py`` (and update
``docs/program-format.md`` when the format itself changed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

import pytest

from oidn_gpu.record import make_config, read_program
from oidn_gpu.record.api import record_denoise
from oidn_gpu.record.summary import summarize

# The recorder runs the wgpu backend's executor (on a recording device), so it needs wgpu.
pytestmark = pytest.mark.gpu

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "program_golden.json"
CONFIG = dict(width=16, height=16, precision="fp32", denoise=True)


def _record(tiny_tza) -> bytes:
    return record_denoise(tiny_tza["tiny_base_ic3"], make_config(**CONFIG))


def _describe(data: bytes) -> dict:
    summary = dataclasses.asdict(summarize(read_program(data)))
    return {
        "sha256": hashlib.sha256(data).hexdigest(),
        "byte_size": len(data),
        "config": make_config(**CONFIG).hex(),
        "summary": json.loads(json.dumps(summary)),
    }


def test_recorded_program_bytes_are_pinned(tiny_tza):
    data = _record(tiny_tza)
    current = _describe(data)
    if os.environ.get("OIDN_GPU_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    golden = json.loads(GOLDEN.read_text())
    changed = {
        key: (golden["summary"].get(key), value)
        for key, value in current["summary"].items()
        if golden["summary"].get(key) != value
    }
    assert current["config"] == golden["config"], "the config words changed"
    assert current["sha256"] == golden["sha256"], (
        f"recorded program bytes changed ({golden['byte_size']} -> {current['byte_size']} bytes; "
        f"summary changes {changed or 'none (shader text or data only)'}); if deliberate, "
        "regenerate with OIDN_GPU_UPDATE_GOLDEN=1"
    )
