"""Denoise a list of image files (one frame or a whole sequence) with one Denoiser.

For each frame: read the beauty (and alpha) and the albedo/normal AOVs, from
separate files or from layers of the same multi-layer EXR; denoise; write the
output atomically (and optionally a noisy | denoised preview). A frame that fails
is reported and the others still run. Progress goes to stderr through tqdm
(per frame, advancing per tile within a frame); a summary ends the run.

The Denoiser is created on the first frame and reused; frames whose files need
another mode (HDR vs sRGB, from the file's pixel type) get their own one.
"""

from __future__ import annotations

import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

import oidn_gpu  # oidn_gpu.Denoiser is looked up at call time: tests substitute a fake
from oidn_gpu.errors import (
    InvalidArgumentError,
    MissingDependencyError,
    NonFiniteInputWarning,
    OIDNGPUError,
)
from oidn_gpu.image import io
from oidn_gpu.image.preview import write_side_by_side

MODES = ("auto", "hdr", "ldr", "srgb")


@dataclass(frozen=True)
class AuxSource:
    """Where an auxiliary image comes from: a file, and optionally a layer of it."""

    path: Path
    layer: str | None = None


@dataclass(frozen=True)
class FrameJob:
    """One frame: its beauty input, auxiliary sources and output paths."""

    color: Path
    output: Path
    albedo: AuxSource | None = None
    normal: AuxSource | None = None
    side_by_side: Path | None = None


@dataclass(frozen=True)
class InputOptions:
    """How to find the images inside the files.

    Attributes:
        color_layer: layer or channels of the beauty; None tries `io.COLOR_LAYER_NAMES`.
        albedo_layer, normal_layer: layer or channels of the AOVs in the beauty file
            (when no separate file is given); None tries the default names.
        auto_aux: look for AOV layers in the beauty file when none is named.
        mode: 'auto' (HDR for float files, sRGB LDR for integer files), 'hdr',
            'ldr' (linear LDR) or 'srgb'.
    """

    color_layer: str | None = None
    albedo_layer: str | None = None
    normal_layer: str | None = None
    auto_aux: bool = True
    mode: str = "auto"


@dataclass
class FrameResult:
    """What happened to one frame."""

    job: FrameJob
    status: str  # 'done', 'skipped' or 'failed'
    elapsed_s: float = 0.0
    error: str | None = None
    used: str = ""  # which inputs were used, for verbose output


@dataclass
class SequenceSummary:
    """Totals of a run."""

    results: list[FrameResult] = field(default_factory=list)
    elapsed_s: float = 0.0
    interrupted: bool = False

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def failed(self) -> list[FrameResult]:
        return [r for r in self.results if r.status == "failed"]

    def line(self, total: int) -> str:
        """``3 frames: 2 denoised, 0 skipped, 1 failed in 4.2 s (1.9 s per frame)``."""
        done = self.count("done")
        per_frame = f" ({self.elapsed_s / done:.2f} s per frame)" if done else ""
        text = (
            f"{total} frame{'s' if total != 1 else ''}: {done} denoised, "
            f"{self.count('skipped')} skipped, {self.count('failed')} failed "
            f"in {self.elapsed_s:.1f} s{per_frame}"
        )
        not_started = total - len(self.results)
        if self.interrupted:
            text += f"; interrupted, {not_started} not started"
        elif not_started:
            text += f"; {not_started} not started"
        return text


@dataclass(frozen=True)
class LoadedFrame:
    """The images of one frame, ready for the denoiser."""

    color: io.Image
    alpha: np.ndarray | None
    albedo: np.ndarray | None
    normal: np.ndarray | None
    used: str


def _aux_from_file(source: AuxSource, names: Sequence[str], kind: str) -> np.ndarray:
    if source.layer is not None:
        return io.read_layer(source.path, source.layer).pixels
    layers = io.list_layers(source.path)
    layer = io.find_layer(layers, names) or io.find_layer(layers, [""])
    if layer is None:
        if len(layers) == 1:
            layer = layers[0]
        else:
            raise io.ImageFileError(
                f"cannot tell which layer of '{source.path}' is the {kind}; its layers are "
                f"{io.describe_layers(layers)}; name one with --{kind}-layer"
            )
    return io.read_layer(source.path, layer).pixels


