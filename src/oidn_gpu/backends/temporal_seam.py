"""The temporal mode's part of the backend seam (re-exported by `backends.base`).

A backend may declare `Backend.temporal_passes` (a `TemporalPasses`: the two passes on
host arrays) and `Backend.temporal_session` (a `TemporalSession`: a whole frame with the
history kept on its device); `oidn_gpu.temporal` uses the session where there is one,
else the passes, else NumPy's. A session reaches its denoiser through a `FrameSource`
(the facade's frame path), never the `oidn_gpu.Denoiser` object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class TemporalPasses(Protocol):
    """The temporal mode's two passes on a backend (optional: `Backend.temporal_passes`).

    Arrays and channel layouts are those of `oidn_gpu.temporal.passes`, whose NumPy
    functions are the oracle each backend's kernels are tested against; ``params`` is a
    `oidn_gpu.temporal.passes.TemporalParams`. Both take and return host float32 arrays.
    """

    def reproject(
        self,
        motion: np.ndarray,
        guide: np.ndarray,
        prev_guide: np.ndarray,
        signal: np.ndarray,
        prev_state: np.ndarray,
        params: Any,
    ) -> np.ndarray:
        """Pass 1: the previous state reprojected, rejected and accumulated."""
        ...

    def stabilize(self, denoised: np.ndarray, reprojection: np.ndarray, params: Any) -> np.ndarray:
        """Pass 2: the denoised frame blended with its clamped reprojected history."""
        ...

    def close(self) -> None:
        """Release what the passes hold (device buffers); idempotent."""
        ...


@dataclass(frozen=True)
class TemporalFrame:
    """One frame of an animation for a `TemporalSession`: host float32 arrays, checked
    and C-contiguous (``oidn_gpu.temporal`` makes them).

    Attributes:
        color: ``[H, W, 3]`` noisy color (alpha is passed around the session).
        albedo, normal: ``[H, W, 3]`` or None.
        motion: ``[H, W, 2]`` backward motion in pixels (pixel ``(x, y)`` was at
            ``(x + mx, y + my)`` in the previous frame).
        depth: ``[H, W]`` or None.
    """

    color: np.ndarray
    albedo: np.ndarray | None
    normal: np.ndarray | None
    motion: np.ndarray
    depth: np.ndarray | None


@dataclass(frozen=True)
class TemporalResult:
    """What `TemporalSession.frame` gives back.

    Attributes:
        output: ``[H, W, 3]`` float32 host array, the stabilized frame.
        history_fraction: the share of pixels that kept their history in the reprojection
            the frame used (`oidn_gpu.temporal.passes.history_fraction`; 0 on a restart).
        cut: the history was rejected as a camera cut (more than ``params.cut_threshold``
            of the pixels rejected it) and the frame was recomputed as a restart.
    """

    output: np.ndarray
    history_fraction: float
    cut: bool


class NetworkFrame(Protocol):
    """One frame planned by a `FrameSource`: what a session runs the network with.

    Attributes:
        runner: the `base.TileRunner` of the frame's weights.
        plan: its `plan.DenoisePlan` (mode and tiles, within the backend's tile limits).
        autoexposes: the runner computes the input scale (the autoexposure) on its device.
        input_scale: the input scale where not ``autoexposes``.
    """

    @property
    def runner(self) -> Any: ...

    @property
    def plan(self) -> Any: ...

    @property
    def autoexposes(self) -> bool: ...

    @property
    def input_scale(self) -> float: ...


class FrameSource(Protocol):
    """What a backend's `TemporalSession` gets from its denoiser (the facade's frame path).

    Attributes:
        options: the filter's options (``oidn_gpu.FilterOptions``).
        backend: the denoiser's backend (its registered name).
        backend_options: the denoiser's backend options.
        lock: the denoiser's lock; a session holds it for a frame.
        closed: the denoiser is closed.
    """

    options: Any
    backend: str
    backend_options: Any
    lock: Any
    closed: bool

    def check_open(self) -> None:
        """Raises ``InvalidOperationError``: the denoiser is closed."""
        ...

    def plan(self, images: Any, *, on_device: bool = False) -> NetworkFrame:
        """The frame of these validated images (``oidn_gpu.filter_images.Images``) planned
        (``on_device``: its images are on the runner's device)."""
        ...

    def record(self, frame: Any, input_scale: Any) -> None:
        """Record what ran for ``Denoiser.info`` (``frame``: one `plan` gave)."""
        ...

    def denoise(self, color: Any, albedo: Any = None, normal: Any = None) -> Any:
        """The denoiser's ``denoise`` (images as ``oidn_gpu.Denoiser.denoise`` takes them)."""
        ...


@runtime_checkable
class TemporalSession(Protocol):
    """The temporal mode of one animation on a backend's device, its history kept there
    (optional: ``Backend.temporal_session``).

    `frame` does what ``oidn_gpu.temporal`` does per frame with a backend's
    `TemporalPasses`, without host round trips between the steps: pack the signal and the
    guide, reproject the stored history (an empty one when ``restart`` or none is stored),
    test for a camera cut (unless ``restart``) and then reproject again from an empty
    history, denoise the accumulated images with the session's `oidn_gpu.Denoiser`,
    stabilize, and store the next history and guide on the device. Its output equals the
    `TemporalPasses` path within the backend's usual tolerance.
    """

    def frame(self, frame: TemporalFrame, params: Any, *, restart: bool) -> TemporalResult:
        """The next frame (``params``: a `oidn_gpu.temporal.passes.TemporalParams` with
        its guides already chosen)."""
        ...

    def close(self) -> None:
        """Release the device history and buffers; idempotent."""
        ...
