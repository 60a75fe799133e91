"""`TemporalDenoiser`: an animation's frames denoised in order, with history.

Per frame (`oidn_gpu.temporal.passes` describes the two passes and their parameters):

1. the previous frames' accumulated noisy color, albedo and normal are reprojected into
   this frame by the motion vectors, rejected where depth, normal or albedo disagree or the
   source was off screen, and blended with this frame's over at most ``history`` frames;
2. the accumulated images are denoised by the wrapped `oidn_gpu.Denoiser` (the network
   sees more samples);
3. the result is blended with the reprojected previous output, clamped to its
   neighbourhood in the denoised frame.

The history restarts (and the ``oidn_gpu.temporal`` logger says why, at INFO level) at
the first frame, at a gap or step back in the frame numbers, at a change of size or of the
images given, and at a camera cut: a frame where more than ``cut_threshold`` of the pixels
rejected their history.

Each frame goes to a `TemporalSession`: the backend's (`Backend.temporal_session`: the
cuda backend keeps the history on its GPU and denoises there), else a
`oidn_gpu.backends.host_temporal.HostTemporalSession` running the backend's passes
(`Backend.temporal_passes`; NumPy for the reference backend and wherever a backend has
none) on host arrays.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from oidn_gpu.backends.base import TemporalFrame
from oidn_gpu.backends.host_temporal import HostTemporalSession, temporal_session_for
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.filter_temporal_info import TEMPORAL_OPTIONS, TemporalInfo, check_options
from oidn_gpu.image import arrays
from oidn_gpu.image import motion as motion_passes
from oidn_gpu.temporal import passes as tp

_LOG = logging.getLogger("oidn_gpu.temporal")
FRAME_KEYS = ("color", "albedo", "normal", "motion", "depth", "frame")
_END = object()


@dataclass(frozen=True)
class TemporalRestart:
    """Where and why the history restarted (`TemporalDenoiser.restarts`)."""

    index: int  # position of the frame in the calls since the denoiser was made
    frame: int | None  # the frame number given, if any
    reason: str


@dataclass
class _History:
    """What the session's stored history belongs to."""

    frame: int | None
    signature: tuple[Any, ...]


