"""How long the phases of a backend's first use took, as log records.

A backend logs each phase of building a denoiser or its first frame at DEBUG level
with the record attributes ``phase`` (its name) and ``elapsed_ms``; ``oidn-gpu bench
--cold`` collects them to say where a fresh process's first denoise went.
"""

from __future__ import annotations

import logging
import time


def log_phase(log: logging.Logger, phase: str, started: float) -> None:
    """Log at DEBUG level how long ``phase`` took (since ``started``, a
    `time.perf_counter` value)."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    elapsed_ms = (time.perf_counter() - started) * 1e3
    log.debug(
        "%s took %.1f ms", phase, elapsed_ms, extra={"phase": phase, "elapsed_ms": elapsed_ms}
    )
