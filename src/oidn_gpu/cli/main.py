"""The ``oidn-gpu`` tool's top level: the parser of every subcommand, the dispatch, and
how errors become exit codes and ``error: ...`` lines (see the `oidn_gpu.cli` docstring)."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Sequence

from oidn_gpu import __version__
from oidn_gpu.backends.benchmark import benchmark_names
from oidn_gpu.cli import bench as bench_cli
from oidn_gpu.cli import record as record_cli
from oidn_gpu.cli.completion import add_completion_parser, cmd_completion
from oidn_gpu.cli.denoise import add_denoise_parser, cmd_denoise
from oidn_gpu.cli.example import add_example_parser, cmd_example
from oidn_gpu.cli.info import add_info_parser, cmd_info
from oidn_gpu.cli.inspect import add_inspect_parser, cmd_inspect
from oidn_gpu.cli.json_output import document, write_document
from oidn_gpu.cli.logs import (
    add_log_arguments,
    close_logging,
    configure_logging,
    split_log_arguments,
)
from oidn_gpu.cli.prepare import add_prepare_parser, cmd_prepare
from oidn_gpu.cli.settings import applied_settings
from oidn_gpu.cli.usage import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    VERBOSE_HELP,
    Interrupted,
    Parser,
    UsageError,
)
from oidn_gpu.cli.weights import add_weights_parser, cmd_weights
from oidn_gpu.errors import OIDNGPUError
from oidn_gpu.files import OutputFileError, install_signal_cleanup

NAME_ESCAPES = "oidn_gpu.name_escapes"
_LOG = logging.getLogger("oidn_gpu.cli")


def _escape_name_bytes(err: UnicodeError) -> tuple[str, int]:
    """Codec error handler: a file or channel name's bytes that are not UTF-8 (held by
    Python as surrogate escapes) written as ``\\xNN``; other unencodable characters as
    ``\\uNNNN``."""
    if not isinstance(err, UnicodeEncodeError):
        raise err
    text = err.object[err.start : err.end]
    escaped = "".join(
        f"\\x{ord(c) - 0xDC00:02x}" if "\udc80" <= c <= "\udcff" else f"\\u{ord(c):04x}"
        for c in text
    )
    return escaped, err.end


def _escape_names_in_output() -> None:
    """Print names that are not UTF-8 as ``\\xNN`` on stdout and stderr (not as a raw
    byte or a ``\\udcNN`` surrogate)."""
    codecs.register_error(NAME_ESCAPES, _escape_name_bytes)  # (the same handler each time)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # a closed or detached stream
                reconfigure(errors=NAME_ESCAPES)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (exposed for docs and tests)."""

    parser = Parser(prog="oidn-gpu", description="Intel Open Image Denoise networks on any GPU.")
    parser.add_argument("--version", action="version", version=f"oidn-gpu {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    add_denoise_parser(sub)
    add_inspect_parser(sub)
    add_info_parser(sub)
    add_weights_parser(sub)
    add_example_parser(sub)
    add_prepare_parser(sub)
    add_completion_parser(sub, parser)

    record_cli.add_record_parsers(sub)
    bench = sub.add_parser(
        "bench",
        help=f"benchmark a backend: [--backend {'|'.join(benchmark_names())}] --size "
        "1080p ... (default wgpu; 'bench --backend NAME --help' for its flags)",
    )
    bench.add_argument(
        "bench_args", nargs=argparse.REMAINDER, help="the benchmark's flags (see bench --help)"
    )
    add_log_arguments(parser, top_level=True)
    _add_log_arguments_to_commands(parser)
    return parser


def _add_log_arguments_to_commands(parser: argparse.ArgumentParser) -> None:
    """``--log-level``/``--log-file`` on every (sub)command but ``bench`` (which reads
    them before its own flags)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                if name != "bench":
                    add_log_arguments(command)
                    _add_log_arguments_to_commands(command)


def cmd_bench(args: argparse.Namespace) -> int:
    """``oidn-gpu bench``: see `oidn_gpu.cli.bench.main`."""
    return bench_cli.main(list(args.bench_args))


COMMANDS = {
    "denoise": cmd_denoise,
    "inspect": cmd_inspect,
    "info": cmd_info,
    "weights": cmd_weights,
    "example": cmd_example,
    "bench": cmd_bench,
    "prepare": cmd_prepare,
    "completion": cmd_completion,
}
COMMANDS.update(record_cli.COMMANDS)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the tool; returns the exit code (see the module doc). Its log handlers
    (`cli.logs`) are in place for the run only."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _escape_names_in_output()
    configure_logging(verbose="-v" in argv or "--verbose" in argv)  # errors show until
    try:  # the flags are read
        return _run(argv)
    finally:
        close_logging()


def _run(argv: list[str]) -> int:
    verbose = "-v" in argv or "--verbose" in argv
    try:
        parser = build_parser()
        if argv[:1] == ["bench"]:
            # The benchmark parses its own flags (different per backend).
            flags, rest = split_log_arguments(argv[1:])
            configure_logging(flags.log_level, flags.log_file, verbose=verbose)
            with applied_settings():
                return cmd_bench(argparse.Namespace(bench_args=rest))
        try:
            args = parser.parse_args(argv)
        except SystemExit as exit_:  # --help and --version
            return int(exit_.code or 0)
        verbose = bool(getattr(args, "verbose", False))
        configure_logging(
            args.log_level, args.log_file, verbose=verbose, quiet=getattr(args, "quiet", False)
        )
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        # the config file's values as their variables; SIGTERM: no temporary file left
        with applied_settings(), install_signal_cleanup():
            return COMMANDS[args.command](args)
    except UsageError as err:
        return _fail(err, EXIT_USAGE, argv)
    except OutputFileError as err:  # an output refused or unwritable before any work
        if verbose:
            traceback.print_exc()
        return _fail(err, EXIT_USAGE, argv)
    except Interrupted as err:  # a denoise run: what finished and how to resume
        _LOG.error("interrupted; %s", err)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        _LOG.error("interrupted; no partial outputs were left")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout was closed early (``| head``): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILURE
    except (OIDNGPUError, OSError, ValueError, RuntimeError) as err:
        if verbose:
            traceback.print_exc()
        return _fail(err, EXIT_FAILURE, argv)
    except Exception as err:
        if verbose:
            traceback.print_exc()
        _LOG.error(
            "internal error: %s: %s (run with --verbose for the traceback)",
            type(err).__name__,
            err,
        )
        return EXIT_FAILURE


def _fail(err: BaseException, code: int, argv: Sequence[str]) -> int:
    """Print ``error: ...`` on stderr and, for ``denoise --json``, the same as JSON on
    stdout (``{"error": ..., "exit_code": ...}``), so a script reading stdout sees it."""
    _LOG.error("%s", err)
    if "denoise" in argv and "--json" in argv:
        write_document(document("oidn-gpu.denoise", {"error": str(err), "exit_code": code}))
    return code
