"""Temporal mode's passes: animation frames denoised with history, from OIDN's single-frame
weights.

`passes` holds the NumPy passes that every backend's kernels are tested against (and is the
face the backends import), `layout` the channel layouts and their packing on the host,
`params` the parameters (`TemporalParams`), `rejection` pass 1's light-change and
disocclusion-margin steps. The loop that denoises an animation is
`oidn_gpu.TemporalDenoiser` (`oidn_gpu.filter_temporal`); `oidn_gpu.TemporalAovDenoiser`
(`oidn_gpu.filter_temporal_aovs`) carries light-path passes through the beauty's history.
"""

from oidn_gpu.temporal.params import TemporalParams

__all__ = ["TemporalParams"]