class TemporalDenoiser:
    """Denoises the frames of an animation in order, with history (temporal mode);
    ``oidn_gpu.Denoiser(temporal=True, ...)`` makes one.

    Args:
        denoiser: the `oidn_gpu.Denoiser` that denoises each accumulated frame; None
            makes one from ``options`` (and closes it in `close`).
        history: frames of noisy input averaged at most (`TemporalParams`).
        output_blend, clamp, clamp_radius, clamp_gamma, depth_tolerance, normal_tolerance,
            albedo_tolerance, cut_threshold, subpixel_tolerance,
            firefly_ratio, change_sigmas, change_output_history, disocclusion_margin: see
            `oidn_gpu.temporal.passes.TemporalParams`.
        motion_convention: how each frame's ``motion`` is written: ``"pixels"`` (the
            default: ``[H, W, 2]`` backward motion in pixels, y down), or a renderer's pass
            as it wrote it, ``"cycles"`` (``[H, W, 4]``), ``"arnold"``, ``"karma"``,
            ``"vray"``, ``"redshift"`` or ``"renderman"`` (docs/aovs.md, Motion vectors;
            `oidn_gpu.image.motion.CONVENTIONS`), converted on the host.
        **options: `oidn_gpu.Denoiser` options when ``denoiser`` is None (``hdr=True``,
            ``backend="wgpu"``, ...); an unknown name is an error naming the closest
            valid one.

    Each frame needs its ``motion`` (by default ``[H, W, 2]`` float, backward motion in
    pixels: pixel ``(x, y)`` was at ``(x + mx, y + my)`` in the previous frame; see
    ``motion_convention``) and optionally ``depth`` (``[H, W]``, the renderer's Z or
    distance) to tell disocclusions: with depth, depth alone decides
    (renderers' albedo and normal are as noisy as the color and would reject history at
    random); without it, the albedo and normal decide (``albedo_tolerance``,
    ``normal_tolerance``), which rejects more and stabilizes less. Non-finite motion, or
    motion that leaves the screen, rejects the history there.

    Attributes:
        session: the `TemporalSession` that runs each frame and holds the history.
        restarts: the `TemporalRestart` of each history restart so far.
        history_fraction: the share of the last frame's pixels that kept their history.
        last_overlap_s: seconds of the last frame's call that were the next frame's work
            (where the session queues a staged frame's GPU work behind this one's, as the
            wgpu session's ``last_ahead_s``): that frame's time, not this one's.
    """

    def __init__(
        self,
        denoiser: Any = None,
        *,
        history: int = tp.TemporalParams.history,
        output_blend: float = tp.TemporalParams.output_blend,
        clamp: str = tp.TemporalParams.clamp,
        clamp_radius: int = tp.TemporalParams.clamp_radius,
        clamp_gamma: float = tp.TemporalParams.clamp_gamma,
        depth_tolerance: float = tp.TemporalParams.depth_tolerance,
        normal_tolerance: float = tp.TemporalParams.normal_tolerance,
        albedo_tolerance: float = tp.TemporalParams.albedo_tolerance,
        cut_threshold: float = tp.TemporalParams.cut_threshold,
        subpixel_tolerance: float = tp.TemporalParams.subpixel_tolerance,
        firefly_ratio: float = tp.TemporalParams.firefly_ratio,
        change_sigmas: float = tp.TemporalParams.change_sigmas,
        change_output_history: float = tp.TemporalParams.change_output_history,
        disocclusion_margin: int = tp.TemporalParams.disocclusion_margin,
        motion_convention: str = "pixels",
        **options: Any,
    ) -> None:
        check_options(options)
        try:
            self.motion_convention = motion_passes.get_convention(motion_convention)
        except motion_passes.MotionPassError as err:
            raise InvalidArgumentError(str(err)) from None
        self.params = tp.TemporalParams(
            history=history,
            output_blend=output_blend,
            clamp=clamp,
            clamp_radius=clamp_radius,
            clamp_gamma=clamp_gamma,
            depth_tolerance=depth_tolerance,
            normal_tolerance=normal_tolerance,
            albedo_tolerance=albedo_tolerance,
            cut_threshold=cut_threshold,
            subpixel_tolerance=subpixel_tolerance,
            firefly_ratio=firefly_ratio,
            change_sigmas=change_sigmas,
            change_output_history=change_output_history,
            disocclusion_margin=disocclusion_margin,
        )
        if denoiser is not None and options:
            raise InvalidArgumentError(
                f"denoiser options {sorted(options)} were given with a denoiser; give one or "
                "the other"
            )
        self._owns_denoiser = denoiser is None
        if denoiser is None:
            denoiser = self._make_denoiser(options)
        self.denoiser = denoiser
        self.session = temporal_session_for(denoiser.frames)
        filter_options = getattr(denoiser, "options", None)
        # the facade's rule: integer (LDR) colors are refused for HDR denoising
        self._hdr = bool(
            filter_options is not None
            and (filter_options.hdr or filter_options.filter_type == "RTLightmap")
        )
        self.restarts: list[TemporalRestart] = []
        self.history_fraction: float = 0.0  # of the last frame
        self.last_overlap_s = 0.0
        self._history: _History | None = None
        self._index = 0
        self._closed = False
        self._reset_reason: str | None = None
        self._last_signature: tuple[Any, ...] | None = None

    def info(self) -> TemporalInfo:
        """The temporal mode's state: backend, where the history lives, the motion
        convention, the parameters, frames and history so far, the restarts and why, what
        rejected history in the last frame (depth, or the albedo and normal without it),
        and the wrapped denoiser's `oidn_gpu.Denoiser.info`."""
        given = None if self._last_signature is None else self._last_signature[3]
        guides = depth = None
        if given is not None:
            depth = given[2]
            named = [n for n, on in (("albedo", given[0]), ("normal", given[1])) if on]
            guides = "depth" if depth else " and ".join(named)
        first = self.restarts[-1].index if self.restarts else self._index
        params = {name: getattr(self.params, name) for name in tp.TemporalParams.names}
        inner = getattr(self.denoiser, "info", None)
        return TemporalInfo(
            mode="temporal",
            backend=str(getattr(self.denoiser, "backend", "")),
            session="host" if isinstance(self.session, HostTemporalSession) else "device",
            motion_convention=self.motion_convention.name,
            params=params,
            frames=self._index,
            history_frames=0 if self._history is None else self._index - first,
            history_fraction=self.history_fraction,
            guides=guides,
            depth=depth,
            restarts=tuple(self.restarts),
            denoiser=inner() if callable(inner) else None,
        )

    def _make_denoiser(self, options: dict[str, Any]) -> Any:
        """The denoiser of ``options`` when none was given (`oidn_gpu.TemporalDenoiser`
        makes an `oidn_gpu.Denoiser`)."""
        raise InvalidArgumentError("a temporal denoiser needs the denoiser of its frames")

    def close(self) -> None:
        """Release the session (and the denoiser when this object made it); idempotent."""
        if self._closed:
            return
        self._closed = True
        self.session.close()
        if self._owns_denoiser:
            self.denoiser.close()

    def __enter__(self) -> TemporalDenoiser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reset(self, reason: str | None = None) -> None:
        """Forget the history: the next frame starts a new one (``reason``: why, for
        `restarts` and the log)."""
        self._history = None
        self._reset_reason = reason

    def denoise_many(self, frames: Iterable[Mapping[str, Any]]) -> Iterator[np.ndarray]:
        """`denoise` of each frame in order: mappings with the keys ``color``, ``albedo``,
        ``normal``, ``motion``, ``depth`` and ``frame`` (its number, to find gaps).

        Where the session stages frames ahead (the cuda backend's), the next frame is
        read from ``frames`` and its images uploaded while this one is denoised."""
        prefetch = getattr(self.session, "prefetch", None)
        items = iter(frames)
        ahead = self._prepared(items)
        while ahead is not None:
            current, ahead = ahead, self._prepared(items) if prefetch is not None else None
            if prefetch is not None and isinstance(ahead, tuple) and not self._closed:
                prefetch(ahead[1])
            if isinstance(current, BaseException):
                raise current
            yield self._denoise_images(*current)
            if prefetch is None:
                ahead = self._prepared(items)

    def _prepared(self, items: Iterator[Any]) -> Any:
        """The next frame's checked images and session frame, the error that checking it
        raised (raised in its turn), or None after the last."""
        item = next(items, _END)
        if item is _END:
            return None
        try:
            if not isinstance(item, Mapping):
                raise InvalidArgumentError(
                    f"a temporal frame is a {type(item).__name__}; expected a mapping with "
                    f"the keys {', '.join(FRAME_KEYS)}"
                )
            unknown = set(item) - set(FRAME_KEYS)
            if unknown:
                raise InvalidArgumentError(
                    f"unknown key(s) {sorted(unknown)} in a temporal frame; expected "
                    f"{', '.join(FRAME_KEYS)}"
                )
            images = _FrameImages.of(
                *(item.get(key) for key in FRAME_KEYS),
                hdr=self._hdr,
                convention=self.motion_convention,
            )
        except (InvalidArgumentError, InvalidOperationError) as err:
            return err
        return images, images.temporal_frame()

    def denoise(
        self,
        color: Any,
        albedo: Any = None,
        normal: Any = None,
        *,
        motion: Any = None,
        depth: Any = None,
        frame: int | None = None,
    ) -> np.ndarray:
        """The temporal result of the next frame: ``[H, W, 3]`` float32 (``[H, W, 4]`` with
        the color's alpha passed through).

        The images follow `oidn_gpu.Denoiser.denoise`'s rules: NumPy, torch, PIL or
        array-API images; uint8 and uint16 are normalized LDR values (refused for an HDR
        denoiser), and an integer color gives the result in its dtype.

        Raises:
            InvalidArgumentError: no motion, or images of different sizes or shapes.
            The errors of `oidn_gpu.Denoiser.denoise`.
        """
        images = self._checked(color, albedo, normal, motion, depth, frame)
        return self._denoise_images(images, images.temporal_frame())

    def prepare(
        self,
        color: Any,
        albedo: Any = None,
        normal: Any = None,
        *,
        motion: Any = None,
        depth: Any = None,
        frame: int | None = None,
        prefetch: bool = True,
    ) -> PreparedFrame:
        """A later frame's images checked (raising what `denoise` raises for them) and,
        with ``prefetch`` where the session stages frames ahead (the cuda backend's),
        handed to the session to stage while the current frame is denoised; pass the
        result to `denoise_prepared` in its turn (the same result as `denoise`)."""
        images = self._checked(color, albedo, normal, motion, depth, frame)
        prepared = PreparedFrame(images, images.temporal_frame())
        stage = getattr(self.session, "prefetch", None)
        if prefetch and stage is not None:
            stage(prepared.session_frame)
        return prepared

    def _checked(
        self, color: Any, albedo: Any, normal: Any, motion: Any, depth: Any, frame: Any
    ) -> _FrameImages:
        """One frame's images checked for this (open) denoiser."""
        if self._closed:
            raise InvalidOperationError("the temporal denoiser is closed")
        return _FrameImages.of(
            color,
            albedo,
            normal,
            motion,
            depth,
            frame,
            hdr=self._hdr,
            convention=self.motion_convention,
        )

    def denoise_prepared(self, prepared: PreparedFrame) -> np.ndarray:
        """`denoise` of a frame from `prepare`: its images, staged already where the
        session prefetched them."""
        return self._denoise_images(prepared.images, prepared.session_frame)

    def _denoise_images(self, images: _FrameImages, temporal_frame: TemporalFrame) -> np.ndarray:
        if self._closed:
            raise InvalidOperationError("the temporal denoiser is closed")
        # With depth, depth alone decides: renderers' albedo and normal are as noisy as
        # the color and would reject history at random (tests/data/sequences).
        with_depth = images.depth is not None
        params = self.params.with_guides(
            depth=with_depth,
            normal=images.normal is not None and not with_depth,
            albedo=images.albedo is not None and not with_depth,
        )
        history = self._continued(images)
        result = self.session.frame(temporal_frame, params, restart=history is None)
        self.last_overlap_s = float(getattr(self.session, "last_ahead_s", 0.0))
        if result.cut:
            self._restart(
                images.frame,
                f"more than {100 * params.cut_threshold:g}% of the pixels rejected their history "
                f"(cut_threshold={params.cut_threshold:g}): a camera cut",
            )
        self.history_fraction = result.history_fraction
        output = result.output
        self._history = _History(images.frame, images.signature)
        self._last_signature = images.signature
        self._index += 1
        if images.alpha is not None:
            output = np.concatenate([output, images.alpha[:, :, None]], axis=2)
        if images.restore is not None:  # an integer color: the result in its dtype
            output = replace(images.restore, shape=output.shape).pixels(output)
        return output

    def _continued(self, images: _FrameImages) -> _History | None:
        """The history this frame continues, or None (a restart, logged with its reason)."""
        history = self._history
        if history is None:
            reason, self._reset_reason = self._reset_reason, None
            self._restart(
                images.frame,
                reason or ("the first frame" if not self._index else "reset() was called"),
            )
            return None
        if history.signature != images.signature:
            before, now = history.signature, images.signature
            what = (
                f"the size changed from {before[1]}x{before[0]} to {now[1]}x{now[0]}"
                if before[:2] != now[:2]
                else "the images given changed (albedo, normal or depth)"
            )
            self._restart(images.frame, what)
            return None
        if (
            images.frame is not None
            and history.frame is not None
            and images.frame != history.frame + 1
        ):
            kind = "a gap in the numbering" if images.frame > history.frame else "out of order"
            self._restart(
                images.frame, f"frame {images.frame} follows frame {history.frame} ({kind})"
            )
            return None
        return history

    def _restart(self, frame: int | None, reason: str) -> None:
        self.restarts.append(TemporalRestart(self._index, frame, reason))
        named = f"frame {frame}" if frame is not None else f"frame index {self._index}"
        _LOG.info("temporal history restarts at %s: %s", named, reason)
        self._history = None


