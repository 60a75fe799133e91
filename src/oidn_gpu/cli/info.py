"""``oidn-gpu info``: the report of `oidn_gpu.installation.info`, printed."""

from __future__ import annotations

import argparse
from typing import Any

from oidn_gpu.cli.usage import EXIT_OK, add_verbose
from oidn_gpu.installation import collect, format_report


def add_info_parser(sub: Any) -> None:
    info = sub.add_parser("info", help="version, backends and adapters, what 'auto' picks")
    info.add_argument("--no-probe", action="store_true", help="do not create a Denoiser")
    add_verbose(info)


def cmd_info(args: argparse.Namespace) -> int:
    """``oidn-gpu info``."""

    print(format_report(collect(probe_auto=not args.no_probe)))
    return EXIT_OK
