"""Denoise a list of image files (one frame or a whole sequence) with one Denoiser.

For each frame: read the beauty (and alpha) and the albedo/normal AOVs, from
separate files or from layers of the same multi-layer EXR; denoise; write the
output atomically (and optionally a noisy | denoised preview). A frame that fails
is reported and the others still run. Progress goes to stderr through tqdm
(per frame, advancing per tile within a frame); where no bar is shown (stderr is
not a terminal, as on a render farm) each frame gets one log line instead: the
frame, the layers used, the time and the output. A summary ends the run
(`SequenceSummary.line`, or `SequenceSummary.as_json` for machines).

An OpenEXR input written to an OpenEXR output keeps everything the input holds
(`oidn_gpu.image.exr`): every part, layer and channel, data and display window,
tiling, compression, pixel types and attributes. The denoised beauty replaces the
noisy one under the same channel names, or goes into a new layer beside it
(`OutputOptions.layer_name`); `OutputOptions.aovs` denoises further passes into the
same file. Other outputs hold the beauty (and its alpha) alone.

The Denoiser is created on the first frame and reused; frames whose files need
another mode (HDR vs sRGB, from the file's pixel type) get their own one.
"""

from __future__ import annotations

import glob
import re
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
from oidn_gpu.backends import AUTO, check_backend
from oidn_gpu.errors import (
    InvalidArgumentError,
    MissingDependencyError,
    NonFiniteInputWarning,
    NonFiniteOutputWarning,
    OIDNGPUError,
)
from oidn_gpu.image import aovs, complete, exr, io, process, windows
from oidn_gpu.image.preview import write_side_by_side

MODES = ("auto", "hdr", "ldr", "srgb")
# Notes a run gives once (the first frame they apply to), not for every frame.
NOTE_NORMAL_WITHOUT_ALBEDO = "normal-without-albedo"
NOTE_NO_AUX = "no-aux"
NOTE_ALPHA_DROPPED = "alpha-dropped"


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


@dataclass(frozen=True)
class OutputOptions:
    """What an OpenEXR output holds besides the denoised beauty.

    Attributes:
        layer_name: write the denoised beauty as a new layer of this name beside the
            noisy one (``ViewLayer.Combined`` -> ``ViewLayer.<name>``; a root beauty ->
            ``<name>``) instead of replacing it; denoised ``aovs`` go to
            ``<layer> <name>``.
        only_beauty: write the denoised beauty (and its alpha) alone, in its own part's
            header.
        aovs: further layers of the beauty file to denoise into the output, each with
            the beauty's albedo and normal, or colour-only for passes the albedo does not
            modulate (`oidn_gpu.image.aovs.is_color_only_aov`).
    """

    layer_name: str | None = None
    only_beauty: bool = False
    aovs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.layer_name is not None and not self.layer_name.strip():
            raise InvalidArgumentError(
                "the layer name is empty; expected a name such as 'Denoised'"
            )
        if self.only_beauty and (self.aovs or self.layer_name is not None):
            raise InvalidArgumentError(
                "--only-beauty writes the beauty alone; it cannot be used with --aovs or "
                "--layer-name"
            )


@dataclass(frozen=True)
class FrameNote:
    """Something a run says once: a kind (NOTE_*) and the text for the first frame."""

    kind: str
    text: str


