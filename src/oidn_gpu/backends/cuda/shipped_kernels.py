"""The Triton kernels shipped with the package, and their way into Triton's disk cache.

`oidn-gpu prepare --export` writes a GPU's kernel lists and Triton's cache entries of
their kernels into ``shipped/triton-VERSION/smNN/`` (`export`: the spec files,
``cache.tar.gz`` with each entry's compiled code, metadata and group file and, for the
CPython version they were made with, the launchers; ``sources``, the fingerprint of the
kernel modules they were compiled from). `install_shipped` copies the entries a user's
Triton cache lacks into it, so a fresh process loads those kernels without a compiler;
`install_shipped_soon` starts that on a thread before the executor builds the network, so
the copy runs beside the build and a first frame mostly finds the entries there (it waits
for the thread where it loads them; docs/benchmarks.md has the timings). Where the kernels
are launched through the CUDA driver (`driver_launch`, the default) nothing is copied:
`entry_files` reads an entry's compiled code and metadata from the archive, read into
memory once (`shipped_entries`, on a thread beside the build: `read_shipped_soon`), or
from Triton's cache.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import logging
import os
import shutil
import tarfile
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from oidn_gpu.backends.cuda.kernel_specs import (
    GROUP_PREFIX,
    SHIPPED,
    source_fingerprint,
    triton_cache_dir,
    triton_version,
)
from oidn_gpu.files import write_bytes_atomic
from oidn_gpu.user_cache import cache_root, locked

_LOG = logging.getLogger(__name__)

_INSTALLED: set[tuple[str, int, Path]] = set()  # (version, capability, cache)
_INSTALL_LOCK = threading.Lock()


# The shipped cache entries: a gzip-compressed tar (gzip, not xz: a fresh process unpacks
# it on its first frame, and xz's decoding of its 1.6 MB took about 40 ms on an H100 host
# against a few for gzip).
ARCHIVE_NAME = "cache.tar.gz"


def shipped_archive(version: str, capability: int, shipped: Path = SHIPPED) -> Path:
    return shipped / f"triton-{version}" / f"sm{capability}" / ARCHIVE_NAME


def install_shipped(
    version: str, capability: int, *, cache_dir: Path | None = None, shipped: Path = SHIPPED
) -> int:
    """Copy the shipped Triton cache entries of ``version`` and ``capability`` that
    Triton's cache (``cache_dir``, default `kernel_specs.triton_cache_dir`) lacks into it
    (once per process and cache; a second caller waits for the first); returns how many
    were copied.

    Each entry is a folder named by Triton's cache key: it is unpacked beside the
    cache and renamed into place, so a reader never sees half an entry. A stamp file
    in the cache names the entries of an archive once they are all there: a later
    process whose entries are all present reads neither the archive nor the cache's
    listing.
    """
    target = cache_dir if cache_dir is not None else triton_cache_dir()
    with _INSTALL_LOCK:
        if (version, capability, target) in _INSTALLED:
            return 0
        _INSTALLED.add((version, capability, target))
        archive = shipped_archive(version, capability, shipped)
        if not archive.is_file():
            return 0
        try:
            stamp = target / f"{STAMP_PREFIX}{_archive_digest(archive)}"
            with contextlib.suppress(OSError, ValueError):
                names = json.loads(stamp.read_text("utf-8"))
                if names and all((target / _safe_name(n)).is_dir() for n in names):
                    return 0
            with locked(target / INSTALL_LOCK):  # one installer per cache at a time
                copied, names = _unpack_missing(archive, target)
                write_bytes_atomic(stamp, json.dumps(sorted(names)).encode("utf-8"))
        except (OSError, tarfile.TarError) as err:
            _LOG.info("cuda: shipped kernels not installed into %s (%s)", target, err)
            return 0
        return copied


def install_shipped_soon(capability: int, *, shipped: Path = SHIPPED) -> threading.Thread | None:
    """Start `install_shipped` of the installed Triton and ``capability`` on a thread (a
    daemon: an entry is renamed into the cache whole, so one cut short leaves nothing
    half-written); a caller of `install_shipped` waits for it. None (nothing started) when
    Triton is not installed, nothing is shipped for it and ``capability``, or this process
    installed them already."""
    version = triton_version()
    if version is None or not shipped_archive(version, capability, shipped).is_file():
        return None
    target = triton_cache_dir()
    with _INSTALL_LOCK:
        if (version, capability, target) in _INSTALLED:
            return None
    thread = threading.Thread(
        target=_install_logged,
        args=(version, capability, target, shipped),
        name="oidn-gpu-shipped-kernels",
        daemon=True,
    )
    thread.start()
    return thread


def read_shipped_soon(capability: int, *, shipped: Path = SHIPPED) -> threading.Thread | None:
    """Start reading the shipped archive of the installed Triton and ``capability`` into
    memory (`shipped_entries`) on a thread, beside the network's build; None where there is
    none. A reader of `shipped_entries` waits for it."""
    version = triton_version()
    if version is None:
        return None
    archive = shipped_archive(version, capability, shipped)
    if not archive.is_file() or archive in _ENTRIES:
        return None
    thread = threading.Thread(
        target=_read_logged, args=(archive,), name="oidn-gpu-shipped-kernels", daemon=True
    )
    thread.start()
    return thread


def _read_logged(archive: Path) -> None:
    shipped_entries(archive)  # what fails is logged there


def _install_logged(version: str, capability: int, target: Path, shipped: Path) -> None:
    """`install_shipped` on `install_shipped_soon`'s thread: what fails is logged (the
    frame that needs the kernels then compiles them), never raised on a thread."""
    try:
        install_shipped(version, capability, cache_dir=target, shipped=shipped)
    except Exception as err:  # a damaged archive (zlib.error, ValueError, ...)
        _LOG.info(
            "cuda: shipped kernels not installed into %s (%s: %s)", target, type(err).__name__, err
        )


STAMP_PREFIX = ".oidn-gpu-shipped-"  # + the archive's digest: the entries it installed
INSTALL_LOCK = ".oidn-gpu-install"  # (+ ".lock") held while shipped entries are unpacked


def _archive_digest(archive: Path) -> str:
    return hashlib.sha256(archive.read_bytes()).hexdigest()[:24]


def _safe_name(name: Any) -> str:
    """An entry name of a stamp file, refused unless it is one plain folder name."""
    if not isinstance(name, str) or _entry(f"{name}/x") != name:
        raise ValueError(f"not a cache entry name: {name!r}")
    return name


def _unpack_missing(archive: Path, target: Path) -> tuple[int, set[str]]:
    """Unpack the entries of ``archive`` that ``target`` lacks; ``(how many were copied,
    the archive's entry names)``. The archive is read into memory at once (about 1.5 MB,
    `_read_entries`) and each entry's regular files are written as they are, with their
    group files pointed (`_write_entry`): about 10 ms less than `tarfile`'s extraction and
    a second pass over the group files (docs/benchmarks.md)."""
    copied = 0
    target.mkdir(parents=True, exist_ok=True)
    by_entry = _read_entries(archive)
    missing = sorted(e for e in by_entry if not (target / e).exists())
    if not missing:
        return 0, set(by_entry)
    with tempfile.TemporaryDirectory(prefix=".oidn-gpu-", dir=target) as tmp:
        for entry in missing:
            _write_entry(Path(tmp) / entry, target / entry, by_entry[entry])
            with contextlib.suppress(OSError):  # another process was first
                os.rename(Path(tmp) / entry, target / entry)
                copied += 1
    return copied, set(by_entry)


_ENTRIES: dict[Path, dict[str, dict[str, bytes]]] = {}  # archive -> entry -> file -> bytes
_ENTRIES_LOCK = threading.Lock()
LOADED_SUFFIXES = (".cubin", ".json")  # what a kernel's load reads of its entry


def shipped_entries(archive: Path) -> dict[str, dict[str, bytes]]:
    """The compiled code and metadata files of each entry of a shipped archive, by entry
    and file name (read once per process; empty when there is no archive)."""
    with _ENTRIES_LOCK:
        known = _ENTRIES.get(archive)
        if known is not None:
            return known
        found: dict[str, dict[str, bytes]] = {}
        try:
            if archive.is_file():
                found = _read_entries(archive, LOADED_SUFFIXES)
        except (OSError, EOFError, tarfile.TarError, zlib.error) as err:
            _LOG.info("cuda: shipped kernels not read from %s (%s)", archive, err)
        _ENTRIES[archive] = found
        return found


def _read_entries(
    archive: Path, suffixes: tuple[str, ...] | None = None
) -> dict[str, dict[str, bytes]]:
    """The regular files of each entry of ``archive`` (one folder deep, nothing else), by
    entry and file name; only those ending in ``suffixes`` where given."""
    found: dict[str, dict[str, bytes]] = {}
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(archive.read_bytes()))) as tar:
        for member in tar.getmembers():
            entry = _entry(member.name) if member.isfile() else None
            name = Path(member.name).name
            if entry is None or name in (".", ".."):
                continue
            if suffixes is not None and not name.endswith(suffixes):
                continue
            reader = tar.extractfile(member)  # a plain file's: never None
            if reader is not None:
                found.setdefault(entry, {})[name] = reader.read()
    return found


def entry_files(
    version: str, capability: int, *, cache_dir: Path | None = None, shipped: Path = SHIPPED
) -> Callable[[str], dict[str, bytes] | None]:
    """``files(entry)``: the compiled code and metadata of a compiled kernel's cache entry
    (by file name), from the shipped archive of ``version`` and ``capability``, else from
    Triton's cache (``cache_dir``, default `kernel_specs.triton_cache_dir`); None where
    neither has it. Nothing is copied into Triton's cache."""
    archive = shipped_archive(version, capability, shipped)

    def files(entry: str) -> dict[str, bytes] | None:
        if _entry(f"{entry}/x") != entry:
            return None
        found = shipped_entries(archive).get(entry)
        if found is not None:
            return found
        folder = (cache_dir if cache_dir is not None else triton_cache_dir()) / entry
        try:
            return {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix in LOADED_SUFFIXES}
        except OSError:
            return None

    return files


