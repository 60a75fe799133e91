"""``oidn-gpu info``: the report of `oidn_gpu.installation.info`, printed, then the
command line's settings (the config file's and the variables' values, and where each
comes from)."""

from __future__ import annotations

import argparse
from typing import Any

from oidn_gpu.cli.settings import report_lines
from oidn_gpu.cli.usage import EXIT_OK, add_verbose
from oidn_gpu.installation import collect, format_report


def add_info_parser(sub: Any) -> None:
    info = sub.add_parser("info", help="version, backends and adapters, what 'auto' picks")
    info.add_argument("--no-probe", action="store_true", help="do not create a Denoiser")
    add_verbose(info)


def cmd_info(args: argparse.Namespace) -> int:
    """``oidn-gpu info``."""
    report = format_report(collect(probe_auto=not args.no_probe))
    print("\n".join([report, *report_lines()]))
    return EXIT_OK
