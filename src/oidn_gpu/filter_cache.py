"""Warm denoisers for the one-call API: `oidn_gpu.denoise` as fast as a kept `Denoiser`.

A `Denoiser` keeps what its first call built (models, executors, compiled
kernels, captured frames). `DenoiserCache` keeps a few idle denoisers, keyed by
the options they were made with, so repeated `oidn_gpu.denoise` calls with the
same options reuse one instead of building it again:

- a call checks a denoiser out (no other call uses it meanwhile) and returns it
  when done; concurrent calls with the same options each get their own (a new one
  when none is idle), so they never wait for one another;
- at most `MAX_IDLE` idle denoisers are kept, the least recently used closed first;
- options must be hashable to be cached, else the call makes (and closes) its own
  denoiser; a ``weights=`` file is keyed by its path, inode, size, modification and change
  times,
  bytes by their SHA-256, so changed weights are never served stale;
- `clear_denoiser_cache` closes the idle ones (and those checked out, when they come
  back), as the interpreter's exit does; a forked child starts with none (the parent's
  are left to the parent).
"""

from __future__ import annotations

import atexit
import hashlib
import math
import os
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from oidn_gpu.backends.base import AUTO, make_options, resolve_backend
from oidn_gpu.backends.lru import LruCache
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import tensors
from oidn_gpu.model.weights import file_version

MAX_IDLE = 4  # idle denoisers kept (each holds its device buffers and captured frames)

_Key = tuple[Any, ...]


def _key_of(value: Any) -> Hashable:
    """A key for one option value: its type and value (``True`` is not ``1``); NaN as one
    value; bytes by their hash."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return ("bytes", hashlib.sha256(value).hexdigest())
    if isinstance(value, float) and math.isnan(value):
        return (float, "nan")
    hash(value)  # TypeError: not hashable
    return (type(value), value)


def _weights_key(value: Any) -> Hashable:
    """A custom weights file by path and `file_version` (a replaced or rewritten file is a
    new key); raises OSError when it cannot be read (the call then reports it)."""
    if isinstance(value, (str, os.PathLike)):
        path = os.path.abspath(os.fspath(value))
        return ("file", path, file_version(os.stat(path)))
    return _key_of(value)


def options_key(options: Mapping[str, Any]) -> _Key | None:
    """The cache key of a call's options, or None when they cannot be cached."""
    try:
        return tuple(
            (name, _weights_key(value) if name == "weights" else _key_of(value))
            for name, value in sorted(options.items())
        )
    except (TypeError, OSError):
        return None


class DenoiserCache:
    """Idle denoisers by options key, least recently used first; thread-safe."""

    def __init__(self, max_idle: int = MAX_IDLE) -> None:
        self.max_idle = max_idle
        self._evicted: list[Any] = []  # what `put` evicted, closed outside the lock
        self._idle = self._new_pool()
        self._lock = threading.Lock()
        self._serial = 0  # distinguishes idle denoisers of one key
        self._generation = 0  # bumped by clear: denoisers checked out before are not kept
        self._registered = False
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        """In a forked child: the parent's denoisers (their devices, threads and lock) are
        not this process's; drop them without closing them."""
        self._lock = threading.Lock()
        self._idle = self._new_pool()
        self._generation += 1

    def _new_pool(self) -> LruCache[tuple[_Key, int], Any]:
        # max_idle < 1 keeps nothing: `checkin` closes every denoiser then.
        return LruCache(max(1, self.max_idle), self._evicted.append)

    def checkout(self, key: _Key) -> tuple[Any, int]:
        """``(an idle denoiser of key or None, the generation to return it with)``."""
        with self._lock:
            for slot in reversed(self._idle):  # the most recently returned first
                if slot[0] == key:
                    return self._idle.pop(slot), self._generation
            return None, self._generation

    def checkin(self, key: _Key, denoiser: Any, generation: int) -> None:
        """Keep ``denoiser`` idle under ``key`` (closing the least recently used beyond
        `max_idle`), or close it when the cache was cleared since its checkout."""
        evicted = []
        with self._lock:
            if generation != self._generation or denoiser._closed or self.max_idle < 1:
                evicted.append(denoiser)
            else:
                if not self._registered:
                    # Registered after the backend's own imports (torch), so it runs first.
                    atexit.register(self.clear)
                    self._registered = True
                self._serial += 1
                self._idle.put((key, self._serial), denoiser)
                evicted += self._evicted
                self._evicted.clear()
        for stale in evicted:
            stale.close()

    def clear(self) -> int:
        """Close every idle denoiser (and, when they come back, those in use); returns
        how many were closed now."""
        with self._lock:
            idle = list(self._idle.values())
            self._idle.clear()
            self._generation += 1
        for denoiser in idle:
            denoiser.close()
        return len(idle)

    def __len__(self) -> int:
        with self._lock:
            return len(self._idle)

    def run(
        self, options: Mapping[str, Any], make: Callable[[], Any], call: Callable[[Any], Any]
    ) -> Any:
        """``call(denoiser)`` with a cached denoiser of ``options`` (``make()`` when none is
        idle), returned to the cache afterwards; uncachable options get their own."""
        key = options_key(options)
        if key is None:
            with make() as denoiser:
                return call(denoiser)
        denoiser, generation = self.checkout(key)
        if denoiser is None:
            denoiser = make()
        try:
            return call(denoiser)
        finally:
            self.checkin(key, denoiser, generation)


CACHE = DenoiserCache()


def clear_denoiser_cache() -> int:
    """Close the denoisers `oidn_gpu.denoise` keeps warm between calls, freeing their
    device memory; the next call builds a new one. Returns how many were closed.

    Denoisers in use by a running call are closed when that call ends. The
    interpreter's exit clears the cache too.
    """
    return CACHE.clear()


def on_tensor_device(options: dict[str, Any], *images: Any) -> dict[str, Any]:
    """``options`` with ``device`` set to the main image's CUDA device when the backend
    that will denoise it takes that device and no device was asked for."""
    if "device" in options or options.get("backend_options") is not None:
        return options
    main = next((image for image in images if image is not None), None)
    device = tensors.cuda_device(main) if main is not None else None
    if device is None:
        return options
    try:
        backend = resolve_backend(options.get("backend", AUTO), options)
        make_options(backend, device=device)  # a backend of device tensors takes it
    except InvalidArgumentError:  # Denoiser(**options) reports a bad backend, after its checks
        return options
    return {**options, "device": device}
