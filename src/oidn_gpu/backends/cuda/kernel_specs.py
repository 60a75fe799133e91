"""The Triton kernels of a frame, known ahead: recorded specializations compiled in parallel.

Triton compiles a kernel the first time a process launches it with a new
specialization (argument types and alignments, constexpr values, warps, stages).
A frame of the cuda backend launches a few dozen such kernels, and compiling
them one after another takes 15 to 20 s. Triton describes each specialization
as a JSON text (its ``specialization_data``); this module keeps those texts per
*kernel configuration* of a frame (the GPU's architecture, the network's shapes,
precision and tiles, the images' dtypes and channels, the transfer function:
never the image size) in a spec file, one text per line:

- `recording` collects the texts of the kernels a thread compiles or loads (through
  Triton's ``jit_post_compile_hook``), and `save` adds them to the spec file of
  their configuration in the per-user cache (`user_cache.cache_root`,
  ``cuda-kernels/triton-VERSION/smNN/DIGEST.jsonl``; updated under a file lock), which
  every process of the user shares;
- `compile_parallel` compiles a spec file's kernels into Triton's disk cache in
  child processes (`compile_shard`: no torch, no GPU), each a share of the list,
  so a frame's kernels compile in the time of the slowest share;
- specs and Triton cache entries recorded on a GPU may ship with the package
  (``shipped/triton-VERSION/smNN/``: the spec files and ``cache.tar.gz``, Triton's
  cache entries of their kernels, the architecture's compiled code and, for the
  CPython version they were made with, the launchers); `shipped_kernels` copies the
  entries into Triton's cache, so those kernels load without a compiler.

The texts are Triton's own format of the Triton version that wrote them; a
spec file is only read by that version (its folder is named after it).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oidn_gpu.user_cache import cache_root, update_bytes

_LOG = logging.getLogger(__name__)

PROCESSES_ENV_VAR = "OIDN_GPU_CUDA_COMPILE_PROCESSES"  # compile processes (default: cores - 1)
SHIPPED = Path(__file__).resolve().parent / "shipped"
PACKAGE = "oidn_gpu."  # only this package's kernels are recorded
MAX_PROCESSES = 16


@functools.cache
def triton_version() -> str | None:
    """The installed Triton's version, read without importing it (None: not installed)."""
    if importlib.util.find_spec("triton") is None:
        return None
    from importlib import metadata

    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class SpecKey:
    """Where one kernel configuration's spec file lives.

    Attributes:
        triton: Triton's version (the texts are that version's format).
        capability: the GPU's compute capability as Triton writes it (90 for 9.0).
        digest: the configuration's digest (`config_digest`).
    """

    triton: str
    capability: int
    digest: str

    @property
    def folder(self) -> str:
        return f"triton-{self.triton}/sm{self.capability}"

    def user_path(self, root: Path | None = None) -> Path:
        return (root or cache_root()) / "cuda-kernels" / self.folder / f"{self.digest}.jsonl"

    def shipped_path(self, shipped: Path = SHIPPED) -> Path:
        return shipped / self.folder / f"{self.digest}.jsonl"


def config_digest(parts: Iterable[Any]) -> str:
    """A digest of a kernel configuration, the same in every process: ``repr`` of each
    part (dataclasses, enums, tuples, torch dtypes: their reprs do not depend on the
    process)."""
    text = "\n".join(repr(p) for p in parts)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


# The modules of a frame's kernels (the temporal kernels compile on first use, never shipped).
KERNEL_MODULES = ("triton_kernels.py", "io_kernels.py", "row_kernels.py", "fused_kernels.py")


@functools.cache
def source_fingerprint() -> str:
    """A digest of this package's Triton kernel sources: a kernel list recorded before
    they changed names kernels that no longer exist."""
    digest = hashlib.sha256()
    for name in KERNEL_MODULES:
        with contextlib.suppress(OSError):
            digest.update((Path(__file__).resolve().parent / name).read_bytes())
    return digest.hexdigest()[:16]


def load(key: SpecKey, *, root: Path | None = None, shipped: Path = SHIPPED) -> list[str]:
    """The specialization texts known for ``key``: the shipped ones, then this user's."""
    texts: list[str] = []
    for path in (key.shipped_path(shipped), key.user_path(root)):
        with contextlib.suppress(OSError):
            texts += [line for line in path.read_text("utf-8").splitlines() if _valid(line)]
    return _unique(texts)


def _valid(line: str) -> bool:
    """Whether a kernel-list line holds a record (others are skipped, never trusted)."""
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and isinstance(record.get("spec"), str)


