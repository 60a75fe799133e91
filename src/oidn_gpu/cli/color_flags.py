"""``oidn-gpu denoise``'s colour-management flags (``--input-colorspace``, ``--display``,
``--view``) and the checked `ColorOptions` they make (`oidn_gpu.image.color`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from oidn_gpu.cli.usage import UsageError
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.color import BUILTIN_CONFIG, ColorOptions, check_options, is_display_output
from oidn_gpu.sequence import FrameJob


def add_color_flags(p: argparse.ArgumentParser) -> None:
    """The flags, in their own group."""
    group = p.add_argument_group(
        "colour management (OpenColorIO: the config $OCIO names, else the built-in "
        f"{BUILTIN_CONFIG})"
    )
    group.add_argument(
        "--input-colorspace",
        metavar="NAME",
        help="colour space of the inputs' values, e.g. ACEScg (default: each file's "
        "colour-space metadata, else linear Rec.709 for float files and sRGB for 8-bit "
        "ones); OpenEXR outputs are labelled with it",
    )
    group.add_argument(
        "--display",
        metavar="NAME",
        help="show 8-bit outputs (PNG, JPEG, TIFF) and the --side-by-side preview through "
        "this OpenColorIO display, e.g. 'sRGB - Display' (default: the sRGB curve, and the "
        "preview's Reinhard tonemap)",
    )
    group.add_argument(
        "--view",
        metavar="NAME",
        help="the display's view, e.g. 'ACES 2.0 - SDR 100 nits (Rec.709)' (default: the "
        "display's default view); alone, it uses the config's default display",
    )


def color_options(args: argparse.Namespace) -> ColorOptions:
    """The checked options of the flags.

    Raises:
        UsageError: an unknown colour space, display or view (the valid ones listed), or a
            config that cannot be loaded.
    """
    options = ColorOptions(args.input_colorspace, args.display, args.view)
    if options == ColorOptions():
        return options
    try:
        return check_options(options)
    except InvalidArgumentError as err:
        raise UsageError(str(err)) from None


def unused_display_note(options: ColorOptions, jobs: Sequence[FrameJob]) -> str | None:
    """A note when a display is asked for but nothing is shown through it (float outputs
    and no preview), else None."""
    if not options.shown:
        return None
    if any(job.side_by_side is not None or is_display_output(job.output) for job in jobs):
        return None
    return (
        f"note: --display '{options.display}' / --view '{options.view}' apply to 8-bit "
        "outputs (PNG, JPEG, TIFF) and --side-by-side previews; the float outputs keep "
        "the input's values"
    )
