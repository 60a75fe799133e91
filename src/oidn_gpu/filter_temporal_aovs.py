"""Light-path passes in temporal mode: every pass of a frame keeps the beauty's history.

`TemporalAovDenoiser` denoises an animation's beauty as `TemporalDenoiser` does and, with
it, passes whose sum is the beauty (light groups, diffuse/specular), each through the same
history decisions as the beauty:

1. the beauty is reprojected and accumulated by the backend's temporal passes, as in
   `oidn_gpu.backends.host_temporal.HostTemporalSession` (the camera-cut test included);
2. each pass's history is reprojected with the same motion and guide (so the same taps,
   weights and Catmull-Rom choice, `oidn_gpu.temporal.passes.gather`), and takes the
   beauty's decisions: the firefly limit is applied to each pass against its own history
   (a pass's firefly is its own); where the beauty's light changed, the pass takes its own
   noisy value and the output history is cut as the beauty's is; in the margin around
   disocclusions it takes its own noisy value (its fireflies limited); the history
   lengths (input and output) are the beauty's;
3. the accumulated beauty and passes are denoised in one `Denoiser.denoise_many` sequence
   with the beauty's accumulated albedo and normal;
4. each result is blended with its own reprojected previous output (clamped to its own
   neighbourhood, weighted by the beauty's output history length);
5. the passes of the sum are adjusted to add up to the beauty's temporal output
   (`oidn_gpu.image.aov_sum.reconcile`), and kept so as the next frame's history.

The passes' history is held on the host and reprojected with NumPy on every backend; the
beauty's follows the backend's temporal passes on host arrays (not a backend's own GPU
session), so its result is `TemporalDenoiser`'s on the reference backend, bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from oidn_gpu.backends.base import TemporalFrame, TemporalResult
from oidn_gpu.backends.host_temporal import temporal_passes_for
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.filter_aovs import AovResult
from oidn_gpu.filter_temporal import TemporalDenoiser
from oidn_gpu.image.aov_sum import reconcile
from oidn_gpu.temporal import passes as tp

# The reprojection channels a pass takes from the beauty's: history lengths and validity.
_DECISIONS = (tp.STATE_COUNT, tp.REPROJECTION_VALID, tp.REPROJECTION_OUTPUT_COUNT)


def pass_reprojection(
    motion: np.ndarray,
    guide: np.ndarray,
    prev_guide: np.ndarray,
    signal: np.ndarray,
    prev_state: np.ndarray,
    beauty_signal: np.ndarray,
    beauty: np.ndarray,
    params: tp.TemporalParams,
) -> np.ndarray:
    """A pass's reprojection (`oidn_gpu.temporal.passes` layout) under the beauty's
    decisions: ``beauty`` is the beauty's reprojection of this frame and ``beauty_signal``
    its signal, ``prev_state`` the pass's state after the previous frame (whose history
    lengths are the beauty's). The pass's history is gathered and its fireflies limited
    against it (`~oidn_gpu.temporal.passes.gather`); then, where the beauty's light changed
    (`~oidn_gpu.temporal.passes.light_changed`) or it is near a disocclusion
    (`~oidn_gpu.temporal.passes.near_disocclusions`), the pass drops its input history as
    the beauty does, and its history lengths and validity are the beauty's."""
    gathered = tp.gather(motion, guide, prev_guide, signal, prev_state, params)
    changed = tp.light_changed(beauty_signal, beauty, params)
    out = tp.cut_changes(signal, gathered, changed, params)
    out = tp.drop_input_history(signal, out, tp.near_disocclusions(beauty, params))
    out[:, :, 3 : tp.SIGNAL_CHANNELS] = beauty[:, :, 3 : tp.SIGNAL_CHANNELS]
    for channel in _DECISIONS:
        out[:, :, channel] = beauty[:, :, channel]
    return out


