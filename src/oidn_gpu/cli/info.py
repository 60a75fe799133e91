"""``oidn-gpu info``: the report of `oidn_gpu.installation.info`, printed, then the
command line's settings (the config file's and the variables' values, and where each
comes from); with ``--json`` the same as one document (schema ``oidn-gpu.info``)."""

from __future__ import annotations

import argparse
from typing import Any

from oidn_gpu.cli.json_output import STDOUT, document, write_document
from oidn_gpu.cli.settings import report, report_lines
from oidn_gpu.cli.usage import EXIT_OK, add_verbose
from oidn_gpu.installation import SystemInfo, collect, format_report


def add_info_parser(sub: Any) -> None:
    info = sub.add_parser("info", help="version, backends and adapters, what 'auto' picks")
    info.add_argument("--no-probe", action="store_true", help="do not create a Denoiser")
    info.add_argument(
        "--json",
        nargs="?",
        const=STDOUT,
        default=None,
        metavar="PATH",
        help="the report as JSON (schema oidn-gpu.info, docs/json.md) on stdout, or in PATH",
    )
    add_verbose(info)


def cmd_info(args: argparse.Namespace) -> int:
    """``oidn-gpu info``."""
    collected = collect(probe_auto=not args.no_probe)
    if args.json is not None:
        write_document(document("oidn-gpu.info", report_json(collected)), args.json)
    else:
        print("\n".join([format_report(collected), *report_lines()]))
    return EXIT_OK


def report_json(report_: SystemInfo) -> dict[str, Any]:
    """The ``oidn-gpu.info`` document's fields (docs/json.md)."""
    config_file, origins = report()
    return {
        "version": report_.version,
        "oidn_version": "2.5.1",
        "python": report_.python,
        "platform": report_.platform,
        "modules": dict(report_.modules),
        "backends": [
            {"name": b.name, "available": b.available, "note": b.note, "details": list(b.details)}
            for b in report_.backends
        ],
        "auto_backend": report_.auto_backend,
        "auto_note": report_.auto_note,
        "weights_dir": report_.weights_dir,
        "large_weights": dict(report_.large_weights),
        "config_file": str(config_file),
        "settings": {
            o.setting.key: {"value": o.value, "source": o.source, "variable": o.setting.variable}
            for o in origins
        },
    }