@dataclass
class FrameResult:
    """What happened to one frame.

    Attributes:
        layers: the inputs used: ``color``, ``albedo``, ``normal`` (a layer name, a
            file, or None), ``aovs`` (the passes denoised with ``--aovs``) and ``mode``.
    """

    job: FrameJob
    status: str  # 'done', 'skipped' or 'failed'
    elapsed_s: float = 0.0
    error: str | None = None
    used: str = ""  # which inputs were used, in words
    layers: dict[str, Any] = field(default_factory=dict)
    nonfinite_pixels: int = 0  # denoised pixels with a NaN or infinite channel
    warnings: tuple[str, ...] = ()  # NaN/Inf pixel counts, a black autoexposure

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready description of this frame."""
        return {
            "input": str(self.job.color),
            "output": str(self.job.output),
            "status": self.status,
            "elapsed_s": round(self.elapsed_s, 4),
            "error": self.error,
            "layers": self.layers or None,
            "nonfinite_pixels": self.nonfinite_pixels,
            "warnings": list(self.warnings),
        }


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

    @property
    def nonfinite_frames(self) -> int:
        """Frames written with non-finite (NaN or infinite) output pixels."""
        return sum(1 for r in self.results if r.nonfinite_pixels)

    def line(self, total: int) -> str:
        """``3 frames: 2 denoised, 0 skipped, 1 failed in 4.2 s (1.9 s per frame)``."""
        done = self.count("done")
        per_frame = f" ({self.elapsed_s / done:.2f} s per frame)" if done else ""
        text = (
            f"{total} frame{'s' if total != 1 else ''}: {done} denoised, "
            f"{self.count('skipped')} skipped, {self.count('failed')} failed "
            f"in {self.elapsed_s:.1f} s{per_frame}"
        )
        if self.nonfinite_frames:
            text += f"; {self.nonfinite_frames} with non-finite output pixels"
        not_started = total - len(self.results)
        if self.interrupted:
            text += f"; interrupted, {not_started} not started"
        elif not_started:
            text += f"; {not_started} not started"
        return text

    def layers_line(self) -> str | None:
        """``layers used: color 'ViewLayer.Noisy Image', albedo ... (3 frames)``, one
        line per distinct choice, or None when no frame was denoised."""
        counts: dict[str, int] = {}
        for result in self.results:
            if result.status == "done":
                counts[result.used] = counts.get(result.used, 0) + 1
        if not counts:
            return None
        lines = [
            f"layers used: {used} ({n} frame{'s' if n != 1 else ''})" for used, n in counts.items()
        ]
        return "\n".join(lines)

    def as_json(self, total: int) -> dict[str, Any]:
        """The run as a JSON-ready dict: counts, time and every frame's inputs and output."""
        return {
            "frames": total,
            "denoised": self.count("done"),
            "skipped": self.count("skipped"),
            "failed": self.count("failed"),
            "nonfinite": self.nonfinite_frames,
            "not_started": total - len(self.results),
            "interrupted": self.interrupted,
            "elapsed_s": round(self.elapsed_s, 4),
            "results": [r.as_json() for r in self.results],
        }


@dataclass(frozen=True)
class LoadedFrame:
    """The images of one frame, ready for the denoiser.

    Attributes:
        color: the beauty's value channels (full channel names in ``color.channels``).
        alpha: the beauty's alpha channel, H x W x 1, or None.
        alpha_channel: the alpha channel's full name, or None.
        color_subimage: the part of the beauty file holding the beauty.
        layers: the beauty file's layers.
        sources: what was used: ``color``, ``albedo``, ``normal`` (None where absent).
        notes: what the run should say once (a normal without an albedo, no AOVs).
    """

    color: io.Image
    alpha: np.ndarray | None
    albedo: np.ndarray | None
    normal: np.ndarray | None
    used: str
    alpha_channel: str | None = None
    color_subimage: int = 0
    layers: tuple[io.Layer, ...] = ()
    sources: dict[str, str | None] = field(default_factory=dict)
    notes: tuple[FrameNote, ...] = ()


def _layer_label(name: str) -> str:
    return name or "(root)"


def _aux_from_file(source: AuxSource, names: Sequence[str], kind: str) -> tuple[io.Image, str]:
    if source.layer is not None:
        return io.read_layer(source.path, source.layer), f"{source.path}:{source.layer}"
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
    label = str(source.path) if not layer.name else f"{source.path}:{layer.name}"
    return io.read_layer(source.path, layer), label


def _subimage_of(layers: Sequence[io.Layer], channel: str) -> int:
    return next((lay.subimage for lay in layers if channel in lay.channels), 0)


