"""One frame's images read from its files: the beauty (and alpha), the albedo and the
normal, from separate files or from layers of one multi-layer EXR (`load_frame`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import io, windows
from oidn_gpu.sequence.options import AuxSource, FrameJob, InputOptions

# Notes a run gives once (the first frame they apply to), not for every frame.
NOTE_NORMAL_WITHOUT_ALBEDO = "normal-without-albedo"
NOTE_NO_AUX = "no-aux"
NOTE_ALBEDO_WITHOUT_NORMAL = "albedo-without-normal"
NOTE_AUX_VALUES = "aux-values"
# An albedo is a reflectance in [0, 1]; renderers' filtered albedos overshoot 1 a little,
# so only values above this are noted (a colour pass given as the albedo, say).
ALBEDO_NOTE_ABOVE = 1.1
NOTE_ALPHA_DROPPED = "alpha-dropped"


@dataclass(frozen=True)
class FrameNote:
    """Something a run says once: a kind (NOTE_*) and the text for the first frame."""

    kind: str
    text: str


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


def layer_label(name: str) -> str:
    return name or io.ROOT_LAYER


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
    with io.one_decode_per_file():  # the beauty and its AOVs share one decode of the file
        return _load_frame(job, options, lightmap=lightmap)


def _load_frame(job: FrameJob, options: InputOptions, *, lightmap: bool) -> LoadedFrame:
    layers = io.list_layers(job.color)
    if options.color_layer is not None:
        color = io.read_layer(job.color, options.color_layer, with_alpha=True)
        color_label = options.color_layer
    else:
        layer = io.find_layer(layers, io.COLOR_LAYER_NAMES)
        if layer is None:
            raise io.ImageFileError(_no_beauty_text(job, options, layers))
        color = io.read_layer(job.color, layer, with_alpha=True)
        color_label = layer_label(layer.name)
    color, alpha, alpha_channel, alpha_note = _split_alpha(job, color)
    pixels = color.pixels
    # a RenderMan-style root alpha beside the beauty layer, where the output holds it
    root_alpha = alpha is None and alpha_note is None and "." in color.channels[0]
    if root_alpha and pixels.shape[2] + 1 in io.writable_channel_counts(job.output):
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
                text = _normal_only_text(job, sources, layers)
                notes.append(FrameNote(NOTE_NORMAL_WITHOUT_ALBEDO, text))
                normal, sources["normal"] = None, None
            elif normal is None and albedo is None:
                notes.append(FrameNote(NOTE_NO_AUX, _no_aux_text(job, layers)))
            elif normal is None:
                text = _albedo_only_text(job, sources, layers)
                notes.append(FrameNote(NOTE_ALBEDO_WITHOUT_NORMAL, text))
        notes += _aux_value_notes(job, sources, albedo, normal)
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


def _aux_value_notes(
    job: FrameJob,
    sources: dict[str, str | None],
    albedo: np.ndarray | None,
    normal: np.ndarray | None,
) -> list[FrameNote]:
    """Notes on an albedo or normal that is accepted but probably not what was meant: a
    one-channel normal (a depth or mask pass) and an albedo well above 1 (a colour pass)."""
    notes = []
    if normal is not None and normal.shape[2] == 1:
        notes.append(
            FrameNote(
                NOTE_AUX_VALUES,
                f"the normal '{sources['normal']}' of '{job.color}' has one channel: a normal "
                "has three (X, Y, Z), so this looks like a depth or mask pass; it is used as "
                "given, repeated on X, Y and Z. Name the normal with --normal-layer",
            )
        )
    if albedo is not None and albedo.size:
        peak = float(np.nanmax(albedo)) if np.isfinite(albedo).any() else 0.0
        if peak > ALBEDO_NOTE_ABOVE:
            notes.append(
                FrameNote(
                    NOTE_AUX_VALUES + "-albedo",
                    f"the albedo '{sources['albedo']}' of '{job.color}' reaches {peak:.3g}: an "
                    "albedo is a reflectance in [0, 1], so this looks like a colour or light "
                    "pass; it is used as given. Name the albedo with --albedo-layer",
                )
            )
    return notes


def _normal_only_text(
    job: FrameJob, sources: dict[str, str | None], layers: Sequence[io.Layer]
) -> str:
    return (
        f"'{job.color}' has a normal ('{sources['normal']}') but no albedo, and a normal is "
        "used only with an albedo: denoising with the color alone. "
        + _how_to_name(layers, ["albedo"])
    )


def _albedo_only_text(
    job: FrameJob, sources: dict[str, str | None], layers: Sequence[io.Layer]
) -> str:
    return (
        f"'{job.color}' has an albedo ('{sources['albedo']}') but no layer is named as a "
        "normal: denoising with the color and albedo, which keeps less detail than with a "
        "normal too. "
        + _how_to_name(layers, ["normal"])
        + "; naming the albedo with --albedo-layer says it is meant alone"
    )


def _no_aux_text(job: FrameJob, layers: Sequence[io.Layer]) -> str:
    return (
        f"'{job.color}' has no albedo or normal layer: denoising with the color alone, which "
        "keeps less detail. "
        + _how_to_name(layers, ["albedo", "normal"])
        + "; --no-aux says the color alone is meant"
    )


def _no_beauty_text(job: FrameJob, options: InputOptions, layers: Sequence[io.Layer]) -> str:
    """The error for a file whose beauty is not found under any known name: its layers and
    every pass still to name (the albedo and normal too, where they are not found either)."""
    missing = ["color"]
    for kind, named, given in (
        ("albedo", options.albedo_layer, job.albedo),
        ("normal", options.normal_layer, job.normal),
    ):
        looked_for = options.auto_aux and named is None and given is None
        if looked_for and io.find_layer(layers, _NAMES[kind]) is None:
            missing.append(kind)
    return f"cannot find the beauty in '{job.color}'. " + _how_to_name(layers, missing)


_NAMES = {"albedo": io.ALBEDO_LAYER_NAMES, "normal": io.NORMAL_LAYER_NAMES}
_WORDS = {"color": "beauty", "albedo": "albedo", "normal": "normal"}


def _how_to_name(layers: Sequence[io.Layer], kinds: Sequence[str]) -> str:
    """How to name each pass of ``kinds`` (``color``, ``albedo``, ``normal``) that was not
    found: the file's layers, the flags, and some of the names looked for."""
    files = [f"--{kind} FILE" for kind in kinds if kind != "color"]
    if len(layers) > 1 or any(layer.name for layer in layers):
        named = [f"the {_WORDS[kind]} with --{kind}-layer NAME" for kind in kinds]
        text = f"Its layers are {io.describe_layers(layers)}; name " + " and ".join(named)
        text += f" (or give {' and '.join(files)})" if files else ""
    else:
        text = f"It holds one image ({io.describe_layers(layers)})"
        if files:
            text += f"; give the {' and '.join(kinds)} as files with {' and '.join(files)}"
        return text
    aux = [kind for kind in kinds if kind != "color"]
    if aux:
        found = [f"{kind}: {_examples(_NAMES[kind])}" for kind in aux]
        text += "; layer names found without flags: " + "; ".join(found)
    return text


def _examples(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in names[:8]) + ", ..."


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
        image, label = io.read_layer(job.color, layer), layer_label(layer.name)
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
    """(hdr, srgb) for this frame: explicit, or HDR for float files and sRGB for integer ones.

    Raises:
        InvalidArgumentError: ``--hdr`` for an integer file, whose values are LDR: the rule
            of the API, which refuses integer arrays with ``hdr=True``.
    """
    mode = options.mode
    if mode == "auto":
        mode = "hdr" if color.is_float else "srgb"
    if mode == "hdr" and not color.is_float:
        raise InvalidArgumentError(
            f"--hdr cannot be used with '{color.path}': its {color.pixel_format} pixels hold "
            "LDR values in [0, 1] (as the API refuses integer arrays with hdr=True); HDR "
            "denoising needs a float file (EXR, PFM, HDR, float TIFF); use --srgb, the "
            "default for integer files, or --ldr"
        )
    return mode == "hdr", mode == "srgb"
