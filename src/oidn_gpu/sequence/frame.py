"""One frame denoised and written: `denoise_frame` reads it (`load.load_frame`), denoises
the beauty and the asked-for passes with a Denoiser of the `DenoiserPool`, and writes the
output atomically (an OpenEXR written from an OpenEXR keeps everything the input holds,
`oidn_gpu.image.exr`) and the noisy | denoised preview."""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oidn_gpu import filter as facade  # Denoiser looked up at call time: tests substitute a fake
from oidn_gpu.config import DenoiserConfig
from oidn_gpu.errors import InvalidArgumentError, NonFiniteInputWarning, NonFiniteOutputWarning
from oidn_gpu.filter_alpha import alpha_config, denoise_alpha
from oidn_gpu.image import aov_sum, aovs, color, exr, io, process
from oidn_gpu.image.preview import write_side_by_side
from oidn_gpu.sequence.load import FrameNote, LoadedFrame, layer_label, load_frame, resolve_mode
from oidn_gpu.sequence.options import FrameJob, OutputOptions, SequenceOptions

Progress = Callable[[float], bool]
Warn = Callable[[str], None]
# A pass of ``--aovs`` denoised: its layer, its image, the result and whether the albedo
# and normal guided it.
DenoisedPass = tuple[io.Layer, io.Image, np.ndarray, bool]
NOTE_HDR_CLIPPED = "hdr-clipped"  # a run says it once (`load.FrameNote`)


class DenoiserPool:
    """One Denoiser per (hdr, srgb) of one `DenoiserConfig`, created on first use and
    closed at the end."""

    def __init__(self, config: DenoiserConfig) -> None:
        self.config = config
        self._denoisers: dict[tuple[Any, bool], Any] = {}

    def get(self, hdr: bool, srgb: bool) -> Any:
        key = (hdr, srgb)
        if key not in self._denoisers:
            config = self.config if self.config.lightmap else self.config.with_mode(hdr, srgb)
            self._denoisers[key] = facade.Denoiser.from_config(config)
        return self._denoisers[key]

    def alpha(self) -> Any:
        """The Denoiser of alpha channels (`oidn_gpu.filter_alpha.alpha_config`)."""
        key = ("alpha", False)
        if key not in self._denoisers:
            config = alpha_config(self.config)
            self._denoisers[key] = facade.Denoiser.from_config(config)
        return self._denoisers[key]

    def close(self) -> None:
        for denoiser in self._denoisers.values():
            denoiser.close()
        self._denoisers.clear()


@dataclass(frozen=True)
class FrameOutcome:
    """What `denoise_frame` did: the inputs used, in words and as data, its notes, how
    many denoised pixels are not finite, and the seconds of its stages (`STAGES`)."""

    used: str
    layers: dict[str, Any]
    notes: tuple[FrameNote, ...] = ()
    nonfinite_pixels: int = 0  # denoised pixels with a NaN or infinite channel
    stages: dict[str, float] = field(default_factory=dict)
    # seconds of the call that belong to other frames: the next frame read ahead (temporal
    # mode), less this frame's read done in the call before
    others_s: float = 0.0


# A frame's stages, as `FrameOutcome.stages` times them: reading and checking its files,
# the denoise calls (uploads, the device's work and the copies back on a GPU), writing.
STAGES = ("read", "denoise", "write")


def _scaled(progress: Progress | None, start: float, share: float) -> Progress | None:
    """``progress`` for one of several passes: its 0..1 mapped to start..start+share."""
    if progress is None:
        return None
    return lambda fraction: progress(start + share * float(fraction))


