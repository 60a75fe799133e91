"""Colour management through OpenColorIO, as OpenImageIO exposes it.

The config is the one ``$OCIO`` names, else OpenColorIO's built-in ACES config
(``ocio://default``: displays such as ``sRGB - Display``, views such as
``ACES 2.0 - SDR 100 nits (Rec.709)``, spaces such as ``ACEScg``).

The denoiser runs on the input's values as they are, in the input's colour space. The
colour space matters where values are shown: an 8-bit output (PNG, JPEG, TIFF) or the
side-by-side preview goes through the display and view (`to_display`, OpenImageIO's
``ImageBufAlgo.ociodisplay``) when one is asked for, and a float output (OpenEXR) is
labelled with the input's colour space. The input's colour space is the one named, else
the file's ``oiio:ColorSpace`` metadata (an OpenEXR's ``colorInteropID``), else linear
Rec.709 for float files and sRGB-encoded Rec.709 for 8-bit ones.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.image_types import SRGB_ENCODING, Image, library_error
from oidn_gpu.image.image_types import oiio as _oiio
from oidn_gpu.image.writer import is_integer_format, is_integer_output, output_format_name

BUILTIN_CONFIG = "ocio://default"
COLORSPACE_ATTRIBUTE = "oiio:ColorSpace"
# OpenColorIO's interop names (aliases in the built-in config) of the spaces assumed when
# neither the command line nor the file names one.
LINEAR_REC709 = "lin_rec709_scene"
SRGB_REC709 = "srgb_rec709_scene"


@dataclass(frozen=True)
class ColorOptions:
    """The colour management asked for (all None: none; outputs as without it).

    Attributes:
        input_space: the colour space of the inputs' values; None: each file's metadata,
            else linear Rec.709 (float files) or sRGB-encoded Rec.709 (8-bit files).
        display, view: the display and view 8-bit outputs and previews are shown
            through; None: the sRGB curve (outputs) and the documented tonemap (previews).
    """

    input_space: str | None = None
    display: str | None = None
    view: str | None = None

    @property
    def shown(self) -> bool:
        """Whether outputs and previews go through a display and view."""
        return self.display is not None


def config_name() -> str:
    """The config in use: ``$OCIO`` when set, else the built-in ``ocio://default``."""
    return os.environ.get("OCIO") or BUILTIN_CONFIG


@functools.lru_cache(maxsize=4)
def _config(name: str) -> object:
    oiio = _oiio()
    config = oiio.ColorConfig(name)
    error = library_error(config.geterror, "")
    if error or config.getNumColorSpaces() == 0:
        raise InvalidArgumentError(
            f"cannot load the OpenColorIO config '{name}'"
            + (f": {error}" if error else "")
            + ("; check $OCIO" if name != BUILTIN_CONFIG else "")
        )
    return config


def color_config() -> object:
    """OpenImageIO's ``ColorConfig`` of `config_name`.

    Raises:
        InvalidArgumentError: the config cannot be loaded.
    """
    return _config(config_name())


