"""OIDN's tile plan: the examples of semantics 6.2, placement rules of 6.3, and stitching."""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.tiling import (
    DEFAULT_MAX_TILE_PX,
    TILE_OVERLAP_BASE,
    TILE_OVERLAP_LARGE,
    TilePlan,
    max_tile_px_for,
    plan_tiles,
    plan_tiles_max_edge,
    round_up,
)


def assert_covers_once(plan: TilePlan) -> None:
    """Every image pixel is kept by exactly one tile, and every rectangle is in range."""
    kept = np.zeros((plan.height, plan.width), np.int32)
    for t in plan.tiles:
        assert t.in_y >= 0 and t.in_y + t.in_h <= plan.height
        assert t.in_x >= 0 and t.in_x + t.in_w <= plan.width
        assert t.in_y % plan.alignment == 0 and t.in_x % plan.alignment == 0
        assert t.buf_y >= 0 and t.buf_y + t.in_h <= plan.tile_h
        assert t.buf_x >= 0 and t.buf_x + t.in_w <= plan.tile_w
        # the kept rectangle lies inside the read rectangle
        assert t.in_y <= t.out_y and t.out_y + t.out_h <= t.in_y + t.in_h
        assert t.in_x <= t.out_x and t.out_x + t.out_w <= t.in_x + t.in_w
        assert t.src_y - t.buf_y == t.out_y - t.in_y
        assert t.src_x - t.buf_x == t.out_x - t.in_x
        assert t.out_h > 0 and t.out_w > 0
        kept[t.out_y : t.out_y + t.out_h, t.out_x : t.out_x + t.out_w] += 1
    assert (kept == 1).all()
    assert [t.index for t in plan.tiles] == list(range(plan.count_h * plan.count_w))


@pytest.mark.parametrize(
    ("width", "height", "overlap", "tile_wh", "count_wh"),
    [
        (2200, 2200, TILE_OVERLAP_BASE, (1200, 2208), (2, 1)),
        (2050, 2501, TILE_OVERLAP_BASE, (2064, 1360), (1, 2)),
        (2200, 2300, TILE_OVERLAP_LARGE, (2208, 1264), (1, 2)),
        (3840, 2160, TILE_OVERLAP_BASE, (2016, 2160), (2, 1)),
        (2160, 2160, TILE_OVERLAP_BASE, (2160, 2160), (1, 1)),
        (1920, 1080, TILE_OVERLAP_LARGE, (1920, 1088), (1, 1)),
        (70, 45, TILE_OVERLAP_BASE, (80, 48), (1, 1)),
    ],
)
def test_plan_matches_oidn_examples(width, height, overlap, tile_wh, count_wh) -> None:
    plan = plan_tiles(height, width, overlap=overlap)
    assert (plan.tile_w, plan.tile_h) == tile_wh
    assert (plan.count_w, plan.count_h) == count_wh
    assert_covers_once(plan)


def test_single_tile_is_the_padded_image() -> None:
    plan = plan_tiles(45, 70, overlap=96)
    (t,) = plan.tiles
    assert not plan.is_tiled
    assert (t.in_y, t.in_x, t.in_h, t.in_w) == (0, 0, 45, 70)
    assert (t.buf_y, t.buf_x, t.src_y, t.src_x) == (0, 0, 0, 0)
    assert (t.out_h, t.out_w) == (45, 70)


def test_placement_of_the_2200_square_example() -> None:
    plan = plan_tiles(2200, 2200, overlap=96)
    left, right = plan.tiles
    # input origins step by tile - 2*overlap; kept rects meet at origin + tile - overlap
    assert (left.in_x, left.in_w, left.out_x, left.out_w, left.src_x) == (0, 1200, 0, 1104, 0)
    assert right.in_x == 1200 - 192
    assert right.in_w == 2200 - 1008
    assert right.out_x == 1104 and right.out_w == 2200 - 1104
    # a short last tile is bottom/right-aligned: its buffer offset keeps 16-padding as untiled
    assert right.buf_x == 1200 - round_up(right.in_w, 16)
    assert right.src_x == right.buf_x + 96


def test_4k_needs_no_tiling_without_the_pixel_cap() -> None:
    plan = plan_tiles(2160, 3840, overlap=96, max_tile_px=max_tile_px_for(1000))
    assert not plan.is_tiled
    assert max_tile_px_for(None) == DEFAULT_MAX_TILE_PX == max_tile_px_for(-1)