def denoise_frame(
    job: FrameJob,
    pool: DenoiserPool,
    options: SequenceOptions,
    *,
    progress: Progress | None = None,
    warn: Warn | None = None,
    temporal: Any = None,
    upcoming: FrameJob | None = None,
) -> FrameOutcome:
    """Denoise one frame (and its ``options.output.aovs``) and write its outputs.

    ``temporal``: an `oidn_gpu.sequence.temporal_frames.TemporalFrames` that denoises the beauty
    with the history of the frames before (frames in order); its restarts go to ``warn``.
    ``upcoming``: the next frame of a temporal run, read (and staged on the device) while
    this one is denoised; its stage times stay its own (`FrameOutcome.others_s`).

    ``warn`` receives this frame's `NonFiniteInputWarning` messages, the count of NaN
    and infinite pixels of each input image, and the warning about non-finite output
    pixels (without ``warn``, a `NonFiniteOutputWarning`); other warnings are issued as
    usual.

    Raises:
        io.ImageFileError: a file is unreadable, lacks a layer, or cannot be written.
        InvalidArgumentError: image sizes differ, or an option needs an OpenEXR output.
    """
    output = options.output
    start = time.perf_counter()
    read_before = None
    if temporal is not None:
        frame, read_before = temporal.load(job, options.inputs, lightmap=pool.config.lightmap)
    else:
        frame = load_frame(job, options.inputs, lightmap=pool.config.lightmap)
    read = time.perf_counter()
    hdr, srgb = resolve_mode(options.inputs, frame.color)
    denoiser = pool.get(hdr, srgb)
    lossless = exr.is_exr(job.output) and frame.color.file_format == exr.EXR_FORMAT
    passes = _passes(job, frame, output, lossless)
    ahead_s = 0.0
    if temporal is not None:
        result, denoised, ahead_s = _denoise_temporal(
            temporal, job, frame, passes, denoiser, upcoming, options, pool, warn
        )
    else:
        result, denoised = _denoise_alone(job, frame, passes, denoiser, output, progress, warn)
    frame = _with_alpha(frame, pool, output)
    frame, nonfinite = _check_output(job, frame, result, denoised, options, hdr, warn)
    denoised_at = time.perf_counter()
    _write_outputs(job, frame, result, denoised, options, lossless)
    mode = "hdr" if hdr else ("srgb" if srgb else "ldr")
    outcome = _outcome(frame, denoised, mode, nonfinite)
    if temporal is not None:
        outcome = _with_temporal(outcome, temporal.report, job)
    # "denoise" includes the AOV layers' reads (small beside their denoise)
    read_s = read - start if read_before is None else read_before
    outcome.stages.update(
        read=read_s, denoise=denoised_at - read - ahead_s, write=time.perf_counter() - denoised_at
    )
    return dataclasses.replace(outcome, others_s=(read - start) - read_s + ahead_s)


def _warn_beauty_inputs(frame: LoadedFrame, warn: Warn | None) -> None:
    """The non-finite pixels of the colour, albedo and normal images said to ``warn``."""
    if warn is not None:
        inputs = [("color", frame.color.pixels), ("albedo", frame.albedo), ("normal", frame.normal)]
        _warn_nonfinite_inputs(inputs, warn)


def _denoise_alone(
    job: FrameJob,
    frame: LoadedFrame,
    passes: Sequence[tuple[str, io.Layer, bool]],
    denoiser: Any,
    output: OutputOptions,
    progress: Progress | None,
    warn: Warn | None,
) -> tuple[np.ndarray, list[DenoisedPass]]:
    """The beauty denoised on its own, then the ``--aovs`` and ``--aovs-sum`` passes one by
    one, those of ``--aovs-sum`` adjusted to add up to the beauty (`_reconcile`)."""
    _warn_beauty_inputs(frame, warn)
    part = _scaled(progress, 0.0, 1.0 / (1 + len(passes)))
    result = _denoise_image(denoiser, frame.color.pixels, frame.albedo, frame.normal, part, warn)
    denoised = _denoise_passes(job, frame, passes, denoiser, progress, warn)
    return result, _reconcile(result, denoised, output.aovs_sum, passes)


def _denoise_temporal(
    temporal: Any,
    job: FrameJob,
    frame: LoadedFrame,
    passes: Sequence[tuple[str, io.Layer, bool]],
    denoiser: Any,
    upcoming: FrameJob | None,
    options: SequenceOptions,
    pool: DenoiserPool,
    warn: Warn | None,
) -> tuple[np.ndarray, list[DenoisedPass], float]:
    """The beauty denoised with the history of the frames before, its ``--aovs-sum``
    passes carried through that history (so they add up to it; its restarts said to
    ``warn``), and the seconds of the call that were other frames' (the next frame read,
    and its GPU work run ahead), less this frame's GPU work run ahead in the call before.

    Raises:
        InvalidArgumentError: ``--aovs`` asked for (only ``--aovs-sum`` is carried).
    """
    if options.output.aovs:
        raise InvalidArgumentError(
            "--temporal carries only the passes of --aovs-sum; it cannot be used with --aovs"
        )
    pass_images = read_summed_passes(job, frame, [name for name, _, _ in passes])
    _warn_beauty_inputs(frame, warn)
    result, restarts = temporal.denoise(
        job.color,
        frame,
        denoiser,
        upcoming=upcoming,
        inputs=options.inputs,
        lightmap=pool.config.lightmap,
        aovs={name: image.pixels[:, :, :3] for name, image in pass_images.items()},
    )
    for text in restarts if warn is not None else ():
        warn(text)
    results = temporal.aov_results
    denoised = [
        (layer, image, _with_rest(results[name], image), True)
        for (name, layer, _), image in zip(passes, pass_images.values(), strict=True)
    ]
    return result, denoised, temporal.ahead_s - temporal.carried_s