def load_frame(job: FrameJob, options: InputOptions, *, lightmap: bool = False) -> LoadedFrame:
    """Read the beauty (+ alpha) and the AOVs of one frame.

    An albedo and normal are looked for under the names of `oidn_gpu.image.aovs`
    unless named (``options``) or given as files (``job``). A normal found without an
    albedo is left out (OIDN takes a normal only with an albedo) and noted.

    Each albedo and normal is placed on the beauty's data window (`windows.align_aux`);
    the beauty's alpha is left out, with a note, where the output's format has none.

    Raises:
        io.ImageFileError: a file is unreadable, deep, lacks the requested layer, or the
            layer holds 32-bit integer channels.
        InvalidArgumentError: an aux image does not cover the beauty's data window, or
            the output's format cannot hold the beauty's channels.
    """
    layers = io.list_layers(job.color)
    if options.color_layer is not None:
        color = io.read_layer(job.color, options.color_layer, with_alpha=True)
        color_label = options.color_layer
    else:
        layer = io.find_layer(layers, io.COLOR_LAYER_NAMES)
        if layer is None:
            raise io.ImageFileError(
                f"cannot find the beauty in '{job.color}'; its layers are "
                f"{io.describe_layers(layers)}; name it with --color-layer"
            )
        color = io.read_layer(job.color, layer, with_alpha=True)
        color_label = _layer_label(layer.name)
    color, alpha, alpha_channel, alpha_note = _split_alpha(job, color)
    pixels = color.pixels
    if alpha is None and alpha_note is None and "." in color.channels[0]:
        # a RenderMan-style root alpha beside the beauty layer, where the output holds it
        if pixels.shape[2] + 1 in io.writable_channel_counts(job.output):
            alpha, alpha_channel = _root_alpha(job.color, layers, color.channels[0])
    sources: dict[str, str | None] = {"color": color_label, "albedo": None, "normal": None}
    albedo = normal = None
    notes: list[FrameNote] = [alpha_note] if alpha_note is not None else []
    if not lightmap:
        albedo, sources["albedo"] = _load_aux(job, options, layers, "albedo", color)
        normal, sources["normal"] = _load_aux(job, options, layers, "normal", color)
        discovered = options.auto_aux and job.albedo is None and job.normal is None
        if discovered and options.albedo_layer is None and options.normal_layer is None:
            if normal is not None and albedo is None:
                notes.append(FrameNote(NOTE_NORMAL_WITHOUT_ALBEDO, _normal_only_text(job, sources)))
                normal, sources["normal"] = None, None
            elif normal is None and albedo is None:
                notes.append(FrameNote(NOTE_NO_AUX, _no_aux_text(job)))
        for kind, img in (("albedo", albedo), ("normal", normal)):
            if img is not None and img.shape[:2] != pixels.shape[:2]:
                raise InvalidArgumentError(
                    f"{kind} is {img.shape[1]}x{img.shape[0]} but the color is "
                    f"{pixels.shape[1]}x{pixels.shape[0]} in '{job.color}'"
                )
    used = [f"color '{color_label}'" + (" +alpha" if alpha is not None else "")]
    used += [f"{kind} '{sources[kind]}'" for kind in ("albedo", "normal") if sources[kind]]
    return LoadedFrame(
        color,
        alpha,
        albedo,
        normal,
        ", ".join(used),
        alpha_channel=alpha_channel,
        color_subimage=_subimage_of(layers, color.channels[0]),
        layers=tuple(layers),
        sources=sources,
        notes=tuple(notes),
    )


def _split_alpha(
    job: FrameJob, color: io.Image
) -> tuple[io.Image, np.ndarray | None, str | None, FrameNote | None]:
    """The beauty's value channels, its alpha (H x W x 1) and alpha channel name, and a note
    when the output's format cannot hold the alpha, which is then left out.

    Raises:
        InvalidArgumentError: the output's format cannot hold the beauty's value channels.
    """
    pixels = color.pixels
    alpha = alpha_channel = None
    note = None
    last = color.channels[-1].rsplit(".", 1)[-1].lower()
    if pixels.shape[2] in (2, 4) and last in ("a", "alpha"):
        alpha = pixels[:, :, -1:].copy()
        alpha_channel = color.channels[-1]
        pixels = np.ascontiguousarray(pixels[:, :, :-1])
    counts = io.writable_channel_counts(job.output)
    if alpha is not None and pixels.shape[2] + 1 not in counts and pixels.shape[2] in counts:
        alpha = alpha_channel = None
        note = FrameNote(
            NOTE_ALPHA_DROPPED,
            f"'{job.output}' cannot hold an alpha channel: writing the denoised color of "
            f"'{job.color}' without its alpha; write .exr, .tif or .png to keep it",
        )
    if pixels.shape[2] not in counts:
        raise InvalidArgumentError(
            f"'{job.output}' cannot hold the {pixels.shape[2]}-channel color of '{job.color}' "
            f"(its format holds {' or '.join(map(str, counts))} channels); write .exr, .tif "
            "or .png"
        )
    color = io.Image(
        pixels=pixels,
        channels=color.channels[: pixels.shape[2]],
        pixel_format=color.pixel_format,
        file_format=color.file_format,
        attributes=color.attributes,
        path=color.path,
        placement=color.placement,
    )
    return color, alpha, alpha_channel, note


