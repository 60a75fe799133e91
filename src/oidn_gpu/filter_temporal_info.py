"""What a `TemporalDenoiser` is and did (`TemporalInfo`), and the check of its keyword
options (a misspelt one is named with the closest valid name and every valid one)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from oidn_gpu.backends.base import REGISTRY, get_backend
from oidn_gpu.config import DENOISER_OPTIONS
from oidn_gpu.errors import InvalidArgumentError, did_you_mean, one_of
from oidn_gpu.temporal import passes as tp

# `TemporalDenoiser` keywords besides the `TemporalParams` names.
TEMPORAL_OPTIONS: tuple[str, ...] = (*tp.TemporalParams.names, "motion_convention")


@dataclass(frozen=True)
class TemporalInfo:
    """What `TemporalDenoiser.info` reports.

    Attributes:
        mode: ``'temporal'``.
        backend: the wrapped denoiser's backend.
        session: where the history lives and the temporal passes run: ``'device'`` (the
            backend's GPU session) or ``'host'`` (host arrays, the backend's passes).
        motion_convention: how each frame's ``motion`` is read (docs/aovs.md).
        params: the `TemporalParams` values.
        frames: frames denoised so far.
        history_frames: frames the current history holds (since its last restart, this
            frame included; at most ``history`` of noisy input are averaged).
        history_fraction: the share of the last frame's pixels that kept their history.
        guides: what rejected the history of the last frame: ``'depth'``, or
            ``'albedo and normal'`` (``'albedo'``, ``'normal'``) where no depth was given.
        depth: whether the last frame had a depth image (optional).
        restarts: every history restart so far (`TemporalRestart`: frame and why).
        denoiser: the wrapped `oidn_gpu.Denoiser`'s `info` of its last denoise (backend,
            device, weights, ...), or None before the first frame.
    """

    mode: str
    backend: str
    session: str
    motion_convention: str
    params: dict[str, Any]
    frames: int
    history_frames: int
    history_fraction: float
    guides: str | None
    depth: bool | None
    restarts: tuple[Any, ...] = ()
    denoiser: Any = field(default=None, repr=False)

    @property
    def last_restart(self) -> Any:
        """The latest `TemporalRestart`, or None before the first frame."""
        return self.restarts[-1] if self.restarts else None


def check_options(options: Mapping[str, Any]) -> None:
    """``TemporalDenoiser(**options)``'s keywords that are neither temporal parameters nor
    `oidn_gpu.Denoiser` options (its filter options, ``backend``, any backend's options).

    Raises:
        InvalidArgumentError: the first unknown keyword, with the closest valid name and
            the valid ones.
    """
    known = {*TEMPORAL_OPTIONS, *DENOISER_OPTIONS}
    unknown = sorted(set(options) - known)
    if not unknown:
        return
    backend_options = sorted(
        {name for backend in REGISTRY for name in get_backend(backend).Options.option_names()}
    )
    unknown = [key for key in unknown if key not in backend_options]
    if not unknown:
        return
    key = unknown[0]
    candidates = [*TEMPORAL_OPTIONS, *DENOISER_OPTIONS, *backend_options]
    raise InvalidArgumentError(
        f"unknown option '{key}' of the temporal denoiser{did_you_mean(key, candidates)}; "
        f"its temporal options are {one_of(TEMPORAL_OPTIONS)}, and the Denoiser options "
        f"{one_of(sorted(DENOISER_OPTIONS))} (and the backends' options "
        f"{one_of(backend_options)})"
    )