def _check_output(
    job: FrameJob,
    frame: LoadedFrame,
    result: np.ndarray,
    denoised: Sequence[DenoisedPass],
    options: SequenceOptions,
    hdr: bool,
    warn: Warn | None,
) -> tuple[LoadedFrame, int]:
    """The denoised images' non-finite pixels said (`_warn_nonfinite`) and counted, and the
    frame with a note when its HDR result goes to a format that clips it (`_note_clipped`;
    not when a display's view maps the HDR values itself)."""
    nonfinite = [("the color", _nonfinite_pixels(result))] + [
        (f"layer '{layer_label(layer.name)}'", _nonfinite_pixels(values))
        for layer, _, values, _ in denoised
    ]
    _warn_nonfinite(nonfinite, result.shape, warn)
    if not options.color.shown:
        frame = _note_clipped(job, frame, result, hdr)
    return frame, sum(n for _, n in nonfinite)


def _passes(
    job: FrameJob, frame: LoadedFrame, output: OutputOptions, lossless: bool
) -> list[tuple[str, io.Layer, bool]]:
    """The ``--aovs`` passes of the frame: ``(name asked for, layer, guided by the albedo
    and normal)``.

    Raises:
        InvalidArgumentError: layers asked for where the output is not an OpenEXR written
            from an OpenEXR.
        io.ImageFileError: the beauty file has no such layer.
    """
    if (output.aovs or output.layer_name) and not lossless:
        flag = "--aovs" if output.aovs else "--layer-name"
        raise InvalidArgumentError(
            f"{flag} needs an OpenEXR input and output; '{job.color}' -> '{job.output}'"
        )
    passes = []
    summed = set(output.aovs_sum)
    for name in dict.fromkeys(output.aovs + output.aovs_sum):
        layer = io.match_layer(frame.layers, name)
        if layer is None:
            raise io.ImageFileError(
                f"'{job.color}' has no layer '{name}' (--aovs); its layers are "
                f"{io.describe_layers(frame.layers)}"
            )
        guided = name in summed or not aovs.is_color_only_aov(layer.name)
        passes.append((name, layer, guided))
    return passes


def _denoise_passes(
    job: FrameJob,
    frame: LoadedFrame,
    passes: Sequence[tuple[str, io.Layer, bool]],
    denoiser: Any,
    progress: Progress | None,
    warn: Warn | None,
) -> list[DenoisedPass]:
    """The ``--aovs`` and ``--aovs-sum`` passes read and denoised one by one (their share of
    the frame's progress after the beauty's)."""
    share = 1.0 / (1 + len(passes))
    denoised: list[DenoisedPass] = []
    for index, (name, layer, guided) in enumerate(passes, start=1):
        image = io.read_layer(job.color, layer)
        if warn is not None:
            _warn_nonfinite_inputs([(f"AOV '{name}'", image.pixels)], warn)
        albedo, normal = (frame.albedo, frame.normal) if guided else (None, None)
        part = _scaled(progress, index * share, share)
        values = _denoise_image(denoiser, image.pixels, albedo, normal, part, warn)
        denoised.append((layer, image, values, guided))
    return denoised


def read_summed_passes(
    job: FrameJob, frame: LoadedFrame, names: Sequence[str]
) -> dict[str, io.Image]:
    """The ``--aovs-sum`` layers ``names`` of a ``--temporal`` frame, each of the beauty's
    three colour channels (and maybe an alpha).

    Raises:
        io.ImageFileError: the beauty file has no such layer.
        InvalidArgumentError: a layer without three colour channels.
    """
    images = {}
    for name in names:
        layer = io.match_layer(frame.layers, name)
        if layer is None:
            raise io.ImageFileError(
                f"'{job.color}' has no layer '{name}' (--aovs-sum); its layers are "
                f"{io.describe_layers(frame.layers)}"
            )
        image = io.read_layer(job.color, layer)
        if image.pixels.shape[2] < 3 or frame.color.pixels.shape[2] < 3:
            raise InvalidArgumentError(
                f"layer '{layer_label(layer.name)}' (--aovs-sum) has {image.pixels.shape[2]} "
                "channels; --temporal adds up passes of three colour channels"
            )
        images[name] = image
    return images