def _root_alpha(
    path: Path, layers: Sequence[io.Layer], beauty_channel: str
) -> tuple[np.ndarray | None, str | None]:
    """A beauty layer without alpha takes the root alpha of its part (RenderMan writes
    ``Ci.r, Ci.g, Ci.b`` beside a root ``a``): ``(H x W x 1, channel)``, or ``(None, None)``."""
    subimage = _subimage_of(layers, beauty_channel)
    for layer in layers:
        if layer.name or layer.subimage != subimage:
            continue
        for channel in layer.channels:
            if channel.casefold() in ("a", "alpha"):
                image = io.read_layer(path, f"{channel},")  # that one channel
                return np.ascontiguousarray(image.pixels[:, :, :1]), channel
    return None, None


def _normal_only_text(job: FrameJob, sources: dict[str, str | None]) -> str:
    return (
        f"'{job.color}' has a normal ('{sources['normal']}') but no albedo, and a normal is "
        "used only with an albedo: denoising with the color alone. Name the albedo layer "
        "with --albedo-layer, or name it as renderers do (" + _examples(io.ALBEDO_LAYER_NAMES)
        + "; see docs/aovs.md)"
    )


def _no_aux_text(job: FrameJob) -> str:
    return (
        f"'{job.color}' has no albedo or normal layer: denoising with the color alone, which "
        "keeps less detail. Name them with --albedo-layer and --normal-layer, or as renderers "
        "do (albedo: " + _examples(io.ALBEDO_LAYER_NAMES) + "; normal: "
        + _examples(io.NORMAL_LAYER_NAMES) + "; see docs/aovs.md); --no-aux silences this"
    )


def _examples(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in names[:5]) + ", ..."


