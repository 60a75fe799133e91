"""Temporal mode over frame files: the motion and depth passes of each frame, its number,
and one `TemporalDenoiser` per denoiser of a run (the command line's ``--temporal``).

A frame's motion pass is found as `oidn_gpu.image.motion` finds it (the renderers' names in
docs/aovs.md, or ``--motion-layer``), its depth pass under `DEPTH_LAYER_NAMES`; the frame
number is the last group of digits in the file name (``shot.0042.exr`` -> 42), so a gap in
the numbering restarts the history.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu import sequence
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.filter import TemporalDenoiser
from oidn_gpu.filter_temporal import PreparedFrame
from oidn_gpu.filter_temporal_aovs import TemporalAovDenoiser
from oidn_gpu.image import aovs, io
from oidn_gpu.image import motion as motion_passes

DEPTH_LAYER_NAMES = aovs.DEPTH_LAYER_NAMES  # one-channel depth layers, tried in order
_NUMBER = re.compile(r"(\d+)(?!.*\d)")


def frame_number(path: Path) -> int | None:
    """The last group of digits in the file name's stem, or None."""
    match = _NUMBER.search(Path(path).stem)
    return int(match.group(1)) if match else None


def find_depth(layers: Any) -> Any:
    """The one-channel depth layer among a file's layers (`DEPTH_LAYER_NAMES`), or None."""
    for name in DEPTH_LAYER_NAMES:
        layer = io.match_layer(layers, name)
        if layer is not None and len(layer.channels) == 1:
            return layer
    return None


def read_depth(path: Path, layers: Any = None) -> np.ndarray | None:
    """The file's depth pass (H x W float32), or None when it has none."""
    layer = find_depth(io.list_layers(path) if layers is None else layers)
    if layer is None:
        return None
    pixels = io.read_layer(path, layer.channels[0]).pixels
    return np.ascontiguousarray(pixels.reshape(pixels.shape[:2]), np.float32)


@dataclass
class _Read:
    """A frame read from its files (`TemporalFrames.load`, or ahead of its turn): its
    loaded images (or the error reading them raised), the seconds reading took, and its
    motion and depth passes as `TemporalDenoiser.prepare` arguments, or the frame
    prepared (staged) ahead, or the error reading or preparing them raised (raised in
    the frame's turn)."""

    job: Any
    frame: Any
    error: Exception | None
    read_s: float
    passes: Any = None
    facts: dict[str, Any] | None = None  # the passes used (`TemporalFrames.report`)