def load_related(key: SpecKey, *, root: Path | None = None, shipped: Path = SHIPPED) -> list[str]:
    """Every specialization text known for ``key``'s Triton version and GPU architecture,
    of any configuration: a configuration never seen shares most of its kernels (the
    network's convolutions) with the others."""
    texts: list[str] = []
    for folder in (shipped / key.folder, key.user_path(root).parent):
        for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            with contextlib.suppress(OSError):
                texts += [t for t in path.read_text("utf-8").splitlines() if _valid(t)]
    return _unique(texts)


def _lines(data: bytes | None) -> list[str]:
    return [t for t in (data or b"").decode("utf-8", "replace").splitlines() if _valid(t)]


def save(
    key: SpecKey, texts: Iterable[str], *, root: Path | None = None, shipped: Path = SHIPPED
) -> Path | None:
    """Add ``texts`` to this user's spec file of ``key`` under the file's lock (the file is
    read again there and written whole, atomically: two processes saving at once keep
    each other's texts). None when nothing is new or the cache folder cannot be written
    (the next process records them again)."""
    path = key.user_path(root)
    texts = list(texts)
    try:
        shipped_texts = _lines(key.shipped_path(shipped).read_bytes())
    except OSError:
        shipped_texts = []

    def merge(old: bytes | None) -> bytes | None:
        known = _unique([*shipped_texts, *_lines(old)])
        merged = _unique([*known, *texts])
        if len(merged) == len(known):
            return None
        return ("\n".join(merged) + "\n").encode("utf-8")

    try:
        return path if update_bytes(path, merge) else None
    except OSError as err:
        _LOG.info("cuda: kernel specs not saved to %s (%s)", path, err)
        return None


def _unique(texts: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(texts))


# ---------------------------------------------------------------------- recording

_RECORDING = threading.local()
_HOOK_LOCK = threading.Lock()
_HOOK_STATE: dict[str, Any] = {"installed": False, "previous": None}


def _hook(*args: Any, **kwargs: Any) -> Any:
    texts = getattr(_RECORDING, "texts", None)
    if texts is not None:
        record = _record_of(kwargs)
        if record is not None:
            texts.append(record)
    previous = _HOOK_STATE["previous"]
    return previous(*args, **kwargs) if previous is not None else None


def _record_of(kwargs: dict[str, Any]) -> str | None:
    """One line of a kernel list: Triton's specialization text of a kernel of this package
    and the name of its entry in Triton's disk cache (``{"entry": ..., "spec": ...}``)."""
    details = kwargs.get("compile") or {}
    text = details.get("specialization_data", kwargs.get("specialization_data"))
    if not isinstance(text, str) or not _is_ours(text):
        return None
    entry = None
    with contextlib.suppress(Exception):  # the compiled kernel, as Triton's launch keeps it
        caches = kwargs["fn"].jit_function.device_caches[details["device"]]
        entry = cache_entry_name(caches[0][kwargs["key"]].hash)
    return json.dumps({"entry": entry, "spec": text}, sort_keys=True)


def cache_entry_name(key_hash: str) -> str:
    """The folder of Triton's disk cache that holds a kernel of this hex hash: the hash's
    bytes in base 32 without padding (triton/runtime/cache.py, Triton 3.x)."""
    return base64.b32encode(bytes.fromhex(key_hash)).decode("ascii").rstrip("=")


def spec_texts(records: Iterable[str]) -> list[str]:
    """The specialization texts of kernel-list lines."""
    return _unique(json.loads(r)["spec"] for r in records)


def entries(records: Iterable[str]) -> list[str | None]:
    """The Triton cache entries of kernel-list lines (None: not recorded)."""
    return [json.loads(r).get("entry") for r in records]


def _is_ours(text: str) -> bool:
    try:
        return str(json.loads(text).get("name", "")).startswith(PACKAGE)
    except ValueError:
        return False


@contextlib.contextmanager
def recording() -> Iterator[list[str]]:
    """Collect the specialization texts of this package's kernels that the calling
    thread compiles or loads into this process (other threads are not recorded)."""
    import triton

    runtime = triton.knobs.runtime
    with _HOOK_LOCK:
        if not _HOOK_STATE["installed"] or runtime.jit_post_compile_hook is not _hook:
            _HOOK_STATE["previous"] = runtime.jit_post_compile_hook
            runtime.jit_post_compile_hook = _hook
            _HOOK_STATE["installed"] = True
    texts: list[str] = []
    outer = getattr(_RECORDING, "texts", None)
    _RECORDING.texts = texts
    try:
        yield texts
    finally:
        _RECORDING.texts = outer
        if outer is not None:
            outer.extend(texts)


