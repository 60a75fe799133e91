"""The NumPy reference backend: fp32 everywhere, the golden model the GPU backends meet.

`executor.ReferenceExecutor` runs a whole U-Net with im2col + BLAS in bounded
memory; `backend.BACKEND` is its registry entry (host tile runner, fp32 only).
"""

from oidn_gpu.backends.reference.executor import (
    DEFAULT_BAND_BYTES,
    GEMM_COLUMNS,
    MAX_DEFAULT_THREADS,
    ReferenceExecutor,
    default_threads,
    padded_value_bytes,
    usable_cores,
)

__all__ = [
    "DEFAULT_BAND_BYTES",
    "GEMM_COLUMNS",
    "MAX_DEFAULT_THREADS",
    "ReferenceExecutor",
    "default_threads",
    "padded_value_bytes",
    "usable_cores",
]