@dataclass(frozen=True)
class PreparedFrame:
    """A frame checked by `TemporalDenoiser.prepare`, for `TemporalDenoiser.denoise_prepared`."""

    images: _FrameImages
    session_frame: TemporalFrame


@dataclass(frozen=True)
class _FrameImages:
    """One frame's images as float32 host arrays, checked."""

    color: np.ndarray
    alpha: np.ndarray | None
    albedo: np.ndarray | None
    normal: np.ndarray | None
    motion: np.ndarray
    depth: np.ndarray | None
    frame: int | None
    restore: arrays.Restore | None = None  # an integer color's dtype, for the result

    @property
    def size(self) -> tuple[int, int]:
        return self.color.shape[0], self.color.shape[1]

    def temporal_frame(self) -> TemporalFrame:
        """The session's frame: C-contiguous float32, color, albedo and normal in 3
        channels."""
        return TemporalFrame(
            _rgb(self.color),
            None if self.albedo is None else _rgb(self.albedo),
            None if self.normal is None else _rgb(self.normal),
            np.ascontiguousarray(self.motion),
            None if self.depth is None else np.ascontiguousarray(self.depth),
        )

    @property
    def signature(self) -> tuple[Any, ...]:
        given = tuple(a is not None for a in (self.albedo, self.normal, self.depth))
        return (*self.size, self.color.shape[2], given)

    @classmethod
    def of(
        cls,
        color: Any,
        albedo: Any,
        normal: Any,
        motion: Any,
        depth: Any,
        frame: Any,
        *,
        hdr: bool,
        convention: Any = None,
    ) -> _FrameImages:
        if color is None:
            raise InvalidArgumentError("temporal mode needs a color image per frame")
        # the facade's image rules: types, dtypes, integers as normalized LDR values
        # (integer normals in [-1, 1]), no integer color for HDR
        call = arrays.as_call(color, albedo, normal, None, hdr=hdr)
        color, albedo, normal = call.color, call.albedo, call.normal
        restore = call.restore if call.restore is not None and call.restore.normalized else None
        color = _image("color", color, (1, 3, 4))
        height, width = color.shape[:2]
        alpha = None
        if color.shape[2] == 4:
            color, alpha = color[:, :, :3], color[:, :, 3]
        if motion is None:
            raise InvalidArgumentError(
                "temporal mode needs a motion image per frame (motion=, [H, W, 2] backward "
                "motion in pixels); none was given"
            )
        motion = _motion(motion, convention)
        depth = None if depth is None else _image("depth", depth, (1,))[:, :, 0]
        albedo = None if albedo is None else _image("albedo", albedo, (1, 3))
        normal = None if normal is None else _image("normal", normal, (1, 3))
        for name, image in (
            ("motion", motion),
            ("depth", depth),
            ("albedo", albedo),
            ("normal", normal),
        ):
            if image is not None and image.shape[:2] != (height, width):
                raise InvalidArgumentError(
                    f"the {name} image is {image.shape[1]}x{image.shape[0]}; expected the "
                    f"color's size {width}x{height}"
                )
        if depth is None and albedo is None and normal is None:
            raise InvalidArgumentError(
                "temporal mode needs depth, albedo or normal beside the motion, to reject "
                "history where something was hidden before; none was given"
            )
        if frame is not None and (
            isinstance(frame, bool) or not isinstance(frame, (int, np.integer))
        ):
            raise InvalidArgumentError(f"frame is {frame!r}; expected an integer frame number")
        return cls(
            color,
            alpha,
            albedo,
            normal,
            motion,
            depth,
            None if frame is None else int(frame),
            restore,
        )