def _load_aux(
    job: FrameJob, options: InputOptions, layers: Sequence[io.Layer], kind: str, color: io.Image
) -> tuple[np.ndarray | None, str | None]:
    """The albedo or normal over the beauty's data window (`windows.align_aux`), and
    where it came from."""
    names = io.ALBEDO_LAYER_NAMES if kind == "albedo" else io.NORMAL_LAYER_NAMES
    source: AuxSource | None = job.albedo if kind == "albedo" else job.normal
    layer_name = options.albedo_layer if kind == "albedo" else options.normal_layer
    if source is not None:
        image, label = _aux_from_file(source, names, kind)
    elif layer_name is not None:
        image, label = io.read_layer(job.color, layer_name), layer_name
    elif not options.auto_aux or (layer := io.find_layer(layers, names)) is None:
        return None, None
    else:
        image, label = io.read_layer(job.color, layer), _layer_label(layer.name)
    if image.placement is None or color.placement is None:
        return image.pixels, label
    pixels = windows.align_aux(
        image.pixels,
        image.placement,
        color.placement,
        kind=kind,
        source=f"'{image.path}'" + (f" (layer '{label}')" if image.path == job.color else ""),
        color_source=f"'{job.color}'",
    )
    return pixels, label


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
        if self._bar is not None:
            self._bar.write(text, file=stream)
        else:
            print(text, file=stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


@dataclass(frozen=True)
class FrameOutcome:
    """What `denoise_frame` did: the inputs used, in words and as data, its notes, and how
    many denoised pixels are not finite."""

    used: str
    layers: dict[str, Any]
    notes: tuple[FrameNote, ...] = ()
    nonfinite_pixels: int = 0  # denoised pixels with a NaN or infinite channel


def _scaled(
    progress: Callable[[float], bool] | None, start: float, share: float
) -> Callable[[float], bool] | None:
    """``progress`` for one of several passes: its 0..1 mapped to start..start+share."""
    if progress is None:
        return None
    return lambda fraction: progress(start + share * float(fraction))


def denoise_frame(
    job: FrameJob,
    pool: _DenoiserPool,
    options: InputOptions,
    *,
    lightmap: bool,
    progress: Callable[[float], bool] | None,
    software: str,
    warn: Callable[[str], None] | None = None,
    output: OutputOptions | None = None,
    temporal: Any = None,
) -> FrameOutcome:
    """Denoise one frame (and its ``output.aovs``) and write its outputs.

    ``temporal``: an `oidn_gpu.temporal.frames.TemporalFrames` that denoises the beauty
    with the history of the frames before (frames in order); its restarts go to ``warn``.

    ``warn`` receives this frame's `NonFiniteInputWarning` messages, the count of NaN
    and infinite pixels of each input image, and the warning about non-finite output
    pixels (without ``warn``, a `NonFiniteOutputWarning`); other warnings are issued as
    usual.

    Raises:
        io.ImageFileError: a file is unreadable, lacks a layer, or cannot be written.
        InvalidArgumentError: image sizes differ, or an option needs an OpenEXR output.
    """
    output = OutputOptions() if output is None else output
    frame = load_frame(job, options, lightmap=lightmap)
    hdr, srgb = resolve_mode(options, frame.color)
    denoiser = pool.get(hdr, srgb)
    lossless = exr.is_exr(job.output) and frame.color.file_format == exr.EXR_FORMAT
    if (output.aovs or output.layer_name) and not lossless:
        flag = "--aovs" if output.aovs else "--layer-name"
        raise InvalidArgumentError(
            f"{flag} needs an OpenEXR input and output; '{job.color}' -> '{job.output}'"
        )
    passes = [(io.match_layer(frame.layers, name), name) for name in output.aovs]
    for layer, name in passes:
        if layer is None:
            raise io.ImageFileError(
                f"'{job.color}' has no layer '{name}' (--aovs); its layers are "
                f"{io.describe_layers(frame.layers)}"
            )
    if temporal is not None and passes:
        raise InvalidArgumentError("--temporal denoises the beauty; it cannot be used with --aovs")
    share = 1.0 / (1 + len(passes))

    def run(color: np.ndarray, albedo: Any, normal: Any, index: int) -> np.ndarray:
        if warn is not None:
            aov = passes[index - 1][1] if index else None
            images = [(f"AOV '{aov}'" if aov else "color", color)]
            if not index:
                images += [("albedo", albedo), ("normal", normal)]
            for what, pixels in images:
                text = None if pixels is None else process.nonfinite_message(what, pixels)
                if text is not None:
                    warn(text)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", NonFiniteInputWarning)
            result = denoiser.denoise(
                color, albedo, normal, progress=_scaled(progress, index * share, share)
            )
        for w in caught:
            if issubclass(w.category, NonFiniteInputWarning) and warn is not None:
                warn(str(w.message))
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        result = np.asarray(result, dtype=np.float32)
        if result.ndim == 2:
            result = result[:, :, None]
        return result[:, :, : color.shape[2]]

    if temporal is not None:
        result, messages = temporal.denoise(job.color, frame, denoiser)
        for text in messages:
            if warn is not None:
                warn(text)
    else:
        result = run(frame.color.pixels, frame.albedo, frame.normal, 0)
    nonfinite = [("the color", _nonfinite_pixels(result))]
    denoised_aovs = []
    for index, (layer, _) in enumerate(passes, start=1):
        assert layer is not None
        image = io.read_layer(job.color, layer)
        guided = not aovs.is_color_only_aov(layer.name)
        albedo, normal = (frame.albedo, frame.normal) if guided else (None, None)
        values = run(image.pixels, albedo, normal, index)
        denoised_aovs.append((layer, image, values, guided))
        nonfinite.append((f"layer '{_layer_label(layer.name)}'", _nonfinite_pixels(values)))
    _warn_nonfinite(nonfinite, result.shape, warn)

    if lossless:
        _write_exr(job, frame, result, denoised_aovs, output, software)
    else:
        full = result if frame.alpha is None else np.concatenate([result, frame.alpha], axis=2)
        io.write_image_atomic(
            job.output,
            full,
            channels=_output_channels(frame.color.pixels.shape[2], frame.alpha is not None),
            like=frame.color,
            encoding=frame.color.encoding,
            software=software,
        )
    if job.side_by_side is not None:

        write_side_by_side(
            job.side_by_side, frame.color.pixels, result, encoding=frame.color.encoding
        )
    mode = "hdr" if hdr else ("srgb" if srgb else "ldr")
    aov_words = [
        f"'{_layer_label(layer.name)}' ({'albedo-guided' if guided else 'color-only'})"
        for layer, _, _, guided in denoised_aovs
    ]
    used = frame.used + (f", aovs {', '.join(aov_words)}" if aov_words else "") + f"; {mode}"
    layers = dict(frame.sources)
    layers["aovs"] = [
        {"layer": layer.name, "guided": guided} for layer, _, _, guided in denoised_aovs
    ]
    layers["mode"] = mode
    return FrameOutcome(used, layers, frame.notes, sum(n for _, n in nonfinite))


def _nonfinite_pixels(result: np.ndarray) -> int:
    """How many pixels of a denoised H x W x C image have a NaN or infinite channel."""
    return int(np.count_nonzero(~np.isfinite(result).all(axis=2)))


def _warn_nonfinite(
    counts: Sequence[tuple[str, int]],
    shape: tuple[int, ...],
    warn: Callable[[str], None] | None,
) -> None:
    """Say which denoised images of a frame hold NaN or infinite pixels (written as they are,
    as OIDN returns them)."""
    bad = [f"{n} of {shape[0] * shape[1]} in {what}" for what, n in counts if n]
    if not bad:
        return
    text = (
        f"non-finite (NaN or infinite) denoised pixels: {'; '.join(bad)}; check the weights "
        "and the input images"
    )
    if warn is not None:
        warn(text)
    else:
        warnings.warn(text, NonFiniteOutputWarning, stacklevel=3)


def _new_layer_channels(channels: Sequence[str], name: str, *, sibling_of_layer: bool) -> list[str]:
    """Channel names of a new layer beside the one ``channels`` belong to.

    ``sibling_of_layer`` False (the beauty): ``ViewLayer.Combined.R`` -> ``ViewLayer.<name>.R``
    and ``R`` -> ``<name>.R``. True (a pass): ``ViewLayer.DiffDir.R`` ->
    ``ViewLayer.DiffDir <name>.R``.
    """
    out = []
    for channel in channels:
        prefix, _, component = channel.rpartition(".")
        if sibling_of_layer:
            layer = f"{prefix} {name}"
        else:
            parent = prefix.rpartition(".")[0]
            layer = f"{parent}.{name}" if parent else name
        out.append(f"{layer}.{component}")
    return out


def _write_exr(
    job: FrameJob,
    frame: LoadedFrame,
    result: np.ndarray,
    denoised_aovs: Sequence[tuple[io.Layer, io.Image, np.ndarray, bool]],
    output: OutputOptions,
    software: str,
) -> None:
    """Write the input file again with the denoised beauty (and passes) in it."""
    contents = exr.read_file(job.color)
    sub = frame.color_subimage
    names = list(frame.color.channels)
    if output.only_beauty:
        contents.replace_channels(sub, names, result)
        keep = names + ([frame.alpha_channel] if frame.alpha_channel else [])
        contents.keep_only(sub, keep)
    elif output.layer_name:
        values = result
        like = names
        if frame.alpha is not None and frame.alpha_channel is not None:
            values = np.concatenate([result, frame.alpha], axis=2)
            like = [*names, frame.alpha_channel]
        new = _new_layer_channels(like, output.layer_name, sibling_of_layer=False)
        contents.add_channels(sub, new, values, like)
    else:
        contents.replace_channels(sub, names, result)
    for layer, image, values, _ in denoised_aovs:
        channels = list(image.channels)
        if output.layer_name:
            new = _new_layer_channels(channels, output.layer_name, sibling_of_layer=True)
            contents.add_channels(layer.subimage, new, values, channels)
        else:
            contents.replace_channels(layer.subimage, channels, values)
    exr.write_file(job.output, contents, software=software)


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
    output: OutputOptions | None = None,
    temporal: Any = None,
) -> SequenceSummary:
    """Denoise every job; one failing frame does not stop the others.

    Args:
        jobs: the frames, in order.
        denoiser_kwargs: keyword options for `oidn_gpu.Denoiser` (hdr/srgb are set
            per frame from ``options.mode``).
        options: where to find the images in the files.
        lightmap: RTLightmap filter (no auxiliary images).
        skip_existing: leave frames whose outputs are complete alone (`output_is_complete`);
            a frame with a missing, partial or foreign half-written output or preview is
            denoised again.
        show_progress: True/False, or None for "when stderr is a terminal".
        verbose: print each frame's inputs and tracebacks of failures.
        quiet: print only errors.
        output: what OpenEXR outputs hold besides the beauty (`OutputOptions`).
        temporal: an `oidn_gpu.temporal.frames.TemporalFrames`: temporal mode (see
            `denoise_frame`); the caller closes it.

    Where no progress bar is drawn (``show_progress`` False, or None and stderr not a
    terminal) and not ``quiet``, every frame gets one line: ``frame 2/3 in.exr: color
    'ViewLayer.Noisy Image', albedo ..., normal ...; hdr; 1.20 s -> out.exr``. A
    missing albedo or normal is warned about once per run.
        stream: where messages go (stderr).
        software: the ``Software`` attribute written into outputs.

    Returns:
        The per-frame results; ``interrupted`` is set if KeyboardInterrupt stopped the
        run (the exception is re-raised after the summary is filled in).

    Raises:
        UnsupportedDeviceError: the backend cannot run on this machine (checked once,
            before any frame: `backends.check_backend`).
        KeyboardInterrupt: after closing the denoisers and the progress bar; no
            partial output is left behind (outputs are written atomically).
    """
    if jobs:
        check_backend(str(denoiser_kwargs.get("backend", AUTO)), denoiser_kwargs)
    stream = sys.stderr if stream is None else stream
    summary = SequenceSummary()
    progress = _Progress(len(jobs), False if quiet else show_progress, stream)
    pool = _DenoiserPool(denoiser_kwargs, lightmap)
    log_frames = verbose or (not quiet and not progress.shown)
    noted: set[str] = set()
    start = time.perf_counter()
    try:
        for index, job in enumerate(jobs):
            if skip_existing:
                reason = incomplete_reason(job)
                if reason is None:
                    summary.results.append(FrameResult(job, "skipped"))
                    if verbose:
                        progress.write(f"skipped {job.color}: '{job.output}' is complete", stream)
                    progress.finish_frame(index)
                    continue
                if verbose and job.output.exists():
                    progress.write(f"denoising {job.color} again: {reason}", stream)
            frame_start = time.perf_counter()
            callback = progress.frame_callback(index, job.color.name)
            warned: list[str] = []

            def warn(text: str, job: FrameJob = job, warned: list[str] = warned) -> None:
                warned.append(text)
                progress.write(f"warning: {job.color}: {text}", stream)

            try:
                outcome = denoise_frame(
                    job,
                    pool,
                    options,
                    lightmap=lightmap,
                    progress=callback,
                    software=software,
                    warn=warn,
                    output=output,
                    temporal=temporal,
                )
            except KeyboardInterrupt:
                summary.interrupted = True
                raise
            except Exception as err:
                elapsed = time.perf_counter() - frame_start
                summary.results.append(
                    FrameResult(job, "failed", elapsed, _message(err), warnings=tuple(warned))
                )
                progress.write(f"error: {job.color}: {_message(err)}", stream)
                if verbose:
                    progress.write(traceback.format_exc().rstrip(), stream)
                if isinstance(err, MissingDependencyError):
                    break  # every other frame would fail the same way
            else:
                elapsed = time.perf_counter() - frame_start
                summary.results.append(
                    FrameResult(
                        job,
                        "done",
                        elapsed,
                        used=outcome.used,
                        layers=outcome.layers,
                        nonfinite_pixels=outcome.nonfinite_pixels,
                        warnings=tuple(warned),
                    )
                )
                for note in outcome.notes:
                    if note.kind not in noted and not quiet:
                        noted.add(note.kind)
                        progress.write(f"warning: {note.text}", stream)
                if log_frames:
                    progress.write(
                        f"frame {index + 1}/{len(jobs)} {job.color}: {outcome.used}; "
                        f"{elapsed:.2f} s -> {job.output}",
                        stream,
                    )
            progress.finish_frame(index)
    finally:
        summary.elapsed_s = time.perf_counter() - start
        progress.close()
        pool.close()
    return summary


