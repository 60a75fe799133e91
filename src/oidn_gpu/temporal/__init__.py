"""Temporal mode's passes: animation frames denoised with history, from OIDN's single-frame
weights.

`passes` holds the parameters (`TemporalParams`) and the NumPy passes that every backend's
kernels are tested against. The loop that denoises an animation is
`oidn_gpu.TemporalDenoiser` (`oidn_gpu.filter_temporal`); `oidn_gpu.TemporalAovDenoiser`
(`oidn_gpu.filter_temporal_aovs`) carries light-path passes through the beauty's history.
"""

from oidn_gpu.temporal.passes import TemporalParams

__all__ = ["TemporalParams"]
