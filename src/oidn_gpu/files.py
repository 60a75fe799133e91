"""Atomic file writes, their temporary files, and the output-is-input check.

Every file oidn-gpu writes (denoised images, previews, downloaded weights,
recorded programs) goes through `atomic_write`:

* a temporary file is created with `tempfile.mkstemp` in the destination's folder
  (``O_CREAT | O_EXCL``, mode 0600, so a planted file or symbolic link is never
  followed), named ``.oidn-gpu-tmp-PID-RANDOM-NAME`` (the destination's name last,
  so its extension is kept for writers that choose the format by extension);
* the data is written and flushed to disk (``fsync``), the file gets the mode of
  the file it replaces (or the one a new file would get, from the umask), and
  `os.replace` renames it over the destination;
* on any exception, KeyboardInterrupt included, the temporary file is removed and
  the destination is untouched.

Live temporary files are kept in a registry; `install_signal_cleanup` (called by
the command-line tool) makes SIGTERM remove them and then stop the run like
Ctrl-C does. A process killed outright (SIGKILL, power loss) cannot clean up:
the next write into the same folder removes temporary files whose process is
gone and that are older than the current run (`remove_stale_temporaries`).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from oidn_gpu.errors import OIDNGPUError

TEMP_PREFIX = ".oidn-gpu-tmp-"
_TEMP_NAME = re.compile(re.escape(TEMP_PREFIX) + r"(\d+)-")
_RUN_STARTED_S = time.time()  # temporary files older than this belong to earlier runs

_live: set[Path] = set()
_live_lock = threading.Lock()
_cleaned_folders: set[Path] = set()
_BLOCKED = {signal.SIGINT, signal.SIGTERM} if hasattr(signal, "SIGTERM") else {signal.SIGINT}


class OutputFileError(OIDNGPUError, OSError):
    """An output file cannot be written (missing or unwritable folder, a file in the way)."""


class OutputRefusedError(OutputFileError):
    """An output would replace an input, or exists and replacing it was not asked for."""


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when SIGTERM arrives after `install_signal_cleanup`."""


