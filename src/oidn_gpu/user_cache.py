"""oidn-gpu's per-user cache folder and the locked, atomic updates of the files in it.

The folder is ``$OIDN_GPU_CACHE_DIR`` when set, else the platform's cache folder
(`platformdirs`): ``$XDG_CACHE_HOME/oidn-gpu`` (default ``~/.cache/oidn-gpu``) on Linux,
``~/Library/Caches/oidn-gpu`` on macOS, ``%LOCALAPPDATA%\\oidn-gpu`` on Windows.

Several processes (a render farm's workers on one node, two shells) may update one cache
file at once. Every update is a read-modify-write under a lock file beside the cache file
(``NAME.lock``, `filelock`): the update reads what the other processes wrote last, adds
its own entries and replaces the file atomically (`files.write_bytes_atomic`: a
temporary file in the same folder, renamed over the old one; removed on any error), so
no process loses another's entries and a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from oidn_gpu.files import write_bytes_atomic

CACHE_ENV_VAR = "OIDN_GPU_CACHE_DIR"  # the folder of oidn-gpu's per-user caches
APP_NAME = "oidn-gpu"
# How long an update waits for another process's lock before giving up (a cache that is
# not written only costs recomputing next time; a lock held this long is a stuck process).
LOCK_TIMEOUT_S = 60.0


def cache_root() -> Path:
    """oidn-gpu's per-user cache folder: ``$OIDN_GPU_CACHE_DIR``, else the platform's
    (see the module doc)."""
    named = os.environ.get(CACHE_ENV_VAR)
    if named:
        return Path(named).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False, opinion=False))


def lock_path(path: Path) -> Path:
    """The lock file that guards updates of the cache file ``path``."""
    return path.with_name(path.name + ".lock")


@contextlib.contextmanager
def locked(path: str | os.PathLike[str], timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[Path]:
    """Hold the lock of the cache file ``path`` (its folder is created); yields ``path``.

    Raises:
        OSError: the folder cannot be created; `TimeoutError` when the lock was not
            acquired within ``timeout_s``.
    """
    import filelock

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(lock_path(path)), timeout=timeout_s)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise TimeoutError(
            f"cache file '{path}' is locked by another process for more than {timeout_s:g} s; "
            f"remove '{lock_path(path)}' if no oidn-gpu process is running"
        ) from None
    try:
        yield path
    finally:
        lock.release()


def update_bytes(
    path: str | os.PathLike[str],
    update: Callable[[bytes | None], bytes | None],
    timeout_s: float = LOCK_TIMEOUT_S,
) -> bool:
    """Replace the cache file ``path`` by ``update(its bytes or None)`` under its lock.

    ``update`` returning None leaves the file as it is. Returns whether it was written.

    Raises:
        OSError: the folder or file cannot be written, or the lock timed out.
    """
    with locked(path, timeout_s) as target:
        try:
            old: bytes | None = target.read_bytes()
        except FileNotFoundError:
            old = None
        new = update(old)
        if new is None:
            return False
        write_bytes_atomic(target, new)
        return True


def update_json(
    path: str | os.PathLike[str],
    update: Callable[[dict[str, Any]], dict[str, Any]],
    timeout_s: float = LOCK_TIMEOUT_S,
) -> bool:
    """`update_bytes` for a JSON object: ``update`` gets the file's object (``{}`` when the
    file is missing or not a readable JSON object) and returns the object to write."""

    def _update(old: bytes | None) -> bytes:
        data: dict[str, Any] = {}
        if old:
            with contextlib.suppress(ValueError):
                loaded = json.loads(old.decode("utf-8"))
                data = loaded if isinstance(loaded, dict) else {}
        return (json.dumps(update(data), indent=1, sort_keys=True) + "\n").encode("utf-8")

    return update_bytes(path, _update, timeout_s)
