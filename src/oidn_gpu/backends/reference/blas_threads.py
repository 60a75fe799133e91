"""The BLAS thread count of the reference backend's runs: one BLAS thread per gemm.

The reference executor shares each conv's bands among its own threads, so every gemm
must run on a single BLAS thread (OpenBLAS's spinning threads would fight the band
workers, and another split of a gemm sums in another order). `BlasThreads` sets the
process-wide count for the runs in flight and restores the caller's after;
`thread_setter` sets it in a way the library honours from any Python thread.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from threadpoolctl import LibController, ThreadpoolController

_OPENBLAS_SYMBOL_AFFIXES = tuple(
    (prefix, suffix) for prefix in ("", "scipy_") for suffix in ("", "64_", "_64")
)
"""Name decorations of ``openblas_set_num_threads``: plain OpenBLAS, and scipy-openblas
(NumPy's wheels) with its 64-bit-integer interface."""


def thread_setter(lib: LibController) -> Callable[[int], object]:
    """A function that sets ``lib``'s thread count, honoured whichever thread calls it.

    threadpoolctl lets only one thread (the first to set a limit, usually the main
    thread) change OpenBLAS's process-wide pthreads thread count and silently ignores
    the others, so a run started from another thread would keep every BLAS thread
    (other sums, and spinning threads fighting the band workers). For that library the
    setter calls OpenBLAS's own ``openblas_set_num_threads``, which any thread may call;
    other libraries go through threadpoolctl.
    """
    if lib.internal_api == "openblas" and getattr(lib, "threading_layer", "") != "openmp":
        for prefix, suffix in _OPENBLAS_SYMBOL_AFFIXES:
            native = getattr(lib.dynlib, f"{prefix}openblas_set_num_threads{suffix}", None)
            if native is not None:
                return lambda threads: native(ctypes.c_int(threads))
    return lib.set_num_threads


class BlasThreads:
    """The process-wide BLAS thread count, set for the runs in flight and restored after.

    OpenBLAS has one thread count per process, so runs of several executors in
    several threads share it: the first run to start saves the caller's setting,
    the last to end restores it. Any thread may start a run (see `thread_setter`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._libs: list[tuple[LibController, Callable[[int], object]]] | None = None
        self._active = 0
        self._saved: list[int] = []

    def _controllers(self) -> list[tuple[LibController, Callable[[int], object]]]:
        if self._libs is None:  # NumPy's BLAS is loaded by now
            controller = ThreadpoolController().select(user_api="blas")
            self._libs = [(lib, thread_setter(lib)) for lib in controller.lib_controllers]
        return self._libs

    def caller_setting(self) -> list[int]:
        """The thread counts the caller set (before any run of ours changed them)."""
        with self._lock:
            if self._active:
                return list(self._saved)
            return [lib.num_threads for lib, _ in self._controllers()]

    @contextmanager
    def limit(self, threads: int) -> Iterator[None]:
        with self._lock:
            libs = self._controllers()
            if self._active == 0:
                self._saved = [lib.num_threads for lib, _ in libs]
            self._active += 1
            for _, set_threads in libs:
                set_threads(threads)
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    for (_, set_threads), saved in zip(libs, self._saved, strict=True):
                        set_threads(saved)


BLAS_THREADS = BlasThreads()
"""The one instance: OpenBLAS has one thread count per process."""
