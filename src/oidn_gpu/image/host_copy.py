"""Large host copies split across threads (NumPy copies release the GIL).

A 4K float32 RGB image is 100 MB; one thread copies it at a few GB/s, several
threads at the memory's bandwidth. `parallel_copyto` is ``np.copyto`` (with a
dtype conversion where the destination's dtype differs, as ``astype`` rounds)
split into contiguous slices copied by a small shared pool of worker threads.
Copies below `PARALLEL_MIN_BYTES` run on the calling thread.

The number of threads is the usable cores (the process's CPU affinity), at most
`MAX_THREADS`; `OIDN_GPU_COPY_THREADS` overrides it (1: always on the calling
thread). `limit_copy_threads` caps it for the whole process (a render farm's worker
given a few of a node's cores).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from oidn_gpu.errors import InvalidArgumentError

# Below this a copy is faster on one thread than handed to several (measured on 2 to
# 16 cores: a thread hand-off costs tens of microseconds, 4 MiB copy about 0.5 ms).
PARALLEL_MIN_BYTES = 4 << 20
MAX_THREADS = 8  # memory bandwidth is saturated well before 8 copying threads
THREADS_VARIABLE = "OIDN_GPU_COPY_THREADS"

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0  # the process that made _pool: a forked child has none of its threads
_pool_lock = threading.Lock()
_limit: int | None = None  # `limit_copy_threads`


def limit_copy_threads(threads: int | None) -> int | None:
    """Cap the threads of every later copy in this process at ``threads`` (None: no cap);
    returns the previous cap.

    Raises:
        InvalidArgumentError: ``threads`` is below 1.
    """
    global _limit
    if threads is not None and threads < 1:
        raise InvalidArgumentError(f"copy threads must be at least 1, got {threads}")
    previous, _limit = _limit, threads
    return previous


def copy_threads() -> int:
    """How many threads a large copy uses (see the module docstring)."""
    threads = _unlimited_copy_threads()
    return threads if _limit is None else min(threads, _limit)


def _unlimited_copy_threads() -> int:
    value = os.environ.get(THREADS_VARIABLE)
    if value:
        try:
            threads = int(value)
        except ValueError:
            threads = 0
        if threads < 1:
            raise InvalidArgumentError(
                f"{THREADS_VARIABLE}={value!r} is not a positive integer number of threads"
            )
        return min(threads, 64)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_THREADS))


def _executor(threads: int) -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _pool_lock:
        if _pool_pid != os.getpid():  # forked: the parent's pool has no threads here
            _pool, _pool_pid = None, os.getpid()
        if _pool is None or _pool._max_workers < threads:
            old = _pool
            _pool = ThreadPoolExecutor(threads, thread_name_prefix="oidn-copy")
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def parallel_copyto(dst: np.ndarray, src: np.ndarray, threads: int | None = None) -> None:
    """``np.copyto(dst, src, casting="same_kind")`` split across threads along axis 0.

    ``dst`` and ``src`` have one shape (any strides); float32 to float16 rounds to
    nearest even, as ``astype`` does. ``dst`` must not overlap ``src``.
    """
    if dst.shape != src.shape:
        raise InvalidArgumentError(f"copy of shape {src.shape} into shape {dst.shape}")
    count = threads if threads is not None else copy_threads()
    rows = dst.shape[0] if dst.ndim else 1
    parts = min(count, rows, max(1, max(dst.nbytes, src.nbytes) // (PARALLEL_MIN_BYTES // 2)))
    if parts <= 1:
        np.copyto(dst, src, casting="same_kind")
        return
    step = -(-rows // parts)

    def copy(start: int) -> None:
        np.copyto(dst[start : start + step], src[start : start + step], casting="same_kind")

    # The caller's thread copies the first slice; the pool the others.
    futures = [_executor(count).submit(copy, start) for start in range(step, rows, step)]
    error: BaseException | None = None
    try:
        copy(0)
    except BaseException as err:  # wait for the workers before leaving either way
        error = err
    for future in futures:
        try:
            future.result()
        except BaseException as err:
            error = error or err
    if error is not None:
        raise error