class AovTemporalSession:
    """A `TemporalSession` on host arrays that carries the passes of each frame
    (`pending`, set before `frame`; their results in `results` after it)."""

    def __init__(self, denoiser: Any, passes: Any) -> None:
        self.denoiser = denoiser
        self.passes = passes
        self.name = f"host {getattr(passes, 'name', type(passes).__name__)} with passes"
        self.pending: dict[str, np.ndarray] = {}
        self.summed: list[str] = []
        self.results: dict[str, np.ndarray] = {}
        self._state: np.ndarray | None = None
        self._guide: np.ndarray | None = None
        self._pass_states: dict[str, np.ndarray] = {}

    def frame(self, frame: TemporalFrame, params: Any, *, restart: bool) -> TemporalResult:
        """`TemporalSession.frame`, the `pending` passes with the beauty."""
        signal = tp.pack_signal(frame.color, frame.albedo, frame.normal)
        guide = tp.pack_guide(frame.depth, frame.albedo, frame.normal)
        size = frame.color.shape[:2]
        continued = (
            not restart
            and self._state is not None
            and self._state.shape[:2] == size
            and set(self._pass_states) == set(self.pending)
        )
        prev_state, prev_guide = (self._state, self._guide) if continued else (None, guide)
        assert prev_guide is not None  # kept with the state
        reprojection = self._reproject(frame, guide, prev_guide, signal, prev_state, params)
        fraction = tp.history_fraction(reprojection)
        cut = continued and 1.0 - fraction > params.cut_threshold
        if cut:
            continued, prev_guide, fraction = False, guide, 0.0
            reprojection = self._reproject(frame, guide, guide, signal, None, params)
        signals = {
            n: tp.pack_signal(c, frame.albedo, frame.normal) for n, c in self.pending.items()
        }
        empty = tp.empty_state(*size)
        reprojections = {
            name: pass_reprojection(
                frame.motion,
                guide,
                prev_guide,
                values,
                self._pass_states[name] if continued else empty,
                signal,
                reprojection,
                params,
            )
            for name, values in signals.items()
        }
        outputs = self._denoise([reprojection, *reprojections.values()], frame, params)
        output, results = outputs[0], dict(zip(reprojections, outputs[1:], strict=True))
        if self.summed:
            parts = reconcile(output, [results[name] for name in self.summed])
            results.update(zip(self.summed, parts, strict=True))
        self._state, self._guide = tp.next_state(reprojection, output), guide
        self._pass_states = {n: tp.next_state(r, results[n]) for n, r in reprojections.items()}
        self.results = results
        return TemporalResult(output, fraction, cut)

    def _reproject(
        self,
        frame: TemporalFrame,
        guide: np.ndarray,
        prev_guide: np.ndarray,
        signal: np.ndarray,
        prev_state: np.ndarray | None,
        params: tp.TemporalParams,
    ) -> np.ndarray:
        if prev_state is None:
            prev_state = tp.empty_state(*frame.color.shape[:2])
        return self.passes.reproject(frame.motion, guide, prev_guide, signal, prev_state, params)

    def _denoise(
        self, reprojections: list[np.ndarray], frame: TemporalFrame, params: Any
    ) -> list[np.ndarray]:
        """Each accumulated image denoised (one sequence) and stabilized against its own
        previous output."""
        beauty = reprojections[0]
        albedo = None if frame.albedo is None else np.ascontiguousarray(beauty[:, :, 3:6])
        normal = None if frame.normal is None else np.ascontiguousarray(beauty[:, :, 6:9])
        images = [(np.ascontiguousarray(r[:, :, 0:3]), albedo, normal) for r in reprojections]
        denoised = self.denoiser.denoise_many(images)
        return [
            self.passes.stabilize(np.asarray(d, np.float32), r, params)
            for d, r in zip(denoised, reprojections, strict=True)
        ]

    def close(self) -> None:
        """Release the passes and the history; idempotent."""
        self._state = self._guide = None
        self._pass_states = {}
        self.passes.close()


class TemporalAovDenoiser:
    """An animation's beauty and its light-path passes denoised in order, with one history
    for all of them (module docstring); the passes of the sum add up to the temporal beauty.

    Args:
        temporal: the `TemporalDenoiser` (its denoiser, parameters and restarts) whose
            session this object replaces with an `AovTemporalSession`.
    """

    def __init__(self, temporal: TemporalDenoiser) -> None:
        self.temporal = temporal
        temporal.session.close()
        self.session = AovTemporalSession(
            temporal.denoiser, temporal_passes_for(temporal.denoiser.frames)
        )
        temporal.session = self.session

    def close(self) -> None:
        self.temporal.close()

    def __enter__(self) -> TemporalAovDenoiser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def denoise(
        self,
        color: Any,
        passes: Mapping[str, Any],
        albedo: Any = None,
        normal: Any = None,
        *,
        motion: Any = None,
        depth: Any = None,
        frame: int | None = None,
        summed: Iterable[str] | None = None,
    ) -> AovResult:
        """The next frame's temporal beauty (as `TemporalDenoiser.denoise`) and passes.

        Args:
            passes: ``{name: [H, W, 3] image}`` (float); a change of the names restarts
                the history.
            summed: the passes whose sum is the beauty (None: all of them); they are
                adjusted to add up to the temporal beauty.

        Raises:
            InvalidArgumentError: a pass of another size or channel count, or an unknown
                ``summed`` name; and the errors of `TemporalDenoiser.denoise`.
        """
        self._set_passes(np.shape(color)[:2], passes, summed)
        return self._run(
            passes,
            lambda: self.temporal.denoise(
                color, albedo, normal, motion=motion, depth=depth, frame=frame
            ),
        )

    def denoise_prepared(
        self, prepared: Any, passes: Mapping[str, Any], summed: Iterable[str] | None = None
    ) -> AovResult:
        """`denoise` of a frame from `TemporalDenoiser.prepare`, with its passes."""
        self._set_passes(prepared.images.color.shape[:2], passes, summed)
        return self._run(passes, lambda: self.temporal.denoise_prepared(prepared))

    def _set_passes(
        self, size: tuple[int, ...], passes: Mapping[str, Any], summed: Iterable[str] | None
    ) -> None:
        """The session's passes of the next frame, checked."""
        if not isinstance(passes, Mapping):
            raise InvalidArgumentError(
                f"the passes are a {type(passes).__name__}; expected a mapping of name to image"
            )
        names = list(passes) if summed is None else list(dict.fromkeys(summed))
        unknown = [n for n in names if n not in passes]
        if unknown:
            raise InvalidArgumentError(
                f"summed names {unknown} are not among the passes; expected some of {list(passes)}"
            )
        images = {}
        for name, value in passes.items():
            image = np.asarray(value, dtype=np.float32)
            if image.shape != (*size, 3):
                raise InvalidArgumentError(
                    f"pass '{name}' is {image.shape}; expected the beauty's {size} x 3 colour"
                )
            images[name] = np.ascontiguousarray(image)
        self.session.pending, self.session.summed = images, names

    def _run(self, passes: Mapping[str, Any], run: Any) -> AovResult:
        try:
            beauty = run()
            results = self.session.results
        finally:
            self.session.pending, self.session.results = {}, {}
        return AovResult(beauty=beauty, passes={n: results[n] for n in passes})
