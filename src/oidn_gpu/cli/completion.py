"""``oidn-gpu completion SHELL``: the tab-completion script of bash, zsh or fish, generated
from the command line's own parser by shtab (subcommands, flags, choices; file names where
a flag takes a file or folder)."""

from __future__ import annotations

import argparse
from typing import Any

from oidn_gpu.cli.usage import EXIT_OK, UsageError

SHELLS = ("bash", "zsh", "fish")
# Where each shell reads the script from, for the help.
INSTALL = {
    "bash": "oidn-gpu completion bash > ~/.local/share/bash-completion/completions/oidn-gpu",
    "zsh": "oidn-gpu completion zsh > ~/.zfunc/_oidn-gpu  (with fpath+=~/.zfunc before compinit)",
    "fish": "oidn-gpu completion fish > ~/.config/fish/completions/oidn-gpu.fish",
}
# Metavars of the flags that take a file or a folder.
_FILE_METAVARS = frozenset({"INPUT", "OUTPUT", "FILE", "PNG", "PATH", "PROGRAM", "WEIGHTS"})
_FOLDER_METAVARS = frozenset({"DIR"})


def add_completion_parser(sub: Any, root: argparse.ArgumentParser) -> None:
    """The ``completion`` subcommand; ``root``, the whole tool's parser, is what the
    scripts complete."""
    p = sub.add_parser(
        "completion",
        help="print the shell completion script of bash, zsh or fish",
        description="Print the tab-completion script of a shell. Install it with:\n  "
        + "\n  ".join(INSTALL.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("shell", metavar="SHELL", choices=SHELLS, help="bash, zsh or fish")
    p.set_defaults(root_parser=root)


def _mark_paths(parser: argparse.ArgumentParser, shtab: Any) -> None:
    """Complete file names (or folders) for the flags and arguments that take them."""
    for action in parser._actions:
        metavar = action.metavar if isinstance(action.metavar, str) else None
        if metavar in _FILE_METAVARS:
            action.complete = shtab.FILE  # type: ignore[attr-defined]
        elif metavar in _FOLDER_METAVARS:
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                _mark_paths(child, shtab)


def completion_script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script of ``shell`` for ``parser``.

    Raises:
        UsageError: a shell other than bash, zsh or fish.
    """
    if shell not in SHELLS:
        raise UsageError(f"unknown shell '{shell}'; expected one of {', '.join(SHELLS)}")
    import shtab

    _mark_paths(parser, shtab)
    return str(shtab.complete(parser, shell=shell))


def cmd_completion(args: argparse.Namespace) -> int:
    """``oidn-gpu completion SHELL``."""
    print(completion_script(args.shell, args.root_parser))
    return EXIT_OK
