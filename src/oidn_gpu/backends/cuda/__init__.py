"""The CUDA backend: OIDN's U-Nets as Triton kernels on NVIDIA tensor cores, through PyTorch.

Imported only when used; needs ``torch`` (and ``triton`` for the fast path:
without it a cuDNN path through torch runs, and ``info()`` says so), both in the
``oidn-gpu[cuda]`` extra.

- `executor.CudaExecutor`: the network executor (`backends.base.NetworkExecutor`).
- `pipeline.CudaDenoiser`: whole denoises with device-side I/O (torch tensors in
  and out without host copies, NumPy through pinned buffers), GPU autoexposure,
  one CUDA graph per input shape.
- `bench`: the benchmark engine (its command line: ``oidn-gpu bench --backend cuda``).

`available()` says whether this backend can run here, without importing it.
"""

from __future__ import annotations


def available() -> tuple[bool, str]:
    """``(True, engine)`` when torch sees a CUDA GPU (engine ``'triton'`` or ``'cudnn'``),
    else ``(False, reason)``."""
    try:
        import torch
    except ImportError:
        return False, "torch is not installed (pip install 'oidn-gpu[cuda]')"
    if not torch.cuda.is_available():
        return False, "torch sees no CUDA GPU"
    try:
        import triton
        import triton.language  # noqa: F401
    except Exception:
        return True, "cudnn"
    return True, "triton"
