"""The CUDA backend: OIDN's U-Nets as Triton kernels on NVIDIA tensor cores, through PyTorch.

Imported only when used; needs ``torch`` (and ``triton`` for the fast path:
without it a cuDNN path through torch runs, and ``info()`` says so), both in the
``oidn-gpu[cuda]`` extra.

- `executor.CudaExecutor`: the network executor (`backends.base.NetworkExecutor`).
- `runner.CudaDenoiser`: whole denoises with device-side I/O (torch tensors in
  and out without host copies, NumPy through pinned buffers), GPU autoexposure,
  one CUDA graph per input shape.
- `bench`: the benchmark engine (its command line: ``oidn-gpu bench --backend cuda``).

`available()` says whether this backend can run here, without importing it.
"""

from __future__ import annotations

import ctypes.util
import importlib.util
import sys
from pathlib import Path


def nvidia_driver_present() -> bool:
    """Whether NVIDIA's driver may be here, looked up without importing torch.

    Importing torch to ask takes seconds; on Linux the driver shows as
    ``/proc/driver/nvidia``, ``/dev/nvidiactl`` or a loadable ``libcuda``; macOS has
    no CUDA; elsewhere torch is asked.
    """
    if "torch" in sys.modules:
        return True
    if sys.platform == "darwin":
        return False
    if sys.platform.startswith("linux"):
        return (
            Path("/proc/driver/nvidia").exists()
            or Path("/dev/nvidiactl").exists()
            or ctypes.util.find_library("cuda") is not None
        )
    return True


def available() -> tuple[bool, str]:
    """``(True, engine)`` when torch sees a CUDA GPU (engine ``'triton'`` or ``'cudnn'``),
    else ``(False, reason)``."""
    if not nvidia_driver_present():
        return False, "no NVIDIA driver found"
    try:
        import torch
    except ImportError:
        return False, "torch is not installed (pip install 'oidn-gpu[cuda]')"
    if not torch.cuda.is_available():
        return False, "torch sees no CUDA GPU"
    # Importing Triton takes a few tenths of a second: only looked up here; the executor
    # imports it (off the first frame's path) and falls back to cuDNN if that fails.
    if importlib.util.find_spec("triton") is None:
        return True, "cudnn"
    return True, "triton"
