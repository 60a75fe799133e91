"""The single-process frame loop: `run_sequence` denoises a list of frames with one
`DenoiserPool`, reports progress (a tqdm bar, else one line per frame) and sums up."""

from __future__ import annotations

import logging
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from oidn_gpu.config import DenoiserConfig
from oidn_gpu.errors import MissingDependencyError, OIDNGPUError
from oidn_gpu.image import complete
from oidn_gpu.sequence.frame import DenoiserPool, FrameOutcome, denoise_frame
from oidn_gpu.sequence.logs import report
from oidn_gpu.sequence.options import FrameJob, SequenceOptions
from oidn_gpu.sequence.summary import FrameResult, SequenceSummary

_LOG = logging.getLogger("oidn_gpu.sequence")


class ProgressBar:
    """A tqdm bar over frames that advances fractionally per tile; silent when disabled."""

    def __init__(self, total: int, enabled: bool | None, stream: TextIO) -> None:
        self._bar = None
        if enabled is False or total == 0:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._bar = _whole_frames_bar(tqdm)(
            total=total,
            unit="frame",
            file=stream,
            disable=None if enabled is None else not enabled,
            dynamic_ncols=True,
            bar_format="{l_bar}{bar}| {frames_done}/{total} frames [{elapsed}<{remaining}]",
        )
        self._base = 0

    @property
    def shown(self) -> bool:
        """Whether a bar is drawn (False when disabled or stderr is not a terminal)."""
        return self._bar is not None and not self._bar.disable

    def frame_callback(self, index: int, name: str) -> Callable[[float], bool]:
        if self._bar is not None:
            self._bar.set_description_str(name, refresh=True)  # this frame's name, now

        def report(fraction: float) -> bool:
            if self._bar is not None:
                self._bar.n = index + min(max(float(fraction), 0.0), 1.0)
                self._bar.update(0)
            return True

        return report

    def finish_frame(self, index: int) -> None:
        if self._bar is not None:
            self._bar.n = index + 1
            self._bar.refresh()

    def write(self, text: str, stream: TextIO) -> None:
        report(_LOG, text)
        if self._bar is not None:
            self._bar.write(text, file=stream)
        else:
            print(text, file=stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _whole_frames_bar(tqdm: type) -> type:
    """A tqdm bar whose count is whole frames finished (``3/8 frames``) while the bar
    itself also moves within a frame, tile by tile."""

    class WholeFramesBar(tqdm):  # type: ignore[misc, valid-type]
        @property
        def format_dict(self) -> dict[str, Any]:
            values = super().format_dict
            values["frames_done"] = int(values["n"])
            return values

    return WholeFramesBar


def run_sequence(
    jobs: Sequence[FrameJob],
    config: DenoiserConfig,
    options: SequenceOptions | None = None,
    *,
    stream: TextIO | None = None,
    temporal: Any = None,
    on_frame: Callable[[FrameResult], None] | None = None,
) -> SequenceSummary:
    """Denoise every job; one failing frame does not stop the others.

    Args:
        jobs: the frames, in order.
        config: the denoiser's options (hdr/srgb are set per frame from
            ``options.inputs.mode``).
        options: how the run reads, writes and reports (`SequenceOptions`).
        stream: where messages go (stderr).
        temporal: an `oidn_gpu.sequence.temporal_frames.TemporalFrames`: temporal mode (see
            `denoise_frame`); the caller closes it.
        on_frame: called with each frame's result as it comes (done, skipped or failed).

    Where no progress bar is drawn (``show_progress`` False, or None and stderr not a
    terminal) and not ``quiet``, every frame gets one line: ``frame 2/3 in.exr: color
    'ViewLayer.Noisy Image', albedo ..., normal ...; hdr; 1.20 s -> out.exr``. A
    missing albedo or normal is warned about once per run.

    Returns:
        The per-frame results; ``interrupted`` is set if KeyboardInterrupt stopped the
        run (the exception is re-raised after the summary is filled in).

    Raises:
        UnsupportedDeviceError: the backend cannot run on this machine (checked once,
            before any frame: `backends.check_backend`).
        KeyboardInterrupt: after closing the denoisers and the progress bar; no
            partial output is left behind (outputs are written atomically).
    """
    options = SequenceOptions() if options is None else options
    if jobs:
        config.check()
    stream = sys.stderr if stream is None else stream
    summary = SequenceSummary()
    progress = ProgressBar(len(jobs), False if options.quiet else options.show_progress, stream)
    run = _Run(DenoiserPool(config), options, progress, stream, len(jobs))
    run.temporal = temporal
    if temporal is not None and options.skip_existing:
        run.plan_resume(jobs)
    start = time.perf_counter()
    try:
        for index, job in enumerate(jobs):
            try:
                result = run.frame(index, job, _upcoming(jobs, index, options, temporal))
            except KeyboardInterrupt:
                summary.interrupted = True
                raise
            summary.results.append(result)
            if on_frame is not None:
                on_frame(result)
            if result.status == "failed" and run.fatal:
                break  # every other frame would fail the same way
            progress.finish_frame(index)
    finally:
        summary.elapsed_s = time.perf_counter() - start
        progress.close()
        run.pool.close()
    return summary


def _upcoming(
    jobs: Sequence[FrameJob], index: int, options: SequenceOptions, temporal: Any
) -> FrameJob | None:
    """The frame a temporal run reads ahead while frame ``index`` is denoised: the next
    one, unless it may be skipped (``skip_existing`` and its output exists)."""
    if temporal is None or index + 1 >= len(jobs):
        return None
    upcoming = jobs[index + 1]
    if options.skip_existing and upcoming.output.exists():
        return None
    return upcoming


class _Run:
    """The frames of one `run_sequence`: each denoised (or skipped) and reported."""

    def __init__(
        self,
        pool: DenoiserPool,
        options: SequenceOptions,
        progress: ProgressBar,
        stream: TextIO,
        total: int,
    ) -> None:
        self.pool = pool
        self.options = options
        self.progress = progress
        self.stream = stream
        self.total = total
        self.log_frames = options.verbose or (not options.quiet and not progress.shown)
        self.noted: set[str] = set()
        self.fatal = False  # a failure every other frame would repeat (a missing module)
        self.temporal: Any = None  # TemporalFrames of a temporal run
        self.reasons: list[str | None] | None = None  # why each output is incomplete
        self.history: set[int] = set()  # complete frames a later missing frame builds on

    def plan_resume(self, jobs: Sequence[FrameJob]) -> None:
        """A temporal run with ``skip_existing``: which complete frames are denoised again,
        unwritten, for the history of a missing frame after them (every complete frame
        before the last missing one), so that the run writes what an uninterrupted run
        writes."""
        self.reasons = [incomplete_reason(job) for job in jobs]
        missing = [i for i, reason in enumerate(self.reasons) if reason is not None]
        if not missing:
            return
        self.history = {i for i in range(missing[-1]) if self.reasons[i] is None}
        if self.history and not self.options.quiet:
            self.say(
                f"temporal: {len(self.history)} complete frame(s) before a missing one are "
                "denoised again for their history (not rewritten)"
            )

    def say(self, text: str) -> None:
        self.progress.write(text, self.stream)

    def frame(self, index: int, job: FrameJob, upcoming: FrameJob | None = None) -> FrameResult:
        """Denoise (or skip) one frame and say what happened (``upcoming``: the next frame
        of a temporal run, read ahead: `denoise_frame`)."""
        options = self.options
        if options.skip_existing:
            reason = incomplete_reason(job) if self.reasons is None else self.reasons[index]
            if reason is None and index in self.history:
                return self._history_only(index, job)
            if reason is None:
                if options.verbose:
                    self.say(f"skipped {job.color}: '{job.output}' is complete")
                return FrameResult(job, "skipped")
            if options.verbose and job.output.exists():
                self.say(f"denoising {job.color} again: {reason}")
        frame_start = time.perf_counter()
        callback = self.progress.frame_callback(index, job.color.name)
        warned: list[str] = []

        def warn(text: str) -> None:
            warned.append(text)
            self.say(f"warning: {job.color}: {text}")

        try:
            outcome = denoise_frame(
                job,
                self.pool,
                options,
                progress=callback,
                warn=warn,
                temporal=self.temporal,
                upcoming=upcoming,
            )
        except Exception as err:
            elapsed = time.perf_counter() - frame_start
            self.say(f"error: {job.color}: {describe_error(err)}")
            if options.verbose:
                self.say(traceback.format_exc().rstrip())
            self.fatal = isinstance(err, MissingDependencyError)
            return FrameResult(job, "failed", elapsed, describe_error(err), warnings=tuple(warned))
        elapsed = time.perf_counter() - frame_start - outcome.others_s
        self._report(index, job, outcome, elapsed)
        return FrameResult(
            job,
            "done",
            elapsed,
            used=outcome.used,
            layers=outcome.layers,
            nonfinite_pixels=outcome.nonfinite_pixels,
            warnings=tuple(warned),
            stages=dict(outcome.stages),
        )

    def _history_only(self, index: int, job: FrameJob) -> FrameResult:
        """A complete frame of a resumed temporal run: denoised for the history of the
        frames after it, its outputs left as they are."""
        start = time.perf_counter()
        if self.options.verbose:
            self.say(f"skipped {job.color}: '{job.output}' is complete (read for the history)")
        try:
            report = self.temporal.warm_up(job, self.pool, self.options)
        except Exception as err:
            self.say(f"error: {job.color}: history: {describe_error(err)}")
            return FrameResult(
                job, "failed", time.perf_counter() - start, f"history: {describe_error(err)}"
            )
        if self.log_frames:
            self.say(
                f"frame {index + 1}/{self.total} {job.color}: complete, denoised again for the "
                f"history ({report['history']}); {time.perf_counter() - start:.2f} s"
            )
        return FrameResult(job, "skipped", time.perf_counter() - start, layers={"temporal": report})

    def _report(self, index: int, job: FrameJob, outcome: FrameOutcome, elapsed: float) -> None:
        """A frame's notes (each kind once per run) and its log line."""
        for note in outcome.notes:
            if note.kind not in self.noted and not self.options.quiet:
                self.noted.add(note.kind)
                self.say(f"warning: {note.text}")
        if self.log_frames:
            self.say(
                f"frame {index + 1}/{self.total} {job.color}: {outcome.used}; "
                f"{elapsed:.2f} s -> {job.output}"
            )


def incomplete_reason(job: FrameJob) -> str | None:
    """Why ``job``'s output or preview is not complete, or None (`image.complete`)."""
    return complete.incomplete_reason(job.color, job.output, job.side_by_side)


def output_is_complete(job: FrameJob) -> bool:
    """Whether ``job``'s output (every part) and preview exist, decode and have the frame's
    sizes: what ``skip_existing`` skips a frame by, here and on the farm."""
    return incomplete_reason(job) is None


def describe_error(err: BaseException) -> str:
    """A frame's error in one line: the message, an OS error's reason, or "internal error"
    for what is a bug rather than a bad file."""
    text = str(err).strip()
    if isinstance(err, OSError) and not isinstance(err, OIDNGPUError) and err.strerror:
        name = f" '{err.filename}'" if err.filename else ""
        text = f"{err.strerror.lower()}{name}"
    if not isinstance(err, (OIDNGPUError, OSError, ValueError, MemoryError)):
        text = f"internal error: {type(err).__name__}: {text}"  # a bug, not a bad file
    return text or type(err).__name__
