"""The ``--backend`` flag and the backend option flags, from the backend registry.

Each backend's ``Options`` says which of its options are flags (`option_help`), their
choices and placeholders; options of one name in several backends share one flag
(``--precision``). The command line never names a backend itself.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from oidn_gpu.backends.base import AUTO, backend_names, get_backend
from oidn_gpu.cli.usage import choice
from oidn_gpu.errors import InvalidArgumentError


@dataclass(frozen=True)
class BackendFlag:
    """One ``--NAME`` flag for backend options of that name (several backends may share it)."""

    name: str
    backends: tuple[str, ...]
    choices: tuple[str, ...] | None
    help: str
    metavar: str | None = None

    def parse(self, text: str) -> Any:
        if self.choices is not None:
            return choice(self.choices, self.name)(text)
        for backend in self.backends:
            options = get_backend(backend).Options
            parse_option = getattr(options, "parse_cli_option", None)
            if parse_option is not None:
                try:
                    return parse_option(self.name, text)
                except InvalidArgumentError as err:
                    raise argparse.ArgumentTypeError(str(err)) from None
        return text


def backend_flags() -> dict[str, BackendFlag]:
    """The backend option flags, from every registered backend's ``Options``."""
    merged: dict[str, tuple[list[str], list[str] | None, list[str]]] = {}
    metavars: dict[str, str | None] = {}
    for name in backend_names():
        options = get_backend(name).Options
        for option, text in options.option_help.items():
            metavars.setdefault(option, options.option_metavars.get(option))
            backends, choices, helps = merged.setdefault(option, ([], [], []))
            backends.append(name)
            allowed = options.option_choices.get(option)
            if allowed is None or choices is None:
                merged[option] = (backends, None, helps)
            else:
                choices.extend(c for c in allowed if c not in choices)
            helps.append(text)
    return {
        option: BackendFlag(
            option,
            tuple(backends),
            tuple(choices) if choices is not None else None,
            "; ".join(helps),
            metavars[option],
        )
        for option, (backends, choices, helps) in merged.items()
    }


def add_backend_flags(group: Any) -> None:
    """``--backend`` (``auto`` or a registered backend) and every backend option flag."""
    backends = (AUTO, *backend_names())
    group.add_argument(
        "--backend",
        type=choice(backends, "backend"),
        default=AUTO,
        help=", ".join(backends[:-1]) + f" or {backends[-1]} (default {AUTO})",
    )
    for flag in backend_flags().values():
        group.add_argument(
            f"--{flag.name.replace('_', '-')}",
            dest=flag.name,
            type=flag.parse,
            default=None,
            metavar=flag.metavar,
            help=flag.help,
        )


def backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """The backend option flags given on the command line (name -> value)."""
    return {
        name: getattr(args, name)
        for name in backend_flags()
        if getattr(args, name, None) is not None
    }