def note_launched(record: str) -> None:
    """Record a kernel-list line where the calling thread records (`recording`): a kernel
    launched through the CUDA driver (`driver_launch`), which Triton's hook never sees."""
    texts = getattr(_RECORDING, "texts", None)
    if texts is not None:
        texts.append(record)


def in_cache(records: list[str], cache_dir: Path | None = None) -> bool:
    """Whether every kernel of ``records`` is in Triton's disk cache (their entries were
    recorded and are there), so that loading them compiles nothing."""
    names = entries(records)
    if not names or None in names:
        return False
    cache = cache_dir if cache_dir is not None else triton_cache_dir()
    return all((cache / str(name)).is_dir() for name in names)


def load_into_process(records: list[str], cache_dir: Path | None = None) -> int:
    """Load the kernels of ``records`` from Triton's disk cache into this process's kernel
    caches, so that their first launch compiles and reads nothing; returns how many.

    Each is read from the cache entry its record names, as Triton reads a cache hit
    (`triton.compiler.CompiledKernel` over the entry's files), without Triton's cache key,
    whose first computation hashes Triton's whole installation (0.4 s on an H100 machine,
    2026-12-05); a record without an entry, or an entry that cannot be read so, goes
    through Triton's own ``JITFunction.preload``, which computes the key.
    """
    cache = cache_dir if cache_dir is not None else triton_cache_dir()
    loaded = 0
    for record in _unique(records):
        data = json.loads(record)
        function, *_ = parse_spec(data["spec"])
        entry = data.get("entry")
        if not (entry and _load_entry(function, data["spec"], cache / str(entry))):
            function.preload(data["spec"])
        loaded += 1
    return loaded


def _load_entry(function: Any, text: str, folder: Path) -> bool:
    """Put the kernel of one specialization, read from its cache entry ``folder``, into
    ``function``'s kernel cache of the current device; False when the entry is incomplete."""
    from triton.runtime.driver import driver

    _, signature, constexprs, attrs, _ = parse_spec(text)
    key = json.loads(text)["key"]
    kernel_cache = function.device_caches[driver.active.get_current_device()][0]
    if key in kernel_cache:
        return True
    name = function.fn.__name__[:150]  # Triton's file names in an entry (compiler.py)
    group = folder / f"{GROUP_PREFIX}{name}.json"
    try:
        children = json.loads(group.read_text("utf-8")).get("child_paths") or {}
    except (OSError, ValueError):
        return False
    files = {c: p for c, p in children.items() if Path(p).is_file()}
    if f"{name}.json" not in files or len(files) != len(children):
        return False
    padded = folder.name + "=" * (-len(folder.name) % 8)
    key_hash = base64.b32decode(padded).hex()
    source = function.ASTSource(function, signature, constexprs, attrs)
    kernel_cache[key] = function.CompiledKernel(source, files, key_hash)
    return True


def parse_spec(text: str) -> tuple[Any, dict[str, Any], dict[Any, Any], dict[Any, Any], dict]:
    """A specialization text as Triton's ``preload`` reads it: the kernel (imported by its
    name), its signature, constexpr values, attributes and options."""
    import triton.language as tl

    data = json.loads(text)
    module, _, name = str(data["name"]).rpartition(".")
    function = getattr(importlib.import_module(module), name)
    constexprs = {
        tuple(k): _constant(v, tl)
        for k, v in zip(data["constant_keys"], data["constant_vals"], strict=True)
    }
    attrs = {tuple(k): v for k, v in zip(data["attrs_keys"], data["attrs_vals"], strict=True)}
    signature = {k: _tuples(v) for k, v in data["signature"].items()}
    options = {k: _tuples(v) for k, v in data["options"].items()}
    return function, signature, constexprs, attrs, options


def _constant(value: Any, tl: Any) -> Any:
    """A constexpr value as Triton serializes it: a dtype name, ``{"constexpr": v}``, or
    a plain value."""
    if isinstance(value, str) and tl.dtype.is_dtype(value):
        return tl.dtype(value)
    if isinstance(value, dict) and "constexpr" in value:
        return tl.constexpr(value["constexpr"])
    return value