def _with_rest(values: np.ndarray, image: io.Image) -> np.ndarray:
    """A pass's three denoised channels with its other channels (an alpha) as they were."""
    return np.concatenate([values, image.pixels[:, :, 3:]], axis=2)


def _with_alpha(frame: LoadedFrame, pool: DenoiserPool, output: OutputOptions) -> LoadedFrame:
    """The frame with its alpha denoised when ``output.alpha`` says so (and it has one)."""
    if output.alpha != "denoise" or frame.alpha is None:
        return frame
    alpha = denoise_alpha(pool.alpha(), frame.alpha, frame.albedo)
    return dataclasses.replace(frame, alpha=alpha)


def _reconcile(
    result: np.ndarray,
    denoised: list[DenoisedPass],
    summed: Sequence[str],
    passes: Sequence[tuple[str, io.Layer, bool]],
) -> list[DenoisedPass]:
    """The passes of ``--aovs-sum`` adjusted to add up to the denoised beauty ``result``
    (`oidn_gpu.image.aov_sum.reconcile`); the other passes as they are.

    Raises:
        InvalidArgumentError: a summed layer whose channels are not the beauty's.
    """
    if not summed:
        return denoised
    colour = result.shape[2]
    indices = [i for i, (name, _, _) in enumerate(passes) if name in summed]
    for i in indices:
        layer, _, values, _ = denoised[i]
        if values.shape[2] < colour:
            raise InvalidArgumentError(
                f"layer '{layer_label(layer.name)}' (--aovs-sum) has {values.shape[2]} "
                f"channels; expected the beauty's {colour}"
            )
    parts = aov_sum.reconcile(result, [denoised[i][2][:, :, :colour] for i in indices])
    out = list(denoised)
    for i, part in zip(indices, parts, strict=True):
        layer, image, values, guided = out[i]
        out[i] = (layer, image, np.concatenate([part, values[:, :, colour:]], axis=2), guided)
    return out


def _warn_nonfinite_inputs(images: Sequence[tuple[str, Any]], warn: Warn) -> None:
    """Count the NaN and infinite pixels of each input image (`process.nonfinite_message`)."""
    for name, pixels in images:
        text = None if pixels is None else process.nonfinite_message(name, pixels)
        if text is not None:
            warn(text)