def _new_file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_NEW_FILE_MODE = _new_file_mode()


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while the registry and the file system disagree (main thread)."""
    can_block = hasattr(signal, "pthread_sigmask") and (
        threading.current_thread() is threading.main_thread()
    )
    if not can_block:
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):  # best effort; the caller's error is what matters
        path.unlink()


def live_temporaries() -> list[Path]:
    """The temporary files this process is writing now."""
    with _live_lock:
        return sorted(_live)


def remove_live_temporaries() -> None:
    """Remove every temporary file this process is writing (the SIGTERM handler's job)."""
    with _live_lock:
        paths = list(_live)
        _live.clear()
    for path in paths:
        _unlink_quietly(path)


def _process_alive(pid: int) -> bool:
    if pid == os.getpid() or os.name == "nt":  # Windows' os.kill cannot probe: assume alive
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temporaries(folder: str | os.PathLike[str]) -> list[Path]:
    """Remove temporary files left in ``folder`` by runs that were killed.

    A file counts as stale when its name has our prefix, it is older than this run
    and the process whose id is in its name no longer exists. Files of live
    processes (another run writing into the same folder) are left alone.

    Returns:
        The files removed.
    """
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = _TEMP_NAME.match(entry.name)
        if match is None:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_mtime >= _RUN_STARTED_S or _process_alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed


def remove_temporaries_of(
    destinations: Iterable[str | os.PathLike[str]], since: float
) -> list[Path]:
    """Remove the temporary files of writes into ``destinations`` that began at ``since``
    (a `time.time` value) or later, whichever process made them: what writers stopped
    outright left (a farm's workers, killed when its driver is interrupted; call it once
    they are gone). Files of other destinations, and older ones, are left alone.

    Returns:
        The files removed.
    """
    by_folder: dict[Path, set[str]] = {}
    for destination in destinations:
        path = Path(destination)
        by_folder.setdefault(path.parent, set()).add(_temp_suffix(path))
    removed = []
    for folder, suffixes in by_folder.items():
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            match = _TEMP_NAME.match(entry.name)
            # ``.oidn-gpu-tmp-PID-RANDOM-NAME``: mkstemp's RANDOM has no "-"
            tail = entry.name[match.end() :] if match is not None else ""
            if "-" not in tail or tail[tail.index("-") :] not in suffixes:
                continue
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_mtime >= since:
                    os.unlink(entry.path)
                    removed.append(Path(entry.path))
    return removed


def _describe_folder_problem(folder: Path) -> str | None:
    """Why files cannot be created in ``folder`` (None when they can, as far as we can tell)."""
    probe = folder
    while not probe.exists() and not probe.is_symlink():
        if probe.parent == probe:
            return f"folder '{folder}' does not exist"
        probe = probe.parent
    if not probe.is_dir():
        what = "a dangling link" if probe.is_symlink() and not probe.exists() else "a file"
        return f"'{probe}' is {what}, not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"folder '{probe}' is not writable"
    return None


def check_output_folder(
    destination: str | os.PathLike[str], *, create_folders: bool = True
) -> None:
    """Check, before any work, that ``destination`` can be created.

    With ``create_folders`` the folder need not exist yet (it is created on the first
    write) and the nearest existing folder above it must be a writable folder;
    without, the folder itself must exist. An existing folder is probed by creating
    and removing a temporary file in it.

    Raises:
        OutputFileError: naming the destination and what is wrong.
    """
    destination = Path(destination)
    folder = destination.parent
    problem = _describe_folder_problem(folder)
    if problem is None and not create_folders and not folder.exists():
        problem = f"folder '{folder}' does not exist; create it or pass --mkdir"
    if problem is None and folder.is_dir():
        with _signals_blocked():  # the probe is never left behind
            try:
                fd, name = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=folder)
            except OSError as err:
                reason = (err.strerror or str(err)).lower()
                problem = f"folder '{folder}' is not writable ({reason})"
            else:
                os.close(fd)
                _unlink_quietly(Path(name))
    if problem is not None:
        raise OutputFileError(f"cannot write '{destination}': {problem}")


def _make_folder(destination: Path) -> None:
    folder = destination.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        problem = _describe_folder_problem(folder) or (err.strerror or str(err)).lower()
        raise OutputFileError(f"cannot write '{destination}': {problem}") from None


@dataclass
class TemporaryFile:
    """The temporary file of one `atomic_write`: write to ``file``, or by name to ``path``
    (close ``file`` first; the writer must open the existing file, not replace it)."""

    path: Path
    file: BinaryIO


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError, AttributeError):  # not every platform syncs folders
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _replacement_mode(destination: Path) -> int:
    """The mode of the file being replaced, else the mode a new file gets (umask)."""
    try:
        info = destination.lstat()
    except OSError:
        return _NEW_FILE_MODE
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else _NEW_FILE_MODE


def _temp_suffix(destination: Path) -> str:
    """``-NAME``: the destination's name, or where it is not UTF-8 (libraries that take
    names as text cannot open it) ``-output`` with its extension when that is UTF-8."""
    for name in (destination.name, f"output{destination.suffix}"):
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            continue
        return f"-{name}"
    return "-output"


