"""What a run of frames is given: the frames (`FrameJob`), where the images are in the
files (`InputOptions`), what OpenEXR outputs hold (`OutputOptions`) and how the run
reads, writes and reports (`SequenceOptions`, one value for the loop and the farm)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.color import ColorOptions

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
        aovs_sum: layers of the beauty file whose sum is the beauty (light-path passes):
            denoised with the beauty's albedo and normal, then adjusted to add up to the
            denoised beauty (`oidn_gpu.image.aov_sum`); they need not be in ``aovs``.
        alpha: ``"copy"`` passes the beauty's alpha through; ``"denoise"`` denoises it
            (`oidn_gpu.filter_alpha.denoise_alpha`).
    """

    layer_name: str | None = None
    only_beauty: bool = False
    aovs: tuple[str, ...] = ()
    aovs_sum: tuple[str, ...] = ()
    alpha: str = "copy"

    def __post_init__(self) -> None:
        if self.layer_name is not None and not self.layer_name.strip():
            raise InvalidArgumentError(
                "the layer name is empty; expected a name such as 'Denoised'"
            )
        if self.alpha not in ("copy", "denoise"):
            raise InvalidArgumentError(
                f"the alpha mode is {self.alpha!r}; expected 'copy' or 'denoise'"
            )
        if self.only_beauty and (self.aovs or self.aovs_sum or self.layer_name is not None):
            raise InvalidArgumentError(
                "--only-beauty writes the beauty alone; it cannot be used with --aovs, "
                "--aovs-sum or --layer-name"
            )


@dataclass(frozen=True)
class SequenceOptions:
    """How a run reads, writes and reports its frames (`run_sequence`, and a farm's
    driver and workers: it pickles).

    Attributes:
        inputs: where to find the images in the files.
        output: what OpenEXR outputs hold besides the beauty.
        skip_existing: leave frames whose outputs are complete alone
            (`output_is_complete`); a frame with a missing, partial or foreign
            half-written output or preview is denoised again.
        show_progress: True/False, or None for "when the stream is a terminal".
        verbose: print each frame's inputs and tracebacks of failures.
        quiet: print only errors.
        software: the ``Software`` attribute written into outputs.
        color: the inputs' colour space, and the display and view 8-bit outputs and
            previews are shown through (`oidn_gpu.image.color`).
    """

    inputs: InputOptions = field(default_factory=InputOptions)
    output: OutputOptions = field(default_factory=OutputOptions)
    skip_existing: bool = False
    show_progress: bool | None = None
    verbose: bool = False
    quiet: bool = False
    software: str = "oidn-gpu"
    color: ColorOptions = field(default_factory=ColorOptions)
