"""Whether a frame's written files are complete: the one test a resume skips a frame by.

A frame is complete when its output (every part of a multi-part file) and its
side-by-side preview, if one is asked for, exist, decode to the last pixel, and have
the sizes the frame writes: the input's size (its first part), and for the preview the
input's height by twice its width plus the gutter. Outputs are written atomically (a
temporary file renamed into place), so a missing file means the run stopped before that
write; a file that another tool left half-written, or truncated, fails to decode. A
check that fails only sends the frame to be denoised again, never skips one that is not
there.
"""

from __future__ import annotations

import os
from pathlib import Path

from oidn_gpu.image import io
from oidn_gpu.image.encoded import missing_end
from oidn_gpu.image.preview import GUTTER_PX


def incomplete_reason(
    color: str | os.PathLike[str],
    output: str | os.PathLike[str],
    preview: str | os.PathLike[str] | None = None,
) -> str | None:
    """Why the outputs of the frame whose input is ``color`` are not complete, or None.

    Args:
        color: the frame's input (beauty) file.
        output: its denoised output file.
        preview: its side-by-side preview, or None when none is written.

    Returns:
        None when complete; else one phrase: ``"'out.exr' is missing"``, ``"'out.exr'
        does not decode (...)"``, ``"'out.exr' is 32x16 px; expected 64x64"``.

    Raises:
        MissingDependencyError: OpenImageIO is not installed.
    """
    output, color = Path(output), Path(color)
    for path in (output, None if preview is None else Path(preview)):
        if path is not None and not path.is_file():
            return f"'{path}' is missing"
    try:
        source = io.read_image(color)
    except (OSError, ValueError) as err:  # ImageFileError is an OSError
        return f"its input does not decode ({err})"
    try:
        sizes = [  # every part decoded, one at a time
            _size(io.read_image(output, part))
            for part in sorted({layer.subimage for layer in io.list_layers(output)})
        ]
    except (OSError, ValueError) as err:
        return f"'{output}' does not decode ({err})"
    if not sizes:
        return f"'{output}' holds no image"
    cut = missing_end(output, io.describe_parts(output)[0].file_format)
    if cut is not None:
        return f"'{output}' is cut short ({cut})"
    expected = _size(source)
    if sizes[0] != expected:
        return f"'{output}' is {sizes[0]}; expected {expected}"
    if preview is None:
        return None
    try:
        shown = io.read_image(preview)
    except (OSError, ValueError) as err:
        return f"'{preview}' does not decode ({err})"
    cut = missing_end(preview, shown.file_format)
    if cut is not None:
        return f"'{preview}' is cut short ({cut})"
    width = 2 * source.width + GUTTER_PX
    if (shown.height, shown.width) != (source.height, width):
        return f"'{preview}' is {_size(shown)}; expected {width}x{source.height} px"
    return None


def is_complete(
    color: str | os.PathLike[str],
    output: str | os.PathLike[str],
    preview: str | os.PathLike[str] | None = None,
) -> bool:
    """Whether the frame's output and preview are complete (`incomplete_reason` is None)."""
    return incomplete_reason(color, output, preview) is None


def _size(image: io.Image) -> str:
    return f"{image.width}x{image.height} px"