def _listed(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def resolve_space(name: str, *, what: str = "--input-colorspace") -> str:
    """The config's name of a colour space, role or alias (``acescg`` -> ``ACEScg``,
    ``lin_ap1_scene`` -> ``ACEScg``).

    Raises:
        InvalidArgumentError: the config has no such space; the message lists its spaces.
    """
    config = color_config()
    spaces = list(config.getColorSpaceNames())
    resolved = config.resolve(name) if name else ""
    if resolved not in spaces:
        raise InvalidArgumentError(
            f"{what}: unknown colour space '{name}' in the OpenColorIO config "
            f"'{config_name()}'; its colour spaces are {_listed(spaces)}"
        )
    return str(resolved)


def check_options(options: ColorOptions) -> ColorOptions:
    """The options with every name checked against the config and the defaults filled in:
    a view without a display takes the config's default display, a display without a view
    its default view.

    Raises:
        InvalidArgumentError: an unknown display, view or colour space; the message lists
            the valid ones.
    """
    space = resolve_space(options.input_space) if options.input_space else None
    if options.display is None and options.view is None:
        return ColorOptions(space)
    config = color_config()
    displays = list(config.getDisplayNames())
    display = options.display or str(config.getDefaultDisplayName())
    if display not in displays:
        raise InvalidArgumentError(
            f"--display: unknown display '{display}' in the OpenColorIO config "
            f"'{config_name()}'; its displays are {_listed(displays)}"
        )
    views = list(config.getViewNames(display))
    view = options.view or str(config.getDefaultViewName(display))
    if view not in views:
        raise InvalidArgumentError(
            f"--view: unknown view '{view}' of the display '{display}'; its views are "
            f"{_listed(views)}"
        )
    return ColorOptions(space, display, view)


def file_space(image: Image) -> str | None:
    """The colour space a file's metadata names (``oiio:ColorSpace``), or None."""
    for attribute in image.attributes:
        if attribute.name == COLORSPACE_ATTRIBUTE and str(attribute.value).strip():
            return str(attribute.value)
    return None


def input_space(options: ColorOptions, image: Image) -> str:
    """The colour space of an input's values (module doc), as the config names it.

    Raises:
        InvalidArgumentError: the name (given, or the file's) is not in the config.
    """
    if options.input_space:
        return resolve_space(options.input_space)
    named = file_space(image)
    if named is not None:
        where = f"the colour space of '{image.path}' (its metadata; pass --input-colorspace)"
        return resolve_space(named, what=where)
    default = SRGB_REC709 if image.encoding == SRGB_ENCODING else LINEAR_REC709
    return resolve_space(default, what="the default colour space (pass --input-colorspace)")


def labelled_space(
    options: ColorOptions, image: Image, output: str | os.PathLike[str]
) -> str | None:
    """The colour space an output of this input is labelled with: for a float output of
    a linear input, the one named on the command line, else the file's own (kept as it
    is); else None (no label: an 8-bit output holds sRGB-encoded values)."""
    if image.encoding == SRGB_ENCODING or is_integer_output(output):
        return None
    if options.input_space:
        return resolve_space(options.input_space)
    return file_space(image)


def to_display(pixels: np.ndarray, space: str, display: str, view: str) -> np.ndarray:
    """``H x W x 3`` display values in [0, 1] of ``H x W x C`` pixels in colour space
    ``space`` through ``display`` and ``view`` (OpenImageIO's ``ociodisplay``); one
    channel is shown grey, two as (c0, c1, c1), a fourth (alpha) is left out.

    Raises:
        InvalidArgumentError: OpenColorIO refuses the transform.
    """
    oiio = _oiio()
    rgb = _rgb(pixels)
    height, width = rgb.shape[:2]
    source = oiio.ImageBuf(oiio.ImageSpec(width, height, 3, "float"))
    source.set_pixels(oiio.ROI(0, width, 0, height), np.ascontiguousarray(rgb))
    shown = oiio.ImageBufAlgo.ociodisplay(
        source, display, view, fromspace=space, unpremult=False, colorconfig=config_name()
    )
    if shown.has_error:
        message = library_error(shown.geterror, "unknown error")
        raise InvalidArgumentError(
            f"OpenColorIO cannot show '{space}' on '{display}' / '{view}': {message}"
        )
    values = np.asarray(shown.get_pixels(oiio.FLOAT), dtype=np.float32).reshape(height, width, -1)
    return np.clip(np.nan_to_num(values[:, :, :3], nan=0.0), 0.0, 1.0)


def _rgb(pixels: np.ndarray) -> np.ndarray:
    arr = np.asarray(pixels, dtype=np.float32)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    channels = arr.shape[2]
    if channels == 1:
        return np.repeat(arr, 3, axis=2)
    if channels == 2:
        return np.concatenate([arr, arr[:, :, 1:2]], axis=2)
    return arr[:, :, :3]


def is_display_output(path: str | os.PathLike[str]) -> bool:
    """Whether an output file holds display values when a display is asked for: formats
    of integer pixels (PNG, JPEG, ...) and TIFF (written as integers then)."""
    name = output_format_name(path)
    return is_integer_format(name) or name == "tiff"