@contextlib.contextmanager
def atomic_write(destination: str | os.PathLike[str]) -> Iterator[TemporaryFile]:
    """Write ``destination`` through a temporary file that replaces it when complete.

    Usage::

        with atomic_write(path) as tmp:
            tmp.file.write(data)

    The destination's folder is created if missing; stale temporary files of
    earlier runs in it are removed. If the block raises, the temporary file is
    removed and ``destination`` keeps its old content (or stays absent).

    Raises:
        OutputFileError: the folder cannot be created or written.
    """
    destination = Path(destination)
    _make_folder(destination)
    folder = destination.parent
    key = folder.resolve()
    if key not in _cleaned_folders:
        remove_stale_temporaries(folder)
        _cleaned_folders.add(key)
    with _signals_blocked():
        try:
            fd, name = tempfile.mkstemp(
                prefix=f"{TEMP_PREFIX}{os.getpid()}-", suffix=_temp_suffix(destination), dir=folder
            )
        except OSError as err:
            problem = _describe_folder_problem(folder) or (err.strerror or str(err)).lower()
            raise OutputFileError(f"cannot write '{destination}': {problem}") from None
        tmp = Path(name)
        with _live_lock:
            _live.add(tmp)
    try:
        with os.fdopen(fd, "wb") as file:
            yield TemporaryFile(tmp, file)
        _sync(tmp)
        os.chmod(tmp, _replacement_mode(destination))
        with _signals_blocked():
            os.replace(tmp, destination)
            with _live_lock:
                _live.discard(tmp)
        _sync_folder(folder)
    except BaseException:
        with _live_lock:
            _live.discard(tmp)
        _unlink_quietly(tmp)
        raise


def write_bytes_atomic(destination: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``destination`` with `atomic_write`; returns the path."""
    with atomic_write(destination) as tmp:
        tmp.file.write(data)
    return Path(destination)


@contextlib.contextmanager
def install_signal_cleanup() -> Iterator[None]:
    """While active (main thread only), SIGTERM removes the live temporary files at once
    and raises `Terminated` (a KeyboardInterrupt), so the run stops as after Ctrl-C."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        remove_live_temporaries()
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# --- outputs that are inputs -----------------------------------------------------------------


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file: the same inode (hard links, symbolic links)
    when both exist, else the same resolved path."""
    ida, idb = _identity(Path(a)), _identity(Path(b))
    if ida is not None and idb is not None:
        return ida == idb
    return os.path.realpath(a) == os.path.realpath(b)


def find_input_overwritten(
    outputs: Iterable[str | os.PathLike[str]], inputs: Iterable[str | os.PathLike[str]]
) -> tuple[Path, Path] | None:
    """The first (output, input) pair where writing the output would replace the input."""
    known: dict[tuple[int, int] | str, Path] = {}
    for item in inputs:
        path = Path(item)
        identity = _identity(path)
        known[identity if identity is not None else os.path.realpath(path)] = path
        known.setdefault(os.path.realpath(path), path)
    for item in outputs:
        path = Path(item)
        identity = _identity(path)
        for key in (identity, os.path.realpath(path)):
            if key is not None and key in known:
                return path, known[key]
    return None


def check_outputs(
    outputs: Iterable[str | os.PathLike[str]],
    inputs: Iterable[str | os.PathLike[str]],
    *,
    overwrite: bool | None = None,
    create_folders: bool = True,
) -> None:
    """Check outputs before any work: none replaces an input (the same file, or a hard
    or symbolic link to it; refused even when overwriting), every folder can be
    written (and exists, unless ``create_folders``), and, when ``overwrite`` is False,
    none exists yet.

    Raises:
        OutputRefusedError: an output is an input, or exists without ``overwrite``.
        OutputFileError: an output's folder cannot be written.
    """
    outputs = [Path(p) for p in outputs]
    clash = find_input_overwritten(outputs, inputs)
    if clash is not None:
        output, source = clash
        what = (
            "is also an input"
            if str(output) == str(source)
            else f"is the same file as the input '{source}'"
        )
        raise OutputRefusedError(
            f"output '{output}' {what}; inputs are never replaced, even with --overwrite: "
            "choose another output"
        )
    checked: set[Path] = set()
    for target in outputs:
        if target.parent not in checked:
            checked.add(target.parent)
            check_output_folder(target, create_folders=create_folders)
        if overwrite is False and (target.exists() or target.is_symlink()):
            raise OutputRefusedError(f"output '{target}' exists; pass --overwrite to replace it")
