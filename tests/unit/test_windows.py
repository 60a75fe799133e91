"""Pixel windows and matching an aux image to the beauty (`oidn_gpu.image.windows`)."""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.windows import Placement, Window, align_aux

FRAME = Window(0, 0, 64, 48)


def _aux(window: Window) -> np.ndarray:
    """Pixels that hold their own coordinates: [..., 0] = x, [..., 1] = y."""
    ys, xs = np.mgrid[window.y : window.y + window.height, window.x : window.x + window.width]
    return np.dstack([xs, ys, np.zeros_like(xs)]).astype(np.float32)


def _align(aux: Placement, color: Placement) -> np.ndarray:
    return align_aux(
        _aux(aux.data), aux, color, kind="albedo", source="'a.exr'", color_source="'c.exr'"
    )


def test_windows_print_their_first_and_last_pixel_and_know_what_they_cover() -> None:
    assert str(Window(10, 10, 64, 64)) == "(10, 10)-(73, 73)"
    assert FRAME.covers(Window(8, 4, 56, 44)) and FRAME.covers(FRAME)
    assert not FRAME.covers(Window(8, 4, 57, 44)) and not FRAME.covers(Window(-1, 0, 4, 4))


def test_an_aux_of_the_same_data_window_is_used_as_it_is() -> None:
    placement = Placement(Window(5, 6, 16, 16), FRAME)
    pixels = _aux(placement.data)
    same = align_aux(pixels, placement, placement, kind="normal", source="", color_source="")
    assert same is pixels


def test_a_covering_aux_gives_the_pixels_at_the_beautys_coordinates() -> None:
    crop = Placement(Window(8, 12, 24, 16), FRAME)
    aligned = _align(Placement(FRAME, FRAME), crop)
    assert aligned.shape == (16, 24, 3)
    np.testing.assert_array_equal(aligned[0, 0, :2], [8, 12])
    np.testing.assert_array_equal(aligned[-1, -1, :2], [31, 27])


@pytest.mark.parametrize(
    ("aux", "why"),
    [
        (Placement(Window(10, 10, 64, 48), FRAME), "and it has no pixels for part of the color"),
        (
            Placement(Window(0, 0, 128, 96), Window(0, 0, 128, 96)),
            "and it has display window (0, 0)-(127, 95) (the color's is (0, 0)-(63, 47))",
        ),
    ],
)
def test_an_aux_that_does_not_cover_the_beauty_in_its_frame_is_refused(
    aux: Placement, why: str
) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        _align(aux, Placement(FRAME, FRAME))
    assert str(caught.value) == (
        f"the albedo 'a.exr' has data window {aux.data} ({aux.data.width}x{aux.data.height}) "
        "but the color 'c.exr' has "
        f"(0, 0)-(63, 47) (64x48), {why}; expected the albedo to cover the color's data "
        "window in the same display window (pixels are matched by their coordinates)"
    )