def _write_entry(folder: Path, final: Path, files: dict[str, bytes]) -> None:
    """Write one cache entry's ``files`` (by name) into ``folder``, its group files pointed
    at the files' paths in ``final``, where it is renamed to (Triton reads a kernel's
    files through the absolute paths of its group file)."""
    folder.mkdir()
    for name, data in files.items():
        if name.startswith(GROUP_PREFIX):
            children = json.loads(data).get("child_paths") or {}
            pointed = {c: str(final / Path(p).name) for c, p in children.items()}
            data = _group({c: p for c, p in pointed.items() if Path(p).name in files})
        (folder / name).write_bytes(data)


def _entry(name: str) -> str | None:
    """The cache entry (first path part) of an archive member, if it is a safe name."""
    parts = Path(name).parts
    if len(parts) != 2 or parts[0] in ("", ".", "..") or parts[0].startswith("/"):
        return None
    return parts[0]


# What a shipped cache entry keeps: the compiled code, its metadata and group file, and
# compiled launchers; the intermediate forms (Triton IR, LLVM IR, PTX, source) are only
# read by a compile.
SHIPPED_SUFFIXES = (".cubin", ".json", ".so")


def pack_cache_entries(cache_dir: Path, names: Iterable[str], archive: Path) -> int:
    """Write the entries ``names`` of a Triton cache into ``archive`` (tar.gz) as they
    ship (`SHIPPED_SUFFIXES`; each group file names its entry's files by name alone);
    returns how many were packed (`oidn-gpu prepare --export`)."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with (
        tempfile.NamedTemporaryFile(dir=archive.parent, delete=False, suffix=".tmp") as tmp,
        tarfile.open(fileobj=tmp, mode="w:gz", compresslevel=9) as tar,
    ):
        for name in sorted(set(names)):
            folder = cache_dir / name
            if not folder.is_dir():
                continue
            kept = sorted(p for p in folder.iterdir() if p.suffix in SHIPPED_SUFFIXES)
            for path in kept:
                data = path.read_bytes()
                if path.name.startswith(GROUP_PREFIX):
                    data = _group({p.name: p.name for p in kept if p != path})
                info = tarfile.TarInfo(f"{name}/{path.name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            count += 1
    os.chmod(tmp.name, 0o644)  # a package file, readable by everyone
    os.replace(tmp.name, archive)
    return count


def _group(children: dict[str, str]) -> bytes:
    return json.dumps({"child_paths": children}).encode("utf-8")


def export(
    version: str,
    capability: int,
    destination: Path,
    *,
    root: Path | None = None,
    cache_dir: Path | None = None,
) -> list[str]:
    """Write this user's kernel lists of ``version`` and ``capability`` and every entry of
    Triton's cache into ``destination`` as `install_shipped` reads them; one line each."""
    folder = destination / f"triton-{version}" / f"sm{capability}"
    folder.mkdir(parents=True, exist_ok=True)
    source = (root or cache_root()) / "cuda-kernels" / f"triton-{version}" / f"sm{capability}"
    lists = sorted(source.glob("*.jsonl")) if source.is_dir() else []
    for path in lists:
        shutil.copyfile(path, folder / path.name)
    cache = cache_dir if cache_dir is not None else triton_cache_dir()
    entries = [p.name for p in cache.iterdir() if p.is_dir()] if cache.is_dir() else []
    packed = pack_cache_entries(cache, entries, folder / ARCHIVE_NAME)
    (folder / SOURCES_FILE).write_text(source_fingerprint() + "\n", "utf-8")
    return [f"wrote {len(lists)} kernel lists and {packed} Triton cache entries to {folder}"]


# The fingerprint of the kernel sources a shipped folder was compiled from: Triton's cache
# keys and the kernel lists' digests both change with any edit of a kernel module (its
# comments and docstrings included), so kernels compiled before an edit are never found.
SOURCES_FILE = "sources"


def shipped_folders(shipped: Path = SHIPPED) -> list[Path]:
    """Every shipped ``triton-VERSION/smNN`` folder."""
    return sorted(p for p in shipped.glob("triton-*/sm*") if p.is_dir())