def incomplete_reason(job: FrameJob) -> str | None:
    """Why ``job``'s output or preview is not complete, or None (`image.complete`)."""
    return complete.incomplete_reason(job.color, job.output, job.side_by_side)


def output_is_complete(job: FrameJob) -> bool:
    """Whether ``job``'s output (every part) and preview exist, decode and have the frame's
    sizes: what ``skip_existing`` skips a frame by, here and on the farm."""
    return incomplete_reason(job) is None


def _message(err: BaseException) -> str:
    text = str(err).strip()
    if isinstance(err, OSError) and not isinstance(err, OIDNGPUError) and err.strerror:
        name = f" '{err.filename}'" if err.filename else ""
        text = f"{err.strerror.lower()}{name}"
    if not isinstance(err, (OIDNGPUError, OSError, ValueError, MemoryError)):
        text = f"internal error: {type(err).__name__}: {text}"  # a bug, not a bad file
    return text or type(err).__name__


# --- frame numbers in output names -------------------------------------------------------------
# Frame-number patterns of the tools that write sequences: '####' (Nuke, Arnold, V-Ray; one '#'
# per digit), '%04d' (printf, Nuke, ffmpeg) and '$F4' / '$F' (Houdini).
_FRAME_PATTERN = re.compile(r"(#+)|%(0?\d*)d|\$F(\d?)")


