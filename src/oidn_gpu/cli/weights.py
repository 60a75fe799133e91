"""``oidn-gpu weights fetch``: download the large official weights files (with a
progress bar per file)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from oidn_gpu.cli.usage import EXIT_OK, Parser, UsageError, add_verbose, finite_float
from oidn_gpu.fetch import base_url, fetch_weights

_LOG = logging.getLogger("oidn_gpu.cli")


def add_weights_parser(sub: Any) -> None:
    weights = sub.add_parser("weights", help="manage weights files")
    weights_sub = weights.add_subparsers(
        dest="weights_command", metavar="ACTION", parser_class=Parser
    )
    fetch = weights_sub.add_parser(
        "fetch",
        help="download the three large official weights files (about 23 MB) into a weights "
        "folder; the package bundles them too, so this is needed only for a folder of your "
        "own (searched first)",
    )
    fetch.add_argument("--dir", type=Path, help="destination (default: the user weights folder)")
    fetch.add_argument(
        "--url",
        help="base URL to download from (default: $OIDN_GPU_WEIGHTS_URL "
        "or the official oidn-weights repository)",
    )
    fetch.add_argument("--force", action="store_true", help="download even if present")
    fetch.add_argument(
        "--timeout",
        type=finite_float,
        default=30.0,
        help="seconds to connect and for each read (default 30)",
    )
    fetch.add_argument(
        "--deadline",
        type=finite_float,
        metavar="SECONDS",
        help="most seconds for each whole file (default 20 x --timeout, so 600)",
    )
    fetch.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    add_verbose(fetch)


def cmd_weights(args: argparse.Namespace) -> int:
    """``oidn-gpu weights fetch``."""
    if args.weights_command != "fetch":
        raise UsageError("missing action; expected 'oidn-gpu weights fetch'")

    bars: list[Any] = []

    def progress_factory(name: str) -> Any:
        if args.quiet:
            return None
        try:
            from tqdm import tqdm
        except ImportError:
            return None
        bar = tqdm(desc=f"{name}.tza", unit="B", unit_scale=True, file=sys.stderr, disable=None)
        bars.append(bar)

        def report(done: int, total: int | None) -> None:
            if total is not None:
                bar.total = total
            bar.update(done - bar.n)

        return report

    _LOG.info("downloading from %s", base_url(args.url))
    try:
        results = fetch_weights(
            directory=args.dir,
            url=args.url,
            force=args.force,
            timeout_s=args.timeout,
            deadline_s=args.deadline,
            progress_factory=progress_factory,
        )
    finally:
        for bar in bars:
            bar.close()
    for r in results:
        verb = "downloaded" if r.status == "downloaded" else "already present"
        _LOG.info("%s: %s, %s bytes, sha-256 verified", r.path, verb, f"{r.byte_size:,}")
    return EXIT_OK