def _tuples(value: Any) -> Any:
    """JSON lists back to the tuples Triton wrote (a kernel signature holds no lists)."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


# ---------------------------------------------------------------------- compiling


def process_count(specs: int) -> int:
    """Compile processes for ``specs`` kernels: ``OIDN_GPU_CUDA_COMPILE_PROCESSES``, else
    one per core but one (the caller's frames keep a core), at most 16."""
    named = os.environ.get(PROCESSES_ENV_VAR, "").strip()
    if named:
        try:
            count = int(named)
        except ValueError:
            count = 0
        if count < 1:
            raise ValueError(f"{PROCESSES_ENV_VAR} must be an integer >= 1, got {named!r}")
    else:
        count = max(1, (os.cpu_count() or 2) - 1)
    return max(1, min(count, specs, MAX_PROCESSES))


def shares(texts: list[str], count: int) -> list[list[str]]:
    """``texts`` dealt round-robin into ``count`` non-empty shares."""
    dealt: list[list[str]] = [[] for _ in range(max(1, min(count, len(texts))))]
    for i, text in enumerate(texts):
        dealt[i % len(dealt)].append(text)
    return [share for share in dealt if share]


@dataclass
class CompileReport:
    """What `compile_parallel` did: processes, wall seconds, each child's exit code."""

    processes: int
    seconds: float
    exit_codes: list[int | None]

    @property
    def ok(self) -> bool:
        return all(code == 0 for code in self.exit_codes)


def compile_parallel(
    texts: list[str],
    capability: int,
    *,
    processes: int | None = None,
    stop: threading.Event | None = None,
) -> CompileReport:
    """Compile ``texts`` for ``capability`` into Triton's disk cache in child processes.

    Each child (`compile_shard`) imports Triton and this package's kernels, not
    torch, and needs no GPU. A set ``stop`` kills the children. Kernels already in
    the cache are loaded, not compiled, so a second call costs the children's start.
    """
    start = time.perf_counter()
    count = process_count(len(texts)) if processes is None else max(1, processes)
    children = []
    for share in shares(texts, count):
        handle, path = tempfile.mkstemp(prefix="oidn-gpu-kernels-", suffix=".json")
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            json.dump({"capability": capability, "specs": spec_texts(share)}, f)
        log = tempfile.TemporaryFile()  # noqa: SIM115 - the child's errors; closed below
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "oidn_gpu.backends.cuda.compile_shard", path],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=_child_env(),
            )
        except OSError:
            log.close()
            os.unlink(path)
            raise
        children.append((child, path, log))
    try:
        codes = [_wait(child, log, stop) for child, _, log in children]
    except StoppedError:
        for child, _, _ in children:
            child.kill()
        for child, _, _ in children:
            child.wait()
        raise
    finally:
        for _, path, log in children:
            log.close()
            with contextlib.suppress(OSError):
                os.unlink(path)
    return CompileReport(len(children), time.perf_counter() - start, codes)


def _child_env() -> dict[str, str]:
    """The compile processes' environment: the caller's (Triton's cache and options),
    without the interpreter switch, which would turn the kernels into Python."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("TRITON_INTERPRET", None)
    return env


def _wait(child: subprocess.Popen[bytes], log: Any, stop: threading.Event | None) -> int | None:
    """Wait for one compile process (or raise `Stopped` once ``stop`` is set)."""
    while child.poll() is None:
        if stop is None:
            child.wait()
        elif stop.wait(0.02):
            raise StoppedError
    if child.returncode != 0:
        log.seek(0)
        err = log.read().decode("utf-8", "replace").strip()
        _LOG.info(
            "cuda: a kernel compile process failed (exit %s): %s", child.returncode, err[-500:]
        )
    return child.returncode


class StoppedError(Exception):
    """`compile_parallel` was stopped by its ``stop`` event."""


GROUP_PREFIX = "__grp__"  # Triton's group files: the paths of one kernel's files


def triton_cache_dir() -> Path:
    """Triton's disk cache: Triton's own setting where Triton is imported, else the folder
    it will use, read without importing it: ``TRITON_CACHE_DIR``, else ``.triton/cache``
    in ``TRITON_HOME`` or the home folder (Triton 3.6, ``knobs.cache``)."""
    knobs = getattr(sys.modules.get("triton"), "knobs", None)
    folder = os.environ.get("TRITON_CACHE_DIR")
    if knobs is not None or folder == "":
        import triton

        return Path(triton.knobs.cache.dir)
    if folder is not None:
        return Path(folder)
    home = os.environ.get("TRITON_HOME", os.path.expanduser("~/"))
    return Path(home, ".triton", "cache")