def test_memory_predicate_shrinks_tiles_down_to_the_minimum() -> None:
    plan = plan_tiles(3000, 3000, overlap=96, max_tile_px=None, fits=lambda h, w: h * w <= 1e6)
    assert plan.tile_h * plan.tile_w <= 1e6
    assert_covers_once(plan)
    tiny = plan_tiles(3000, 3000, overlap=96, max_tile_px=None, fits=lambda h, w: False)
    assert (tiny.tile_h, tiny.tile_w) == (768, 768)  # minTileDim stops the loop
    assert_covers_once(tiny)


def test_subdevice_count_is_respected() -> None:
    plan = plan_tiles(1000, 1500, overlap=96, num_subdevices=2)
    assert (plan.count_h * plan.count_w) % 2 == 0
    assert_covers_once(plan)


def test_alignment_32_pads_like_metal() -> None:
    plan = plan_tiles(2500, 2200, overlap=128, alignment=32)
    assert_covers_once(plan)
    assert plan.tile_h % 32 == round_up(2500, 16) % 32


def test_max_edge_plan_bounds_tiles_and_covers_once() -> None:
    plan = plan_tiles_max_edge(1000, 700, 512, 96)
    assert plan.tile_h <= 512 and plan.tile_w <= 512
    assert plan.tile_h % 16 == 0 and plan.tile_w % 16 == 0
    assert_covers_once(plan)
    small = plan_tiles_max_edge(100, 300, 512, 96)
    assert not small.is_tiled and (small.tile_h, small.tile_w) == (112, 304)


def test_max_edge_rounds_overlap_up_to_the_alignment() -> None:
    plan = plan_tiles_max_edge(900, 900, 400, 94)
    assert plan.overlap == 96
    assert_covers_once(plan)


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="image size 5x0 is empty"):  # width x height
        plan_tiles(0, 5, overlap=96)
    with pytest.raises(InvalidArgumentError, match="tile overlap 90"):
        plan_tiles(100, 100, overlap=90)
    with pytest.raises(InvalidArgumentError, match="tile alignment 8"):
        plan_tiles(100, 100, overlap=96, alignment=8)
    with pytest.raises(InvalidArgumentError, match="max tile edge 200"):
        plan_tiles_max_edge(1000, 1000, 200, 96)


def box_filter(padded: np.ndarray, radius: int) -> np.ndarray:
    """A local operator with reach `radius` and zero borders (stands in for the U-Net)."""
    h, w = padded.shape
    p = np.pad(padded.astype(np.float64), radius)
    c = np.zeros((h + 2 * radius + 1, w + 2 * radius + 1))
    c[1:, 1:] = p.cumsum(0).cumsum(1)
    k = 2 * radius + 1
    return c[k:, k:] - c[:-k, k:] - c[k:, :-k] + c[:-k, :-k]


def run_tiled(img: np.ndarray, plan: TilePlan, radius: int) -> np.ndarray:
    out = np.full(img.shape, np.nan)
    for t in plan.tiles:
        buf = np.zeros((plan.tile_h, plan.tile_w))
        buf[t.buf_y : t.buf_y + t.in_h, t.buf_x : t.buf_x + t.in_w] = img[
            t.in_y : t.in_y + t.in_h, t.in_x : t.in_x + t.in_w
        ]
        res = box_filter(buf, radius)
        out[t.out_y : t.out_y + t.out_h, t.out_x : t.out_x + t.out_w] = res[
            t.src_y : t.src_y + t.out_h, t.src_x : t.src_x + t.out_w
        ]
    return out


def test_tiled_local_operator_equals_untiled(rng) -> None:
    img = rng.integers(0, 100, (1300, 900)).astype(np.float64)  # integers: sums are exact
    full = np.zeros((round_up(1300, 16), round_up(900, 16)))
    full[:1300, :900] = img
    untiled = box_filter(full, 40)[:1300, :900]
    plan = plan_tiles(1300, 900, overlap=96, max_tile_px=None, fits=lambda h, w: h * w < 4e5)
    assert plan.is_tiled
    assert np.array_equal(run_tiled(img, plan, 40), untiled)
    edge_plan = plan_tiles_max_edge(1300, 900, 320, 48)
    assert np.array_equal(run_tiled(img, edge_plan, 40), untiled)
