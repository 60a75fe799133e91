"""``oidn-gpu example``: the bundled example render, its path printed or a copy made."""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path
from typing import Any

from oidn_gpu.cli.usage import EXIT_OK
from oidn_gpu.files import write_bytes_atomic

EXAMPLE_NAME = "textured_checker.exr"


def add_example_parser(sub: Any) -> None:
    example = sub.add_parser("example", help="print the path of the bundled example render")
    example.add_argument("--copy", type=Path, metavar="DIR", help="copy it into DIR instead")


def example_path() -> Path:
    """The bundled example render (a 256x256 multi-layer EXR: beauty, albedo, nn)."""
    return Path(str(resources.files("oidn_gpu").joinpath("data", "example", EXAMPLE_NAME)))


def cmd_example(args: argparse.Namespace) -> int:
    """``oidn-gpu example``: print (or copy) the bundled example render."""
    path = example_path()
    if args.copy is not None:
        path = write_bytes_atomic(args.copy / EXAMPLE_NAME, path.read_bytes())
    print(path)
    return EXIT_OK
