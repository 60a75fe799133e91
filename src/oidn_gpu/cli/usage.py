"""What every subcommand shares: exit codes, `UsageError` and the parser that raises it,
and the argument types of the flags (their messages are argparse's ``error: ...``)."""

from __future__ import annotations

import argparse
import difflib
import math
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell convention

VERBOSE_HELP = "details and tracebacks"


class UsageError(Exception):
    """Bad command-line usage: printed as ``error: <message>``, exit code 2."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a run; the message says what was finished and how to go on.
    Printed as ``error: interrupted; <message>``, exit code 130."""


class Parser(argparse.ArgumentParser):
    """argparse that raises `UsageError` instead of printing usage and exiting."""

    argv: Sequence[str] = ()

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        self.argv = list(sys.argv[1:] if args is None else args)
        return super().parse_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        prog = self.prog
        if message.startswith("unrecognized arguments: "):
            # A misspelt flag: the closest flag of the subcommand given (difflib).
            command = _subcommand(self, self.argv)
            prog = command.prog
            known = [o for a in command._actions for o in a.option_strings if o[:2] == "--"]
            for token in message.split(": ", 1)[1].split():
                name = token.split("=", 1)[0]
                close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
                if name.startswith("--") and close:
                    message += f" (did you mean {close[0]}?)"
                    break
        raise UsageError(f"{message} (see '{prog} --help')")


def _subcommand(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The (sub)command parser that ``argv`` names (``denoise``, ``weights fetch``, ...)."""
    for token in argv:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subparsers and token in subparsers[0].choices:
            parser = subparsers[0].choices[token]
    return parser


def add_verbose(parser: argparse.ArgumentParser) -> None:
    """``-v``/``--verbose`` on a subcommand (the top-level flag's value when not given)."""
    parser.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP
    )


def parse_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer '{text}'") from None


def _int_from(text: str, low: int, words: str) -> int:
    """An integer of at least ``low``; else ``'<value> <words>'``."""
    value = parse_int(text)
    if value < low:
        raise argparse.ArgumentTypeError(f"{value} {words}")
    return value


def positive_int(text: str) -> int:
    return _int_from(text, 1, "must be at least 1")


def gpu_share(text: str) -> float:
    """A worker's GPUs as Ray takes them: a fraction in (0, 1] or a whole number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not (0 < value <= 1 or (value > 1 and value.is_integer())):
        raise argparse.ArgumentTypeError(
            f"{text} must be a fraction in (0, 1] or a whole number of GPUs"
        )
    return value


def non_negative_int(text: str) -> int:
    return _int_from(text, 0, "must not be negative")


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number '{text}'") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be a finite number >= 0")
    return value


def choice(choices: Sequence[str], what: str):
    def parse(text: str) -> str:
        if text not in choices:
            expected = ", ".join(f"'{c}'" for c in choices[:-1]) + f" or '{choices[-1]}'"
            raise argparse.ArgumentTypeError(f"unknown {what} '{text}'; expected {expected}")
        return text

    return parse
