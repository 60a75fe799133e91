"""Tiling invariants over random sizes, overlaps and budgets (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from oidn_gpu.image.tiling import TilePlan, plan_tiles, plan_tiles_max_edge


def check_plan(plan: TilePlan) -> None:
    """Kept rects tile the image exactly once; buffers, origins and offsets are in range."""
    assert plan.tile_h % 16 == 0 and plan.tile_w % 16 == 0
    assert len(plan.tiles) == plan.count_h * plan.count_w
    kept = np.zeros((plan.height, plan.width), np.int8)
    rows: dict[int, tuple[int, int]] = {}
    cols: dict[int, tuple[int, int]] = {}
    for t in plan.tiles:
        assert t.in_y % plan.alignment == 0 and t.in_x % plan.alignment == 0
        assert t.buf_y >= 0 and t.buf_y + t.in_h <= plan.tile_h
        assert t.buf_x >= 0 and t.buf_x + t.in_w <= plan.tile_w
        assert t.in_y + t.in_h <= plan.height and t.in_x + t.in_w <= plan.width
        assert t.out_h > 0 and t.out_w > 0
        assert t.in_y <= t.out_y and t.out_y + t.out_h <= t.in_y + t.in_h
        assert t.in_x <= t.out_x and t.out_x + t.out_w <= t.in_x + t.in_w
        assert t.src_y == t.buf_y + (t.out_y - t.in_y)
        assert t.src_x == t.buf_x + (t.out_x - t.in_x)
        # context: a kept pixel sees at least `overlap` pixels of the read rectangle
        # on every side that is not an image border
        if t.out_y > 0:
            assert t.out_y - t.in_y >= plan.overlap
        if t.out_y + t.out_h < plan.height:
            assert t.in_y + t.in_h - (t.out_y + t.out_h) >= plan.overlap
        if t.out_x > 0:
            assert t.out_x - t.in_x >= plan.overlap
        if t.out_x + t.out_w < plan.width:
            assert t.in_x + t.in_w - (t.out_x + t.out_w) >= plan.overlap
        # the buffer's zero padding below/right of the data is < 16, as in the untiled run
        assert plan.tile_h - (t.buf_y + t.in_h) < 16 or t.in_y + t.in_h < plan.height
        assert plan.tile_w - (t.buf_x + t.in_w) < 16 or t.in_x + t.in_w < plan.width
        rows.setdefault(t.index // plan.count_w, (t.out_y, t.out_h))
        cols.setdefault(t.index % plan.count_w, (t.out_x, t.out_w))
        kept[t.out_y : t.out_y + t.out_h, t.out_x : t.out_x + t.out_w] += 1
    assert (kept == 1).all()
    # kept spans touch: each starts where the previous ended
    for spans, size in ((rows, plan.height), (cols, plan.width)):
        end = 0
        for i in range(len(spans)):
            start, length = spans[i]
            assert start == end
            end = start + length
        assert end == size


sizes = st.integers(min_value=1, max_value=5000)
overlaps = st.sampled_from([0, 16, 32, 96, 112, 128])


@settings(max_examples=300, deadline=None)
@given(height=sizes, width=sizes, overlap=overlaps, cap=st.integers(600_000, 6_000_000))
def test_oidn_plan_keeps_every_pixel_once(height, width, overlap, cap) -> None:
    check_plan(plan_tiles(height, width, overlap=overlap, max_tile_px=cap))


@settings(max_examples=100, deadline=None)
@given(height=sizes, width=sizes, overlap=st.sampled_from([32, 96, 128]))
def test_oidn_plan_with_alignment_32_keeps_every_pixel_once(height, width, overlap) -> None:
    check_plan(plan_tiles(height, width, overlap=overlap, alignment=32, max_tile_px=1_000_000))


@settings(max_examples=300, deadline=None)
@given(
    height=sizes,
    width=sizes,
    overlap=st.integers(0, 130),
    max_edge=st.integers(300, 3000),
)
def test_max_edge_plan_keeps_every_pixel_once(height, width, overlap, max_edge) -> None:
    if max_edge // 16 * 16 - 2 * (-(-overlap // 16) * 16) < 16:
        return  # rejected argument combination (tested in unit tests)
    plan = plan_tiles_max_edge(height, width, max_edge, overlap)
    assert plan.tile_h <= max_edge and plan.tile_w <= max_edge
    assert plan.overlap >= overlap
    check_plan(plan)
