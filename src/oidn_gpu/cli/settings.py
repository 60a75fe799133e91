"""Site and user defaults from a config file (TOML) for every setting that has an
``OIDN_GPU_*`` environment variable.

The file is the one ``OIDN_GPU_CONFIG`` names, else ``config.toml`` in the platform's
per-user config folder (platformdirs: ``~/.config/oidn-gpu`` on Linux,
``~/Library/Application Support/oidn-gpu`` on macOS, ``%LOCALAPPDATA%\\oidn-gpu`` on
Windows). Its keys are the variables' names without ``OIDN_GPU_``, in lower case
(``backend = "cuda"``, ``cuda_tuning = true``). Precedence: a command-line flag (such as
``--backend``, ``--weights-dir``) > the environment variable > the config file > the
built-in default. `applied_settings` gives a command the file's values as the variables
they stand for, for the command's duration (the variables' readers, Ray workers started
by it and compile processes all see them); `report` says where each value comes from
(``oidn-gpu info``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oidn_gpu.backends.base import backend_names
from oidn_gpu.cli.usage import UsageError

CONFIG_VARIABLE = "OIDN_GPU_CONFIG"
CONFIG_FILE_NAME = "config.toml"
PREFIX = "OIDN_GPU_"


@dataclass(frozen=True)
class Setting:
    """One setting: its key in the file, the TOML types it takes, what it is."""

    key: str
    types: tuple[type, ...]
    help: str
    flag: str = ""

    @property
    def variable(self) -> str:
        return PREFIX + self.key.upper()


_TEXT, _NUMBER, _SWITCH = (str,), (int,), (bool, str)
SETTINGS = (
    Setting("backend", _TEXT, "backend of --backend auto", "--backend"),
    Setting("weights", _TEXT, "folder of the user's weights files", "--weights-dir"),
    Setting("weights_url", _TEXT, "where 'weights fetch' downloads from"),
    Setting("cache_dir", _TEXT, "folder of the per-user caches (compiled kernels)"),
    Setting("cpu_isa", _TEXT, "CPU instruction set whose rounding is matched"),
    Setting("copy_threads", _NUMBER, "threads of large host copies"),
    Setting("upload", _TEXT, "wgpu upload path (mapped or queue)"),
    Setting("compile_threads", _NUMBER, "threads compiling wgpu kernels"),
    Setting("dump_shaders", _TEXT, "folder the WGSL shaders are written to"),
    Setting("shader_checks", _SWITCH, "bounds checks in wgpu shaders"),
    Setting("cuda_tuning", _SWITCH, "cuda tuning table: on, off or a file"),
    Setting("cuda_fused", _TEXT, "cuda kernel fusion: project, tail or off"),
    Setting("cuda_rows", _SWITCH, "cuda row kernel"),
    Setting("cuda_row_balance", _SWITCH, "cuda row kernel's rows balanced per GPU"),
    Setting("cuda_compile_processes", _NUMBER, "processes compiling cuda kernels"),
    Setting("cuda_driver_launch", _SWITCH, "cuda compiled kernels launched without Triton"),
)
BY_KEY = {s.key: s for s in SETTINGS}


def config_path(environ: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """The config file and whether ``OIDN_GPU_CONFIG`` named it (module doc)."""
    env = os.environ if environ is None else environ
    named = env.get(CONFIG_VARIABLE, "").strip()
    if named:
        return Path(named).expanduser(), True
    import platformdirs

    folder = platformdirs.user_config_dir("oidn-gpu", appauthor=False)
    return Path(folder) / CONFIG_FILE_NAME, False


def _toml() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    import tomli  # Python 3.10: the same parser, as a package

    return tomli


def _text(setting: Setting, value: Any) -> str:
    """The variable's text of a file value (true/false as on/off)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


_KINDS = {str: "a string", int: "a whole number", bool: "true/false"}