@dataclass
class TemporalFrames:
    """The temporal state of one run: a `TemporalDenoiser` per `oidn_gpu.Denoiser`.

    `load` reads a frame's images and its motion and depth passes with one decode of its
    file. A run that names the next frame (`denoise`'s ``upcoming``) has it read, and
    handed to the session to stage (`TemporalDenoiser.prepare`), before this frame's
    result is waited for; `load` then gives that frame, and its errors are raised in its
    turn, where they are raised when it is read then.

    Attributes:
        params: `TemporalDenoiser` parameters (``history``, ``output_blend``, ...).
        motion_layer: the motion pass's layer, or None to find it by name.
        motion_convention: how the motion pass is read (a key of
            `oidn_gpu.image.motion.CONVENTIONS`), or None for the one its name says.
        ahead_s: the seconds the last `denoise` spent on the next frame (reading it,
            and its GPU work where the session ran it ahead of its turn).
        carried_s: the seconds of the last `denoise`'s frame that were spent in the call
            before (its GPU work run ahead there).
        report: what the last `denoise` used and did, for the log and ``--json``:
            ``mode``, ``motion`` (the layer), ``motion_convention``, ``depth`` (the layer,
            None without one), ``history`` (``'started'``, ``'continued'`` or
            ``'restarted'``), ``restart`` (why, or None) and ``history_fraction`` (the
            share of pixels that kept their history).
    """

    params: dict[str, Any] = field(default_factory=dict)
    motion_layer: str | None = None
    motion_convention: str | None = None
    ahead_s: float = 0.0
    carried_s: float = 0.0
    _carry: float = 0.0  # the next frame's seconds spent in this call
    report: dict[str, Any] = field(default_factory=dict)
    _denoisers: dict[int, TemporalDenoiser] = field(default_factory=dict)
    _read: _Read | None = None  # the frame of the next `denoise`
    aov_results: dict[str, np.ndarray] = field(default_factory=dict)
    _aov_denoisers: dict[int, TemporalAovDenoiser] = field(default_factory=dict)

    def check_file(self, path: Path) -> None:
        """A frame file has the motion pass (checked on the first frame before any is
        denoised, so that a run without one fails once).

        Raises:
            oidn_gpu.image.motion.MotionPassError: no motion pass, or one whose channels
                are not its convention's.
        """
        found = motion_passes.find_motion_pass(
            path, self.motion_layer, convention=self.motion_convention
        )
        if found is None:
            motion_passes.read_motion(path, self.motion_layer)  # raises, naming what it has

    def load(self, job: Any, inputs: Any, *, lightmap: bool = False) -> tuple[Any, float | None]:
        """``job``'s `sequence.LoadedFrame` (its motion and depth passes read too, for
        `denoise`) and the seconds reading it took where it was read ahead (None: read
        now).

        Raises:
            The errors of `sequence.load_frame`, for the frame read ahead too.
        """
        read, self._read = self._read, None
        ahead = read is not None and read.job == job
        if not ahead:
            read = self._read_files(job, inputs, lightmap)
        if read.error is not None:
            self._skipped(job.color, "could not be read")
            raise read.error
        self._read = read
        return read.frame, read.read_s if ahead else None

    def denoise(
        self,
        path: Path,
        frame: Any,
        denoiser: Any,
        *,
        upcoming: Any = None,
        inputs: Any = None,
        lightmap: bool = False,
        aovs: Any = None,
    ) -> tuple[np.ndarray, list[str]]:
        """The temporal result of one loaded frame (`sequence.LoadedFrame`) of ``path``:
        ``(H x W x C float32, messages)``; the messages say where the history restarted
        (other than at the first frame).

        ``aovs``: ``{layer name: H x W x 3 pass}`` whose sum is the beauty (``--aovs-sum``),
        carried through the beauty's history (`oidn_gpu.filter_temporal_aovs`); their results,
        adding up to the beauty's, are in `aov_results` after the call.

        ``upcoming``: the next frame's `sequence.FrameJob`, read with ``inputs`` and
        ``lightmap`` (`sequence.load_frame`) and staged before this frame is denoised.

        Raises:
            oidn_gpu.image.motion.MotionPassError: the file has no motion pass, or one of
                another size.
            InvalidArgumentError: no depth, albedo or normal to reject history by.
        """
        read, self._read = self._read, None
        self.ahead_s = 0.0
        self.carried_s, self._carry = self._carry, 0.0
        mine = read is not None and read.frame is frame
        passes, facts = (read.passes, read.facts) if mine else (None, None)
        temporal = self._denoisers.get(id(denoiser))
        if temporal is None:
            temporal = self._denoisers[id(denoiser)] = TemporalDenoiser(denoiser, **self.params)
        try:
            if isinstance(passes, Exception):
                raise passes
            if passes is None:
                passes, facts = self._passes(path, frame)
            prepared = (
                passes
                if isinstance(passes, PreparedFrame)
                else temporal.prepare(**passes, prefetch=False)
            )
        except motion_passes.MotionPassError:
            self._skipped(path, "has no usable motion pass")
            raise
        except Exception:
            self._skipped(path, "could not be used")
            raise
        # made before the next frame is staged: its session has no stage for the next frame
        with_aovs = self._with_aovs(temporal) if aovs else None
        if upcoming is not None:
            self._read = self._read_ahead(upcoming, inputs, lightmap, frame, temporal)
            self.ahead_s = self._read.read_s
        seen = len(temporal.restarts)
        if with_aovs is not None:
            result = with_aovs.denoise_prepared(prepared, aovs)
            self.aov_results = result.passes
            result = result.beauty
        else:
            result = temporal.denoise_prepared(prepared)
        self._carry = temporal.last_overlap_s if upcoming is not None else 0.0
        self.ahead_s += self._carry
        restarts = temporal.restarts[seen:]
        messages = [f"temporal history restarts: {r.reason}" for r in restarts if r.index > 0]
        history = "continued"
        if restarts:
            history = "started" if restarts[-1].index == 0 else "restarted"
        self.report = {
            "mode": "temporal",
            **(facts or {}),
            "history": history,
            "restart": restarts[-1].reason if restarts else None,
            "history_fraction": round(float(temporal.history_fraction), 4),
        }
        return result[:, :, : frame.color.pixels.shape[2]], messages

    def _skipped(self, path: Path, why: str) -> None:
        """A frame that is not denoised: the next one starts a new history, saying why
        (a missing motion pass, an unreadable file)."""
        for temporal in self._denoisers.values():
            temporal.reset(f"the frame before, '{Path(path).name}', {why} and was not denoised")

    def _with_aovs(self, temporal: TemporalDenoiser) -> TemporalAovDenoiser:
        """The `TemporalAovDenoiser` around ``temporal``, made on its first frame with
        passes."""
        made = self._aov_denoisers.get(id(temporal))
        if made is None:
            made = self._aov_denoisers[id(temporal)] = TemporalAovDenoiser(temporal)
        return made

    def _read_files(self, job: Any, inputs: Any, lightmap: bool) -> _Read:
        """The frame's images and passes, from one decode of each file; the errors kept."""
        started = time.perf_counter()
        with io.one_decode_per_file():
            try:
                frame = sequence.load_frame(job, inputs, lightmap=lightmap)
            except Exception as err:  # raised in the frame's turn (`load`)
                return _Read(job, None, err, time.perf_counter() - started)
            facts = None
            try:
                passes, facts = self._passes(job.color, frame)
            except Exception as err:  # raised in the frame's turn (`denoise`)
                passes = err
        return _Read(job, frame, None, time.perf_counter() - started, passes, facts)

    def _read_ahead(
        self, job: Any, inputs: Any, lightmap: bool, current: Any, temporal: TemporalDenoiser
    ) -> _Read:
        """The next frame read, and prepared and staged where it has the current frame's
        mode (the same denoiser)."""
        started = time.perf_counter()
        read = self._read_files(job, inputs, lightmap)
        same_mode = read.error is None and sequence.resolve_mode(
            inputs, read.frame.color
        ) == sequence.resolve_mode(inputs, current.color)
        setup_s = 0.0
        if same_mode and isinstance(read.passes, dict):
            first = not temporal.restarts  # staging plans the network the current frame uses
            staging = time.perf_counter()
            try:
                read.passes = temporal.prepare(**read.passes)
            except Exception as err:  # raised in the frame's turn (`denoise`)
                read.passes = err
            setup_s = time.perf_counter() - staging if first else 0.0
        read.read_s = time.perf_counter() - started - setup_s
        return read

    def _passes(self, path: Path, frame: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """The `TemporalDenoiser.prepare` arguments of a loaded frame (its images, and
        its motion and depth passes read from ``path``) and the layers they came from."""
        color = frame.color.pixels
        height, width = color.shape[:2]
        motion = motion_passes.read_motion(
            path, self.motion_layer, convention=self.motion_convention, size=(height, width)
        )
        vectors = np.where(motion.invalid[..., None], np.float32(np.nan), motion.backward)
        depth_layer = find_depth(frame.layers)
        depth = read_depth(path, frame.layers)
        if depth is not None and depth.shape != (height, width):
            raise InvalidArgumentError(
                f"the depth pass of '{path}' is {depth.shape[1]}x{depth.shape[0]}; expected "
                f"the color's size {width}x{height}"
            )
        rgb = color[:, :, :3] if color.shape[2] >= 3 else np.repeat(color[:, :, :1], 3, axis=2)
        facts = {
            "motion": motion.layer,
            "motion_convention": motion.convention.name,
            "depth": None if depth_layer is None else depth_layer.name,
        }
        return {
            "color": rgb,
            "albedo": frame.albedo,
            "normal": frame.normal,
            "motion": vectors,
            "depth": depth,
            "frame": frame_number(path),
        }, facts

    def warm_up(self, job: Any, pool: Any, options: Any) -> dict[str, Any]:
        """Denoise one frame (a `sequence.FrameJob`, with `sequence.SequenceOptions`) for
        its history only: nothing is written. Returns its `report`, ``history`` saying
        ``'warmed up'`` (or ``'warm-up restarted'`` where the history restarted there)."""
        frame, _ = self.load(job, options.inputs, lightmap=pool.config.lightmap)
        hdr, srgb = sequence.resolve_mode(options.inputs, frame.color)
        passes = sequence.read_summed_passes(job, frame, options.output.aovs_sum)
        aovs = {name: image.pixels[:, :, :3] for name, image in passes.items()}
        self.denoise(job.color, frame, pool.get(hdr, srgb), aovs=aovs)
        history = self.report["history"]
        self.report["history"] = "warmed up" if history == "continued" else f"warm-up {history}"
        return dict(self.report)

    def close(self) -> None:
        """Forget every history and release the passes (the denoisers belong to the
        caller); the object can be used again."""
        for temporal in self._denoisers.values():
            temporal.close()
        self._denoisers.clear()
        self._aov_denoisers.clear()
        self._read = None
