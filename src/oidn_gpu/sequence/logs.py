"""A run's report lines as log records: what the sequence loop and the farm write to
stderr themselves (per-frame lines, warnings, errors) is also logged on their loggers
(``oidn_gpu.sequence``, ``oidn_gpu.farm``), marked `REPORTED` so that a stderr handler
can skip it (the command line's does: `oidn_gpu.cli.logs`) while a log file keeps it."""

from __future__ import annotations

import logging

REPORTED = "oidn_gpu_reported"  # a record's attribute: the run already wrote it to stderr
_LEVELS = (("warning: ", logging.WARNING), ("error: ", logging.ERROR))


def report(logger: logging.Logger, text: str) -> None:
    """Log a line a run already wrote to stderr itself (marked `REPORTED`), at the level
    its ``warning:``/``error:`` prefix names (the prefix dropped), else info."""
    level = logging.INFO
    for prefix, named in _LEVELS:
        if text.startswith(prefix):
            level, text = named, text[len(prefix) :]
    logger.log(level, text, extra={REPORTED: True})