def has_frame_pattern(spec: str) -> bool:
    """Whether a file name holds a frame-number pattern (``####``, ``%04d``, ``$F4``)."""
    return _FRAME_PATTERN.search(spec) is not None


def expand_frame_patterns(spec: str, frame: int | None, source: str = "") -> str:
    """Replace ``####``, ``%04d``/``%d`` and ``$F4``/``$F`` in ``spec`` by ``frame``,
    zero-padded to the pattern's width (``render.####.exr`` -> ``render.0007.exr``).

    Raises:
        InvalidArgumentError: ``spec`` has a pattern but ``frame`` is None (the input
            ``source`` has no frame number).
    """
    def number(match: re.Match[str]) -> str:
        if frame is None:
            raise InvalidArgumentError(
                f"'{spec}' needs a frame number, but '{source}' has none (expected digits "
                "at the end of its name, such as 'render.0001.exr')"
            )
        hashes, printf, houdini = match.groups()
        if hashes is not None:
            width = len(hashes)
        elif printf is not None:
            width = int(printf) if printf else 0
        else:
            width = int(houdini) if houdini else 0
        return f"{frame:0{width}d}"

    return _FRAME_PATTERN.sub(number, spec)


def frame_pattern_files(spec: str) -> list[Path]:
    """The existing files that ``spec``'s frame-number patterns (``####``, ``%04d``,
    ``$F4``) match: each pattern stands for a frame number of at least its width
    (``render.####.exr`` matches ``render.0007.exr`` and ``render.12345.exr``)."""
    pieces, last = [], 0
    for match in _FRAME_PATTERN.finditer(spec):
        hashes, printf, houdini = match.groups()
        width = len(hashes) if hashes is not None else int((printf or houdini) or 0)
        pieces += [re.escape(spec[last : match.start()]), rf"\d{{{max(width, 1)},}}"]
        last = match.end()
    regex = re.compile("".join([*pieces, re.escape(spec[last:])]))
    candidates = glob.glob(glob.escape(_FRAME_PATTERN.sub("\0", spec)).replace("\0", "*"))
    return [Path(p) for p in candidates if regex.fullmatch(p) and Path(p).is_file()]
