"""A first frame's fixed costs, started early: Triton imported and this GPU's shipped
kernels installed in a background thread while the denoiser builds its network.

Importing Triton and the kernel modules takes a few tenths of a second, unpacking
the shipped cache entries a few hundredths: work that does not depend on the frame.
`start` runs it in a thread when a denoiser with ``engine="auto"`` is built on a
CUDA GPU (the executor's weights, the runner's buffers and the image uploads of the
first call meanwhile run on the caller's thread, mostly in CUDA calls that release
the GIL); the first frame (`bridge.CompileBridge.engine_for`) then waits only for
what is left of it.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from typing import Any

from oidn_gpu.backends.cuda import kernel_specs
from oidn_gpu.backends.cuda.triton_loader import interpreting, kernels
from oidn_gpu.backends.phases import log_phase

_LOG = logging.getLogger(__name__)

JOIN_AT_EXIT_S = 10.0  # how long the interpreter's exit waits for a preload
_THREADS: dict[int, threading.Thread] = {}  # compute capability -> its preload
_LOCK = threading.Lock()


def start(torch: Any, device: Any, engine: str) -> threading.Thread | None:
    """Start (once per process and GPU architecture) importing Triton and installing the
    shipped kernels of ``device``'s GPU; None where a frame would not use them (another
    engine, Triton's interpreter, no Triton, no CUDA device)."""
    if engine != "auto" or interpreting() or kernel_specs.triton_version() is None:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        major, minor = torch.cuda.get_device_capability(device)
    except (RuntimeError, ValueError, AssertionError):  # not a CUDA device: no preload
        return None
    capability = major * 10 + minor
    with _LOCK:
        thread = _THREADS.get(capability)
        if thread is None:
            thread = threading.Thread(
                target=_preload, args=(capability,), name="oidn-gpu-preload", daemon=True
            )
            _THREADS[capability] = thread
            thread.start()
    return thread


def _preload(capability: int) -> None:
    started = time.perf_counter()
    try:
        if kernels().UNAVAILABLE:
            return
        version = kernel_specs.triton_version()
        if version is not None:
            kernel_specs.install_shipped(version, capability)
    except Exception as err:  # the first frame tries again and reports it
        _LOG.info("cuda: preloading Triton failed (%s: %s)", type(err).__name__, err)
    log_phase(_LOG, "import Triton and install the shipped kernels", started)


@atexit.register
def _join_at_exit() -> None:
    # A thread still loading Triton's libraries while the interpreter tears down may
    # abort the process: wait for it (it ends in well under a second).
    with _LOCK:
        threads = list(_THREADS.values())
    for thread in threads:
        thread.join(JOIN_AT_EXIT_S)
