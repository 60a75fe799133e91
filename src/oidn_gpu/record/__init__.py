"""Recorded GPU programs: record a whole denoise once, replay it on any WebGPU host.

- `format`: the program value types and the file constants (oidn-web's version 2,
  and version 3 with section checksums);
- `config`: the config words of `record_network` / `record_denoise`;
- `writer` / `reader`: Program <-> bytes (the reader bounds-checks everything);
- `device`: `RecordingDevice`, the `GpuDevice` the unchanged executor records on;
- `api`: `record_network`, `record_denoise`, `inspect_model_packet` and packet variants;
- `replay`: `Replayer`, which runs a program on a wgpu device;
- `summary`: what a program contains (``oidn-gpu program info``).

The ``record``, ``replay`` and ``program info`` subcommands live in `oidn_gpu.cli.record`.

``format``, ``config``, ``writer``, ``reader`` and ``summary`` need no wgpu; names
from the other modules are imported lazily.
"""

from __future__ import annotations

from typing import Any

from oidn_gpu.record.config import RecordConfig, make_config, parse_config
from oidn_gpu.record.format import Program, ProgramFormatError
from oidn_gpu.record.reader import read_program
from oidn_gpu.record.writer import write_program

_LAZY = {
    "record_network": "api",
    "record_denoise": "api",
    "record_network_packet": "api",
    "record_denoise_packet": "api",
    "inspect_model_packet": "api",
    "Replayer": "replay",
    "RecordingDevice": "device",
}

__all__ = [
    "Program",
    "ProgramFormatError",
    "RecordConfig",
    "RecordingDevice",
    "Replayer",
    "inspect_model_packet",
    "make_config",
    "parse_config",
    "read_program",
    "record_denoise",
    "record_denoise_packet",
    "record_network",
    "record_network_packet",
    "write_program",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'oidn_gpu.record' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"oidn_gpu.record.{module}"), name)
