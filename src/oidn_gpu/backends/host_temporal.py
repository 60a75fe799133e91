"""`HostTemporalSession`: the temporal mode's per-frame steps on host arrays.

The `TemporalSession` of backends without one of their own (the reference backend, and
any backend whose ``temporal_session`` gives None): it packs the signal and the guide in
NumPy, runs the backend's `TemporalPasses` (NumPy's where it has none) on host arrays,
denoises the accumulated images through the denoiser's frame path (a `FrameSource`) and
keeps the next history state on the host. `temporal_session_for` picks a denoiser's session.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from oidn_gpu.backends.base import FrameSource, TemporalFrame, TemporalResult, get_backend
from oidn_gpu.temporal import passes as tp


class HostTemporalSession:
    """A `TemporalSession` on host arrays through a backend's `TemporalPasses`."""

    def __init__(self, frames: FrameSource, passes: Any) -> None:
        self.frames = frames
        self.passes = passes
        self.name = f"host {getattr(passes, 'name', type(passes).__name__)}"
        self._state: np.ndarray | None = None
        self._guide: np.ndarray | None = None

    def frame(self, frame: TemporalFrame, params: Any, *, restart: bool) -> TemporalResult:
        """`TemporalSession.frame`."""
        signal = tp.pack_signal(frame.color, frame.albedo, frame.normal)
        guide = tp.pack_guide(frame.depth, frame.albedo, frame.normal)
        size = frame.color.shape[:2]
        continued = not restart and self._state is not None and self._state.shape[:2] == size
        if continued:
            prev_state, prev_guide = self._state, self._guide
        else:
            prev_state, prev_guide = tp.empty_state(*size), guide
        reprojection = self.passes.reproject(
            frame.motion, guide, prev_guide, signal, prev_state, params
        )
        fraction = tp.history_fraction(reprojection)
        cut = continued and 1.0 - fraction > params.cut_threshold
        if cut:
            reprojection = self.passes.reproject(
                frame.motion, guide, guide, signal, tp.empty_state(*size), params
            )
            fraction = 0.0
        acc = reprojection
        denoised = self.frames.denoise(
            np.ascontiguousarray(acc[:, :, 0:3]),
            None if frame.albedo is None else np.ascontiguousarray(acc[:, :, 3:6]),
            None if frame.normal is None else np.ascontiguousarray(acc[:, :, 6:9]),
        )
        output = self.passes.stabilize(np.asarray(denoised, np.float32), reprojection, params)
        self._state, self._guide = tp.next_state(reprojection, output), guide
        return TemporalResult(output, fraction, cut)

    def close(self) -> None:
        """Release the passes and the history; idempotent."""
        self._state = self._guide = None
        self.passes.close()


def temporal_passes_for(frames: FrameSource) -> Any:
    """The temporal passes of the denoiser's backend (`Backend.temporal_passes`), else the
    NumPy ones."""
    backend = get_backend(frames.backend)
    factory = getattr(backend, "temporal_passes", None)
    if factory is None:
        return tp.NumpyTemporalPasses()
    return factory(frames.backend_options)


def temporal_session_for(frames: FrameSource) -> Any:
    """The `TemporalSession` of a denoiser's frame path: its backend's
    (`Backend.temporal_session`) where it has one for these options, else a
    `HostTemporalSession` on its `TemporalPasses`."""
    factory = getattr(get_backend(frames.backend), "temporal_session", None)
    session = None if factory is None else factory(frames)
    if session is None:
        session = HostTemporalSession(frames, temporal_passes_for(frames))
    return session