def _image(name: str, image: Any, channels: tuple[int, ...]) -> np.ndarray:
    arr = np.asarray(image)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or arr.shape[2] not in channels or arr.dtype.kind not in "fiu":
        shapes = " or ".join(f"HxWx{c}" for c in channels)
        raise InvalidArgumentError(
            f"the {name} image has shape {np.asarray(image).shape} and dtype "
            f"{np.asarray(image).dtype}; expected a float {shapes} array"
            + (" (HxW allowed)" if 1 in channels else "")
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InvalidArgumentError(f"the {name} image is empty ({arr.shape[1]}x{arr.shape[0]})")
    return np.asarray(arr, np.float32)


def _motion(motion: Any, convention: Any) -> np.ndarray:
    """A frame's motion as ``[H, W, 2]`` backward pixels (NaN where the pass is not
    finite), from ``convention``'s layout (None or ``pixels``: already so)."""
    if convention is None or convention.name == "pixels":
        return _image("motion", motion, (2,))
    values = _image(f"motion (motion_convention='{convention.name}')", motion, convention.channels)
    converted = motion_passes.convert(values, convention, layer="(motion=)")
    return np.where(converted.invalid[..., None], np.float32(np.nan), converted.backward)


def _rgb(image: np.ndarray) -> np.ndarray:
    """``[H, W, 3]`` C-contiguous (one channel repeated)."""
    if image.shape[2] == 1:
        image = np.broadcast_to(image, (*image.shape[:2], 3))
    return np.ascontiguousarray(image)


def temporal_requested(temporal: Any, options: dict[str, Any]) -> bool:
    """Whether ``Denoiser(temporal=..., **options)`` makes a `TemporalDenoiser` of the
    options (``temporal=True``) rather than an ordinary `oidn_gpu.Denoiser`."""
    if not isinstance(temporal, (bool, np.bool_)):
        raise InvalidArgumentError(f"temporal is {temporal!r}; expected True or False")
    given = sorted(set(options) & set(TEMPORAL_OPTIONS))
    if not temporal and given:
        raise InvalidArgumentError(
            f"{', '.join(given)} {'is a' if len(given) == 1 else 'are'} temporal mode "
            f"parameter{'s' * (len(given) > 1)}: add temporal=True (an animation's "
            "frames denoised in order with history)"
        )
    return bool(temporal)
