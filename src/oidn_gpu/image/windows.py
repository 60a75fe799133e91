"""Pixel windows: where an image's pixels lie, and matching auxiliary images to the beauty.

OpenEXR (and OpenImageIO for every format) places pixels in one coordinate space: the
*data window* is the rectangle the file holds pixels for, the *display window* the frame
they belong to (a crop render holds a data window inside its display window). Formats
without windows (PNG, PFM, ...) hold both at origin 0, 0 with the image's size.

An albedo or normal is matched to the beauty by pixel coordinates, as compositing tools
do: it is used over the beauty's data window when both have the same data window, or
when both have the same display window and the aux's data window covers the beauty's
(a full-frame AOV for a crop-rendered beauty). Anything else is refused: an aux whose
pixels would sit beside the beauty's, or that has no pixels for part of it, would guide
the denoiser with the wrong image.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from oidn_gpu.errors import InvalidArgumentError


@dataclass(frozen=True)
class Window:
    """A rectangle of pixel coordinates: origin ``x``, ``y`` (the top-left pixel) and size."""

    x: int
    y: int
    width: int
    height: int

    def __str__(self) -> str:
        """``(10, 10)-(73, 73)``: the first and last pixel, as OpenEXR tools print windows."""
        return f"({self.x}, {self.y})-({self.x + self.width - 1}, {self.y + self.height - 1})"

    def covers(self, other: Window) -> bool:
        """Whether every pixel of ``other`` lies inside this window."""
        return (
            self.x <= other.x
            and self.y <= other.y
            and other.x + other.width <= self.x + self.width
            and other.y + other.height <= self.y + self.height
        )


@dataclass(frozen=True)
class Placement:
    """An image's data window and display window (both the image's size at 0, 0 for
    formats without windows)."""

    data: Window
    display: Window


def align_aux(
    pixels: np.ndarray,
    placement: Placement,
    color: Placement,
    *,
    kind: str,
    source: str,
    color_source: str,
) -> np.ndarray:
    """The pixels of an auxiliary image over the beauty's data window.

    Args:
        pixels: the aux image, H x W x C over ``placement.data``.
        placement: the aux image's windows.
        color: the beauty's windows.
        kind: ``'albedo'`` or ``'normal'``, for messages.
        source, color_source: where the aux image and the beauty come from, for messages.

    Returns:
        ``pixels`` itself when the data windows are equal, else a view of the part of it
        over the beauty's data window.

    Raises:
        InvalidArgumentError: the aux image does not cover the beauty's data window in the
            same display window (the message shows both).
    """
    if placement.data == color.data:
        return pixels
    aux, want = placement.data, color.data
    if placement.display != color.display or not aux.covers(want):
        where = (
            f"display window {placement.display} (the color's is {color.display})"
            if placement.display != color.display
            else "no pixels for part of the color"
        )
        raise InvalidArgumentError(
            f"the {kind} {source} has data window {aux} ({aux.width}x{aux.height}) but the "
            f"color {color_source} has {want} ({want.width}x{want.height}), and it has "
            f"{where}; expected the {kind} to cover the color's data window in the same "
            "display window (pixels are matched by their coordinates)"
        )
    top, left = want.y - aux.y, want.x - aux.x
    return pixels[top : top + want.height, left : left + want.width]
