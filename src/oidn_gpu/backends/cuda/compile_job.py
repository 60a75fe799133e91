"""A frame's Triton kernels to compile in a child process (`compile_worker`), and its start.

The cuDNN bridge (`runner.CudaDenoiser`) serves frames while the Triton
kernels of their configuration compile. Compiling in a thread of the caller's
process holds Python's GIL for long stretches (the caller's frames then take
several times longer) and a compiler thread cannot be left running when the
process exits; so the compile runs here, in a child process: it rebuilds the
executor from the network's graph and weights, runs the frame once on scratch
images of the same dtypes and channels (which compiles every kernel with the
caller's specializations) and exits. The parent then loads the kernels from
Triton's disk cache (the same ``TRITON_CACHE_DIR``) in a fraction of a second,
and kills the child if it must stop first.

The child is ``python -m oidn_gpu.backends.cuda.compile_worker JOB.pickle``; this
module, which the pipeline imports, needs neither torch nor the executor.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CompileJob:
    """What the child needs to compile one frame configuration (all picklable)."""

    graph: Any
    convs: dict[str, Any]
    spec: Any
    precision: str
    device_index: int | None
    images: tuple[tuple[tuple[int, ...], str, int], ...]  # (shape, torch dtype name, channels)
    out_channels: int
    mode: Any
    plan: Any
    autoexposure: bool
    fused: str | None = None  # the caller's `CudaExecutor.fusion` (None: its default)
    rows: bool | None = None  # the caller's `CudaExecutor.rows` (None: its default)
    spec_key: Any = None  # where the child records the kernel list (`kernel_specs.SpecKey`)


def start(job: CompileJob) -> subprocess.Popen[bytes]:
    """Start the child compiling ``job``; its job file is removed when it has read it."""
    handle, path = tempfile.mkstemp(prefix="oidn-gpu-compile-", suffix=".pickle")
    with os.fdopen(handle, "wb") as f:
        pickle.dump(job, f)
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "oidn_gpu.backends.cuda.compile_worker", path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # one CPU thread for its torch: the caller's frames keep the cores
            env={**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"},
        )
    except OSError:
        os.unlink(path)
        raise
    child.job_path = path  # type: ignore[attr-defined]  # removed by `discard` if left
    return child


def discard(child: subprocess.Popen[bytes]) -> None:
    """Remove the job file of a child that ended before it read it (killed, crashed)."""
    with contextlib.suppress(OSError):
        os.unlink(child.job_path)  # type: ignore[attr-defined]
