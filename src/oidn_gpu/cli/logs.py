"""The command line's logging: ``--log-level`` and ``--log-file`` on every command.

The library logs through the standard `logging` module on the ``oidn_gpu`` logger
hierarchy (``oidn_gpu.cli``, ``oidn_gpu.sequence``, ``oidn_gpu.farm``, ``oidn_gpu.wgpu``,
``oidn_gpu.backends.cuda...``) and adds no handler but a `logging.NullHandler`; the tool
configures two here:

* stderr: the message alone, after ``warning:`` or ``error:`` for those levels (as the
  tool always printed them), at ``--log-level`` (default ``info`` for the tool's own
  loggers, `TOOL_LOGGERS`, and ``warning`` for the library's backends; ``debug`` for all
  with ``--verbose``, ``error`` with ``--quiet``). While a progress bar is drawn, lines
  are written above it (`progress_safe`: `tqdm.contrib.logging.logging_redirect_tqdm`);
* ``--log-file PATH`` (appended to): every record at ``--log-level`` (default ``info``, or
  ``debug`` with ``--verbose``) as ``2026-12-05T23:10:42.117+0000 INFO oidn_gpu.sequence:
  frame 2/3 ...``: a timestamp with its UTC offset, the level and the logger.

A run's own report (the sequence loop's per-frame lines, the farm's messages) is written
to stderr by the run itself and also logged, marked `REPORTED`: the stderr handler skips
those records so that each line shows once, and the log file keeps them
(`oidn_gpu.sequence.logs`).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from oidn_gpu.cli.usage import UsageError
from oidn_gpu.sequence.logs import REPORTED

LOGGER_NAME = "oidn_gpu"
LEVELS = ("debug", "info", "warning", "error")
FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_PREFIXES = {logging.DEBUG: "debug: ", logging.WARNING: "warning: ", logging.ERROR: "error: "}
_HANDLER_NAME = "oidn-gpu-cli"
_saved_levels: list[int] = []  # the logger's level before `configure_logging`
# What the tool says on stderr at info by default: its runs' reports; the backends' info
# records (kernels loaded, a temporal history restarted) only with --log-level info/debug.
TOOL_LOGGERS = ("oidn_gpu.cli", "oidn_gpu.sequence", "oidn_gpu.farm", "oidn_gpu.bench")


def add_log_arguments(parser: argparse.ArgumentParser, *, top_level: bool = False) -> None:
    """``--log-level`` and ``--log-file`` on ``parser`` (a subcommand's default is the
    top-level flag's value)."""
    default = None if top_level else argparse.SUPPRESS
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        type=str.lower,
        default=default,
        help="messages shown and logged from this level on (default info; debug with "
        "--verbose; on stderr, error with --quiet)",
    )
    parser.add_argument(
        "--log-file",
        metavar="PATH",
        default=default,
        help="also append every message to PATH, each line with a timestamp, level and logger",
    )


def split_log_arguments(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """``--log-level``/``--log-file`` taken out of a command line whose other flags another
    parser reads (``bench``); returns them and the rest."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    add_log_arguments(parser, top_level=True)
    try:
        return parser.parse_known_args(list(argv))
    except argparse.ArgumentError as err:
        raise UsageError(f"{err} (see 'oidn-gpu bench --help')") from None


class _ConsoleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        prefix = _PREFIXES.get(record.levelno, "error: " if record.levelno > 40 else "")
        return text if text.startswith(prefix) else prefix + text


class _ConsoleFilter(logging.Filter):
    """The stderr handler's level and the run's own report lines skipped (a filter, so
    that `logging_redirect_tqdm`, which copies a handler's filters, keeps both)."""

    def __init__(self, level: int, library_level: int) -> None:
        super().__init__()
        self.level = level
        self.library_level = library_level

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, REPORTED, False) or record.levelno < self.level:
            return False
        tool = record.name.startswith(TOOL_LOGGERS)
        return tool or record.levelno >= self.library_level


class _FileFormatter(logging.Formatter):
    # logging's method name
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        """ISO 8601 local time with milliseconds and the UTC offset."""
        local = time.localtime(record.created)
        millis = int(record.msecs)
        return (
            time.strftime("%Y-%m-%dT%H:%M:%S", local)
            + f".{millis:03d}"
            + time.strftime("%z", local)
        )


def _level(name: str | None, default: int) -> int:
    return default if name is None else logging.getLevelName(name.upper())


def configure_logging(
    log_level: str | None = None,
    log_file: str | None = None,
    *,
    verbose: bool = False,
    quiet: bool = False,
) -> None:
    """Replace the tool's handlers on the ``oidn_gpu`` logger (see the module doc).

    Raises:
        OSError: the log file cannot be opened for appending.
    """
    file_level = _level(log_level, logging.DEBUG if verbose else logging.INFO)
    console_level = file_level if log_level is not None or not quiet else logging.ERROR
    handlers: list[logging.Handler] = []
    if log_file:  # opened first: a log file that cannot be opened keeps the old handlers
        path = Path(log_file).expanduser()
        handler = logging.FileHandler(path, mode="a", encoding="utf-8", errors="backslashreplace")
        handler.setLevel(file_level)
        handler.setFormatter(_FileFormatter(FILE_FORMAT))
        handlers.append(handler)
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(_ConsoleFormatter("%(message)s"))
    explicit = log_level is not None or verbose
    library_level = console_level if explicit else max(console_level, logging.WARNING)
    console.addFilter(_ConsoleFilter(console_level, library_level))
    handlers.append(console)
    close_logging()
    logger = logging.getLogger(LOGGER_NAME)
    _saved_levels.append(logger.level)
    for handler in handlers:
        handler.set_name(_HANDLER_NAME)
        logger.addHandler(handler)
    logger.setLevel(min(console_level, file_level) if log_file else console_level)


def close_logging() -> None:
    """Remove (and close) the handlers `configure_logging` added; the ``oidn_gpu`` logger's
    level back to what it was."""
    logger = logging.getLogger(LOGGER_NAME)
    for handler in [h for h in logger.handlers if h.get_name() == _HANDLER_NAME]:
        logger.removeHandler(handler)
        handler.close()
    if _saved_levels:
        logger.setLevel(_saved_levels.pop())


@contextlib.contextmanager
def progress_safe() -> Iterator[None]:
    """While a progress bar may be drawn: the tool's stderr lines written above it."""
    try:
        from tqdm.contrib.logging import logging_redirect_tqdm
    except ImportError:  # no tqdm: no bar either
        yield
        return
    with logging_redirect_tqdm(loggers=[logging.getLogger(LOGGER_NAME)]):
        yield