def load_frame(job: FrameJob, options: InputOptions, *, lightmap: bool = False) -> LoadedFrame:
    """Read the beauty (+ alpha) and the AOVs of one frame.

    Raises:
        io.ImageFileError: a file is unreadable or lacks the requested layer.
        InvalidArgumentError: image sizes differ.
    """
    layers = io.list_layers(job.color)
    if options.color_layer is not None:
        color = io.read_layer(job.color, options.color_layer, with_alpha=True)
    else:
        layer = io.find_layer(layers, io.COLOR_LAYER_NAMES)
        if layer is None:
            raise io.ImageFileError(
                f"cannot find the beauty in '{job.color}'; its layers are "
                f"{io.describe_layers(layers)}; name it with --color-layer"
            )
        color = io.read_layer(job.color, layer, with_alpha=True)
    pixels = color.pixels
    alpha = None
    value_channels = pixels.shape[2]
    if value_channels in (2, 4) and color.channels[-1].rsplit(".", 1)[-1].lower() in ("a", "alpha"):
        alpha = pixels[:, :, -1:].copy()
        pixels = np.ascontiguousarray(pixels[:, :, :-1])
    color = io.Image(
        pixels=pixels,
        channels=color.channels[: pixels.shape[2]],
        pixel_format=color.pixel_format,
        file_format=color.file_format,
        attributes=color.attributes,
        path=color.path,
    )
    used = [f"color {job.color}" + (" +alpha" if alpha is not None else "")]
    albedo = normal = None
    if not lightmap:
        albedo = _load_aux(job, options, layers, "albedo")
        normal = _load_aux(job, options, layers, "normal")
        for kind, img in (("albedo", albedo), ("normal", normal)):
            if img is not None:
                used.append(kind)
                if img.shape[:2] != pixels.shape[:2]:
                    raise InvalidArgumentError(
                        f"{kind} is {img.shape[1]}x{img.shape[0]} but the color is "
                        f"{pixels.shape[1]}x{pixels.shape[0]} in '{job.color}'"
                    )
    return LoadedFrame(color, alpha, albedo, normal, ", ".join(used))


def _load_aux(
    job: FrameJob, options: InputOptions, layers: Sequence[io.Layer], kind: str
) -> np.ndarray | None:
    names = io.ALBEDO_LAYER_NAMES if kind == "albedo" else io.NORMAL_LAYER_NAMES
    source: AuxSource | None = job.albedo if kind == "albedo" else job.normal
    layer_name = options.albedo_layer if kind == "albedo" else options.normal_layer
    if source is not None:
        return _aux_from_file(source, names, kind)
    if layer_name is not None:
        return io.read_layer(job.color, layer_name).pixels
    if not options.auto_aux:
        return None
    layer = io.find_layer(layers, names)
    return None if layer is None else io.read_layer(job.color, layer).pixels


def resolve_mode(options: InputOptions, color: io.Image) -> tuple[bool, bool]:
    """(hdr, srgb) for this frame: explicit, or HDR for float files and sRGB for integer ones."""
    mode = options.mode
    if mode == "auto":
        mode = "hdr" if color.is_float else "srgb"
    return mode == "hdr", mode == "srgb"


class _DenoiserPool:
    """One Denoiser per (hdr, srgb), created on first use and closed at the end."""

    def __init__(self, kwargs: dict[str, Any], lightmap: bool) -> None:
        self._kwargs = kwargs
        self._lightmap = lightmap
        self._denoisers: dict[tuple[bool, bool], Any] = {}

    def get(self, hdr: bool, srgb: bool) -> Any:
        key = (hdr, srgb)
        if key not in self._denoisers:
            kwargs = dict(self._kwargs)
            if not self._lightmap:
                kwargs.update(hdr=hdr, srgb=srgb)
            self._denoisers[key] = oidn_gpu.Denoiser(**kwargs)
        return self._denoisers[key]

    def close(self) -> None:
        for denoiser in self._denoisers.values():
            denoiser.close()
        self._denoisers.clear()