def _denoise_image(
    denoiser: Any,
    color: np.ndarray,
    albedo: Any,
    normal: Any,
    progress: Progress | None,
    warn: Warn | None,
) -> np.ndarray:
    """The denoised ``H x W x C`` float32 image (C: the color's channels); the
    `NonFiniteInputWarning` of the denoiser go to ``warn`` when given."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NonFiniteInputWarning)
        result = denoiser.denoise(color, albedo, normal, progress=progress)
    for w in caught:
        if issubclass(w.category, NonFiniteInputWarning) and warn is not None:
            warn(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    result = np.asarray(result, dtype=np.float32)
    if result.ndim == 2:
        result = result[:, :, None]
    return result[:, :, : color.shape[2]]


def _write_outputs(
    job: FrameJob,
    frame: LoadedFrame,
    result: np.ndarray,
    denoised: Sequence[DenoisedPass],
    options: SequenceOptions,
    lossless: bool,
) -> None:
    """Write the frame's output (an OpenEXR from an OpenEXR keeps the whole input; an 8-bit
    one through the display and view when asked for) and its noisy | denoised preview."""
    colors = options.color
    if lossless:
        _write_exr(job, frame, result, denoised, options.output, options.software, colors)
    elif colors.shown and color.is_display_output(job.output):
        _write_shown(job, frame, result, options)
    else:
        full = result if frame.alpha is None else np.concatenate([result, frame.alpha], axis=2)
        io.write_image_atomic(
            job.output,
            full,
            channels=_output_channels(frame.color.pixels.shape[2], frame.alpha is not None),
            like=frame.color,
            encoding=frame.color.encoding,
            software=options.software,
            colorspace=color.labelled_space(colors, frame.color, job.output),
        )
    if job.side_by_side is not None:
        space = color.input_space(colors, frame.color) if colors.shown else None
        write_side_by_side(
            job.side_by_side,
            frame.color.pixels,
            result,
            encoding=frame.color.encoding,
            color=colors,
            space=space,
        )


def _write_shown(
    job: FrameJob, frame: LoadedFrame, result: np.ndarray, options: SequenceOptions
) -> None:
    """Write the denoised beauty through the display and view (`color.to_display`) as
    display values (8-bit, or 16-bit where the input was)."""
    colors = options.color
    assert colors.display is not None and colors.view is not None  # colors.shown
    space = color.input_space(colors, frame.color)
    values = color.to_display(result, space, colors.display, colors.view)
    if frame.alpha is not None:
        values = np.concatenate([values, frame.alpha], axis=2)
    io.write_image_atomic(
        job.output,
        values,
        channels=_output_channels(3, frame.alpha is not None),
        like=frame.color,
        encoding=io.SRGB_ENCODING,
        pixel_format="uint16" if frame.color.pixel_format == "uint16" else "uint8",
        software=options.software,
    )


def _note_clipped(job: FrameJob, frame: LoadedFrame, result: np.ndarray, hdr: bool) -> LoadedFrame:
    """The frame with a note when an HDR result goes to a format of display values in
    [0, 1] (PNG, JPEG, ...), which clips what lies above 1."""
    name = io.output_format_name(job.output)
    integer = io.is_integer_format(name) or (name == "pnm" and job.output.suffix != ".pfm")
    if not (hdr and integer):
        return frame
    above = int(np.count_nonzero((result > 1.0).any(axis=2)))
    if not above:
        return frame
    text = (
        f"'{job.output}' holds display values in [0, 1]: {above} of "
        f"{result.shape[0] * result.shape[1]} pixels of the HDR result of '{job.color}' are "
        "brighter and were clipped; write .exr, .pfm or .hdr to keep them"
    )
    return dataclasses.replace(frame, notes=(*frame.notes, FrameNote(NOTE_HDR_CLIPPED, text)))


def _outcome(
    frame: LoadedFrame, denoised: Sequence[DenoisedPass], mode: str, nonfinite: int
) -> FrameOutcome:
    """The frame's inputs in words (``color '...', albedo '...'; hdr``) and as data."""
    aov_words = [
        f"'{layer_label(layer.name)}' ({'albedo-guided' if guided else 'color-only'})"
        for layer, _, _, guided in denoised
    ]
    used = frame.used + (f", aovs {', '.join(aov_words)}" if aov_words else "") + f"; {mode}"
    layers = dict(frame.sources)
    layers["aovs"] = [{"layer": layer.name, "guided": guided} for layer, _, _, guided in denoised]
    layers["mode"] = mode
    return FrameOutcome(used, layers, frame.notes, nonfinite)


# The note of a temporal run without a depth pass (said once per run).
NOTE_NO_DEPTH = "temporal-no-depth"


def _with_temporal(outcome: FrameOutcome, report: dict[str, Any], job: FrameJob) -> FrameOutcome:
    """The outcome of a temporal frame: the motion and depth passes in its words and
    ``layers['temporal']`` (`oidn_gpu.sequence.temporal_frames.TemporalFrames.report`), and a
    note where the frame has no depth pass."""
    if not report:
        return outcome
    depth = report.get("depth")
    words = f"temporal: motion '{report.get('motion')}' ({report.get('motion_convention')}), " + (
        f"depth '{depth}'" if depth else "no depth"
    )
    notes = outcome.notes
    if not depth:
        names = ", ".join(aovs.DEPTH_LAYER_NAMES)
        notes += (
            FrameNote(
                NOTE_NO_DEPTH,
                f"{job.color}: no depth pass (looked for {names}); depth is optional: the "
                "albedo and normal tell where history was hidden before, which keeps less "
                "of it (docs/aovs.md, Motion vectors)",
            ),
        )
    layers = {**outcome.layers, "temporal": dict(report)}
    return dataclasses.replace(outcome, used=f"{outcome.used}; {words}", layers=layers, notes=notes)


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
    denoised_aovs: Sequence[DenoisedPass],
    output: OutputOptions,
    software: str,
    colors: color.ColorOptions,
) -> None:
    """Write the input file again with the denoised beauty (and passes) in it, its colour
    space the one named on the command line (else the input's, kept)."""
    contents = exr.read_file(job.color)
    sub = frame.color_subimage
    if colors.input_space:
        named = color.resolve_space(colors.input_space)
        contents.parts[sub].spec.attribute(color.COLORSPACE_ATTRIBUTE, named)
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
    if output.alpha == "denoise" and frame.alpha_channel and not output.layer_name:
        contents.replace_channels(sub, [frame.alpha_channel], frame.alpha)
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
