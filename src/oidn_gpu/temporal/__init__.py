"""Temporal mode: animation frames denoised with history, from OIDN's single-frame weights.

`TemporalDenoiser` runs the loop (`denoiser`); `passes` holds the parameters
(`TemporalParams`) and the NumPy passes that every backend's kernels are tested against;
`TemporalAovDenoiser` (`aovs`) carries light-path passes through the beauty's history.
"""

from oidn_gpu.temporal.aovs import TemporalAovDenoiser
from oidn_gpu.temporal.denoiser import TemporalDenoiser, TemporalRestart
from oidn_gpu.temporal.passes import TemporalParams

__all__ = ["TemporalAovDenoiser", "TemporalDenoiser", "TemporalParams", "TemporalRestart"]