class _Progress:
    """A tqdm bar over frames that advances fractionally per tile; silent when disabled."""

    def __init__(self, total: int, enabled: bool | None, stream: TextIO) -> None:
        self._bar = None
        if enabled is False or total == 0:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._bar = tqdm(
            total=total,
            unit="frame",
            file=stream,
            disable=None if enabled is None else not enabled,
            dynamic_ncols=True,
            bar_format="{l_bar}{bar}| {n:.2f}/{total} frames [{elapsed}<{remaining}]",
        )
        self._base = 0

    def frame_callback(self, index: int, name: str) -> Callable[[float], bool]:
        if self._bar is not None:
            self._bar.set_description_str(name, refresh=False)

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
        if self._bar is not None:
            self._bar.write(text, file=stream)
        else:
            print(text, file=stream)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def denoise_frame(
    job: FrameJob,
    pool: _DenoiserPool,
    options: InputOptions,
    *,
    lightmap: bool,
    progress: Callable[[float], bool] | None,
    software: str,
    warn: Callable[[str], None] | None = None,
) -> str:
    """Denoise one frame and write its outputs; returns a description of the inputs used.

    ``warn`` receives this frame's `NonFiniteInputWarning` messages (other warnings
    are issued as usual).
    """
    frame = load_frame(job, options, lightmap=lightmap)
    hdr, srgb = resolve_mode(options, frame.color)
    denoiser = pool.get(hdr, srgb)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NonFiniteInputWarning)
        result = denoiser.denoise(frame.color.pixels, frame.albedo, frame.normal, progress=progress)
    for w in caught:
        if issubclass(w.category, NonFiniteInputWarning) and warn is not None:
            warn(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    result = np.asarray(result, dtype=np.float32)
    if result.ndim == 2:
        result = result[:, :, None]
    result = result[:, :, : frame.color.pixels.shape[2]]
    if frame.alpha is not None:
        result = np.concatenate([result, frame.alpha], axis=2)
    channels = _output_channels(frame.color.pixels.shape[2], frame.alpha is not None)
    io.write_image_atomic(
        job.output,
        result,
        channels=channels,
        like=frame.color,
        encoding=frame.color.encoding,
        software=software,
    )
    if job.side_by_side is not None:

        write_side_by_side(
            job.side_by_side, frame.color.pixels, result, encoding=frame.color.encoding
        )
    mode = "hdr" if hdr else ("srgb" if srgb else "ldr")
    return f"{frame.used}; {mode}"


def _output_channels(value_channels: int, alpha: bool) -> list[str]:
    names = {1: ["Y"], 2: ["R", "G"], 3: ["R", "G", "B"]}[value_channels]
    return names + (["A"] if alpha else [])


def run_sequence(
    jobs: Sequence[FrameJob],
    denoiser_kwargs: dict[str, Any],
    options: InputOptions,
    *,
    lightmap: bool = False,
    skip_existing: bool = False,
    show_progress: bool | None = None,
    verbose: bool = False,
    quiet: bool = False,
    stream: TextIO | None = None,
    software: str = "oidn-gpu",
) -> SequenceSummary:
    """Denoise every job; one failing frame does not stop the others.

    Args:
        jobs: the frames, in order.
        denoiser_kwargs: keyword options for `oidn_gpu.Denoiser` (hdr/srgb are set
            per frame from ``options.mode``).
        options: where to find the images in the files.
        lightmap: RTLightmap filter (no auxiliary images).
        skip_existing: leave frames whose output exists alone.
        show_progress: True/False, or None for "when stderr is a terminal".
        verbose: print each frame's inputs and tracebacks of failures.
        quiet: print only errors.
        stream: where messages go (stderr).
        software: the ``Software`` attribute written into outputs.

    Returns:
        The per-frame results; ``interrupted`` is set if KeyboardInterrupt stopped the
        run (the exception is re-raised after the summary is filled in).

    Raises:
        KeyboardInterrupt: after closing the denoisers and the progress bar; no
            partial output is left behind (outputs are written atomically).
    """
    stream = sys.stderr if stream is None else stream
    summary = SequenceSummary()
    progress = _Progress(len(jobs), False if quiet else show_progress, stream)
    pool = _DenoiserPool(denoiser_kwargs, lightmap)
    start = time.perf_counter()
    try:
        for index, job in enumerate(jobs):
            if skip_existing and job.output.exists():
                summary.results.append(FrameResult(job, "skipped"))
                if verbose:
                    progress.write(f"skipped {job.color}: '{job.output}' exists", stream)
                progress.finish_frame(index)
                continue
            frame_start = time.perf_counter()
            callback = progress.frame_callback(index, job.color.name)
            try:
                used = denoise_frame(
                    job,
                    pool,
                    options,
                    lightmap=lightmap,
                    progress=callback,
                    software=software,
                    warn=lambda text, job=job: progress.write(
                        f"warning: {job.color}: {text}", stream
                    ),
                )
            except KeyboardInterrupt:
                summary.interrupted = True
                raise
            except Exception as err:
                elapsed = time.perf_counter() - frame_start
                summary.results.append(FrameResult(job, "failed", elapsed, _message(err)))
                progress.write(f"error: {job.color}: {_message(err)}", stream)
                if verbose:
                    progress.write(traceback.format_exc().rstrip(), stream)
                if isinstance(err, MissingDependencyError):
                    break  # every other frame would fail the same way
            else:
                elapsed = time.perf_counter() - frame_start
                summary.results.append(FrameResult(job, "done", elapsed, used=used))
                if verbose:
                    progress.write(
                        f"denoised {job.color} -> {job.output} in {elapsed:.2f} s ({used})",
                        stream,
                    )
            progress.finish_frame(index)
    finally:
        summary.elapsed_s = time.perf_counter() - start
        progress.close()
        pool.close()
    return summary


def _message(err: BaseException) -> str:
    text = str(err).strip()
    if isinstance(err, OSError) and not isinstance(err, OIDNGPUError) and err.strerror:
        name = f" '{err.filename}'" if err.filename else ""
        text = f"{err.strerror.lower()}{name}"
    if not isinstance(err, (OIDNGPUError, OSError, ValueError, MemoryError)):
        text = f"internal error: {type(err).__name__}: {text}"  # a bug, not a bad file
    return text or type(err).__name__
