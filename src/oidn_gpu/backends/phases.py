"""The phases of a backend's first use: how long each took, as log records, with
Python's cyclic garbage collector paused while they run.

A backend logs each phase of building a denoiser or its first frame at DEBUG level
with the record attributes ``phase`` (its name) and ``elapsed_ms``; ``oidn-gpu bench
--cold`` collects them to say where a fresh process's first denoise went.

A first use makes many long-lived objects at once (Triton's modules and its decorated
kernels, a network's layers, the kernels' texts): each few hundred of them start a
collection, and in a process that has imported torch an older generation's collection
walks its millions of objects. So the phases run with the collector paused
(`paused_gc`): importing Triton 3.9 after torch took 0.15-0.18 s with it and 0.06 s
without on this project's CPU machine; with Triton 3.6 on an H100 host the first denoise
showed no difference we could measure (2026-12-07, docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from collections.abc import Iterator


def log_phase(log: logging.Logger, phase: str, started: float) -> None:
    """Log at DEBUG level how long ``phase`` took (since ``started``, a
    `time.perf_counter` value)."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    elapsed_ms = (time.perf_counter() - started) * 1e3
    log.debug(
        "%s took %.1f ms", phase, elapsed_ms, extra={"phase": phase, "elapsed_ms": elapsed_ms}
    )


@contextlib.contextmanager
def timed_phase(log: logging.Logger, phase: str) -> Iterator[None]:
    """The block as a phase of a first use: run with the collector paused (`paused_gc`)
    and logged with its time (`log_phase`) when it returns."""
    started = time.perf_counter()
    with paused_gc():
        yield
    log_phase(log, phase, started)


_PAUSE_LOCK = threading.Lock()
_pauses = 0  # blocks of `paused_gc` running now, in any thread
_resume = False  # whether the collector was on when the first of them began


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cyclic garbage collector off while the block runs (in any thread), and
    as it was before once the last such block ends: a collector the program turned
    off stays off. Nothing is freed later than it would be otherwise but for cycles,
    which the next collection after the block finds."""
    global _pauses, _resume
    with _PAUSE_LOCK:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _PAUSE_LOCK:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()
