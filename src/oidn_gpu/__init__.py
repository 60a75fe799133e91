"""oidn-gpu: Intel Open Image Denoise's trained U-Nets, run natively from Python.

The public face of the package; it defines nothing itself. Importing it needs
only NumPy: wgpu, OpenImageIO and pyoidn are imported lazily where used.

oidn-gpu logs through the standard `logging` module on the ``oidn_gpu`` logger and its
children; it adds no handler but a `logging.NullHandler` (an application configures its
own: the ``oidn-gpu`` tool's ``--log-level`` and ``--log-file``).
"""

import logging

from oidn_gpu.config import DenoiserConfig
from oidn_gpu.errors import (
    CancelledError,
    InvalidArgumentError,
    InvalidOperationError,
    MissingDependencyError,
    OIDNGPUError,
    OutOfMemoryError,
    ShaderCompileError,
    UnsupportedDeviceError,
    WeightsFormatError,
    WeightsNotFoundError,
)
from oidn_gpu.filter import (
    Denoiser,
    DenoiserInfo,
    FilterOptions,
    RTFilter,
    RTLightmapFilter,
    TemporalDenoiser,
    denoise,
)
from oidn_gpu.filter_cache import clear_denoiser_cache
from oidn_gpu.filter_temporal_aovs import TemporalAovDenoiser
from oidn_gpu.installation import info

__version__ = "0.1.0"

logging.getLogger("oidn_gpu").addHandler(logging.NullHandler())

__all__ = [
    "CancelledError",
    "Denoiser",
    "DenoiserConfig",
    "DenoiserInfo",
    "FilterOptions",
    "InvalidArgumentError",
    "InvalidOperationError",
    "MissingDependencyError",
    "OIDNGPUError",
    "OutOfMemoryError",
    "RTFilter",
    "RTLightmapFilter",
    "ShaderCompileError",
    "TemporalAovDenoiser",
    "TemporalDenoiser",
    "UnsupportedDeviceError",
    "WeightsFormatError",
    "WeightsNotFoundError",
    "__version__",
    "clear_denoiser_cache",
    "denoise",
    "info",
]