def _shown(value: Any) -> str:
    """A value as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _checked(path: Path, key: str, value: Any) -> str:
    setting = BY_KEY.get(key)
    if setting is None:
        raise UsageError(
            f"config file '{path}': unknown setting '{key}'; expected one of " + ", ".join(BY_KEY)
        )
    # bool is an int in Python: refuse true/false where a number is expected
    wrong = not isinstance(value, setting.types) or (
        isinstance(value, bool) and bool not in setting.types
    )
    if wrong:
        kinds = " or ".join(_KINDS[t] for t in setting.types)
        raise UsageError(
            f"config file '{path}': {key} = {_shown(value)} is not {kinds} ({setting.help})"
        )
    if key == "backend" and value not in backend_names():
        raise UsageError(
            f"config file '{path}': backend = \"{value}\" is not a backend; expected one of "
            + ", ".join(backend_names())
        )
    return _text(setting, value)


def load(environ: Mapping[str, str] | None = None) -> tuple[Path, dict[str, str]]:
    """The config file and its values (variable text by key); no values when there is no
    file and ``OIDN_GPU_CONFIG`` does not name one.

    Raises:
        UsageError: the named file is missing, or a file is unreadable, not TOML, or has
            an unknown key or a value of the wrong type.
    """
    path, named = config_path(environ)
    if not path.is_file():
        if named:
            raise UsageError(f"{CONFIG_VARIABLE} names '{path}', which is not a file")
        return path, {}
    toml = _toml()
    try:
        with path.open("rb") as file:
            document = toml.load(file)
    except OSError as err:
        raise UsageError(f"cannot read the config file '{path}': {err}") from None
    except toml.TOMLDecodeError as err:
        raise UsageError(f"config file '{path}' is not valid TOML: {err}") from None
    return path, {key: _checked(path, key, value) for key, value in document.items()}


@dataclass
class _Applied:
    path: Path | None = None
    keys: set[str] = field(default_factory=set)


_APPLIED = _Applied()


@contextlib.contextmanager
def applied_settings() -> Iterator[Path]:
    """The config file's values set as their (unset) variables for the block; the
    environment as it was afterwards."""
    path, values = load()
    added = {
        BY_KEY[key].variable: text
        for key, text in values.items()
        if not os.environ.get(BY_KEY[key].variable)
    }
    os.environ.update(added)
    before = _Applied(_APPLIED.path, set(_APPLIED.keys))
    _APPLIED.path, _APPLIED.keys = path, {k for k in values if BY_KEY[k].variable in added}
    try:
        yield path
    finally:
        for variable in added:
            os.environ.pop(variable, None)
        _APPLIED.path, _APPLIED.keys = before.path, before.keys


@dataclass(frozen=True)
class Origin:
    """Where a setting's value comes from."""

    setting: Setting
    value: str | None  # None: the built-in default
    source: str  # "variable", "config file" or "default"


def report() -> tuple[Path, list[Origin]]:
    """The config file and each setting's value and source, as a command sees them."""
    path = _APPLIED.path or config_path()[0]
    origins = []
    for setting in SETTINGS:
        value = os.environ.get(setting.variable) or None
        if value is None:
            source = "default"
        elif setting.key in _APPLIED.keys:
            source = "config file"
        else:
            source = "variable"
        origins.append(Origin(setting, value, source))
    return path, origins


def report_lines() -> list[str]:
    """``oidn-gpu info``'s lines about the settings."""
    path, origins = report()
    state = "" if path.is_file() else " (none)"
    lines = [
        f"settings (a flag > {PREFIX}* variable > config file > default); config file: "
        f"{path}{state}"
    ]
    for origin in origins:
        where = {"variable": origin.setting.variable}.get(origin.source, origin.source)
        flag = f"; {origin.setting.flag} overrides it" if origin.setting.flag else ""
        shown = origin.value if origin.value is not None else "-"
        lines.append(f"  {origin.setting.key:<23} {shown:<12} ({where}{flag})")
    return lines
