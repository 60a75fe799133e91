"""Tile plans: how a large image is cut into overlapping tiles and stitched back.

Pure integer geometry, no arrays. `plan_tiles` reproduces OIDN's own plan
(``core/unet_filter.cpp``, ``UNetFilter::init`` and ``execute``; section 6 of
``shared/reference/oidn-semantics.md``): the tile-size loop of 6.2 and the
placement of 6.3, so that tiled output equals untiled output. `plan_tiles_max_edge`
uses the same placement for tiles bounded by an edge length, for the GPU
pipeline's interactive option.

Coordinates of one `Tile` (rows; columns are the same with x/w):

* the image rows ``[in_y, in_y + in_h)`` are copied into the ``tile_h x tile_w``
  buffer at row ``buf_y`` (``alignOffset``: a short last tile is bottom-aligned so
  its bottom padding equals the untiled case); the rest of the buffer is zero;
* after the network runs, buffer rows ``[src_y, src_y + out_h)`` are kept and
  written to image rows ``[out_y, out_y + out_h)``. Kept rectangles of adjacent
  tiles touch exactly: every pixel is kept once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from oidn_gpu.errors import InvalidArgumentError

MIN_TILE_ALIGNMENT = 16  # 4 pooling levels need multiples of 2^4 (UNetFilter::minTileAlignment)
DEFAULT_MAX_TILE_PX = 2160 * 2160  # tile pixel cap when maxMemoryMB < 0 (defaultMaxTileSize)
MIN_TILE_DIM_PX = 768  # minTileDim floor; the actual minimum is max(4 * overlap, 768)
TILE_OVERLAP_BASE = 96  # round_up(174 / 2, 16): base/small U-Net (receptiveField 174)
TILE_OVERLAP_LARGE = 112  # round_up(202 / 2, 16): large U-Net (receptiveField 202)


@dataclass(frozen=True)
class Tile:
    """One tile: the image rectangle read, its place in the buffer, the rectangle kept."""

    index: int  # row-major: tile row * count_w + tile column
    in_y: int
    in_x: int
    in_h: int
    in_w: int
    buf_y: int  # where the read rectangle starts in the tile buffer (alignOffset)
    buf_x: int
    out_y: int  # image rectangle written from this tile
    out_x: int
    out_h: int
    out_w: int
    src_y: int  # where the kept rectangle starts in the tile buffer
    src_x: int


@dataclass(frozen=True)
class TilePlan:
    """A tiling of a ``height x width`` image into ``count_h x count_w`` tiles."""

    tile_h: int  # tile buffer size (network input size), a multiple of 16
    tile_w: int
    count_h: int
    count_w: int
    overlap: int
    alignment: int
    tiles: tuple[Tile, ...]
    height: int
    width: int

    @property
    def is_tiled(self) -> bool:
        """Whether the image needs more than one tile."""
        return self.count_h * self.count_w > 1


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for non-negative integers (OIDN ``ceil_div``)."""
    return (a + b - 1) // b


def round_up(a: int, b: int, offset: int = 0) -> int:
    """Smallest integer >= a congruent to ``offset`` modulo b (OIDN ``round_up``)."""
    return (a + b - offset - 1) // b * b + offset


def max_tile_px_for(max_memory_mb: int | None) -> int | None:
    """The pixel cap of OIDN's plan: 2160^2 when ``max_memory_mb`` is None or < 0, else none."""
    if max_memory_mb is None or max_memory_mb < 0:
        return DEFAULT_MAX_TILE_PX
    return None


def _check_sizes(height: int, width: int, overlap: int, alignment: int) -> None:
    if height < 1 or width < 1:
        raise InvalidArgumentError(f"image size {width}x{height} is empty; expected at least 1x1")
    if alignment < 1 or alignment % MIN_TILE_ALIGNMENT != 0:
        raise InvalidArgumentError(
            f"tile alignment {alignment} is not a positive multiple of {MIN_TILE_ALIGNMENT}"
        )
    if overlap < 0 or overlap % alignment != 0:
        raise InvalidArgumentError(
            f"tile overlap {overlap} is not a non-negative multiple of the alignment {alignment}"
        )


def plan_tiles(
    height: int,
    width: int,
    *,
    overlap: int,
    alignment: int = MIN_TILE_ALIGNMENT,
    max_tile_px: int | None = DEFAULT_MAX_TILE_PX,
    fits: Callable[[int, int], bool] | None = None,
    num_subdevices: int = 1,
) -> TilePlan:
    """OIDN's tile plan (semantics 6.2 and 6.3).

    Starting from one tile of the whole (16-rounded) image, the tile shrinks along
    its longer side, as in OIDN, while the tile count is not a multiple of
    ``num_subdevices``, the tile has more than ``max_tile_px`` pixels, or
    ``fits(tile_h, tile_w)`` is false; it stops at the minimum tile size.

    Args:
        height, width: image size in pixels.
        overlap: tile overlap (96 base/small, 112 large), a multiple of ``alignment``.
        alignment: tile origin alignment (16; 32 on Metal).
        max_tile_px: pixel cap per tile (OIDN: 2160^2 when maxMemoryMB < 0, else
            None = no cap; see `max_tile_px_for`).
        fits: optional memory predicate on the tile buffer size (OIDN's budget
            check, which depends on device scratch sizes); None = always fits.
        num_subdevices: tiles are spread round-robin over this many devices.

    Returns:
        The `TilePlan`; a single tile when no rule applies.

    Raises:
        InvalidArgumentError: for an empty image or bad overlap/alignment.
    """
    _check_sizes(height, width, overlap, alignment)
    tile_h = round_up(height, MIN_TILE_ALIGNMENT)
    tile_w = round_up(width, MIN_TILE_ALIGNMENT)
    pad_h = tile_h % alignment
    pad_w = tile_w % alignment
    count_h = count_w = 1
    min_dim = max(4 * overlap, MIN_TILE_DIM_PX)
    min_h = round_up(min_dim, alignment, pad_h)
    min_w = round_up(min_dim, alignment, pad_w)

    def needs_split() -> bool:
        if (count_h * count_w) % num_subdevices != 0:
            return True
        if max_tile_px is not None and tile_h * tile_w > max_tile_px:
            return True
        return fits is not None and not fits(tile_h, tile_w)

    while needs_split():
        if tile_h > min_h and tile_h > tile_w:
            tile_h, count_h = _shrink(height, tile_h, count_h, overlap, alignment, pad_h, min_h)
        elif tile_w > min_w:
            tile_w, count_w = _shrink(width, tile_w, count_w, overlap, alignment, pad_w, min_w)
        else:
            break
    return _make_plan(height, width, tile_h, tile_w, count_h, count_w, overlap, alignment)


def _shrink(
    size: int, tile: int, count: int, overlap: int, alignment: int, pad: int, min_tile: int
) -> tuple[int, int]:
    """One step of OIDN's loop along one axis: the next smaller tile and its count."""
    border = 2 * overlap + pad
    new_tile = ceil_div(size + border * count, count + 1)
    tile = min(max(round_up(new_tile, alignment, pad), min_tile), tile - alignment)
    count = max(ceil_div(size - border, tile - border), 1)
    return tile, count


def plan_tiles_max_edge(
    height: int,
    width: int,
    max_edge: int,
    overlap: int,
    alignment: int = MIN_TILE_ALIGNMENT,
) -> TilePlan:
    """Tiles whose buffers are at most ``max_edge`` on each side (interactive GPU option).

    Uses OIDN's placement (so results equal the untiled run when ``overlap`` is at
    least the network's receptive reach), with the tile count per axis chosen as
    small as possible and the tiles then shrunk to equal work.

    Args:
        height, width: image size in pixels.
        max_edge: largest tile buffer edge in pixels; must exceed ``2 * overlap``
            by at least one alignment step.
        overlap: context kept around each tile; rounded up to ``alignment``.
        alignment: tile origin alignment (a multiple of 16).

    Raises:
        InvalidArgumentError: when ``max_edge`` leaves no room inside the overlaps.
    """
    overlap = round_up(max(overlap, 0), alignment)
    _check_sizes(height, width, overlap, alignment)
    edge = max_edge // alignment * alignment
    if edge - 2 * overlap < alignment:
        raise InvalidArgumentError(
            f"max tile edge {max_edge} is too small for overlap {overlap}; expected at least "
            f"{2 * overlap + alignment}"
        )
    tile_h, count_h = _fit_axis(height, edge, overlap, alignment)
    tile_w, count_w = _fit_axis(width, edge, overlap, alignment)
    return _make_plan(height, width, tile_h, tile_w, count_h, count_w, overlap, alignment)


def _fit_axis(size: int, edge: int, overlap: int, alignment: int) -> tuple[int, int]:
    """Tile size and count along one axis for `plan_tiles_max_edge`."""
    full = round_up(size, MIN_TILE_ALIGNMENT)
    if full <= edge:
        return full, 1
    pad = full % alignment  # keeps origins aligned when alignment > 16
    tile = edge - alignment + pad if pad else edge
    border = 2 * overlap + pad
    count = ceil_div(size - border, tile - border)
    balanced = round_up(ceil_div(size - border, count) + border, alignment, pad)
    tile = min(tile, balanced)
    return tile, max(ceil_div(size - border, tile - border), 1)


@dataclass(frozen=True)
class _Span:
    """Placement of one tile along one axis."""

    in_start: int
    in_len: int
    buf_start: int
    out_start: int
    out_len: int
    src_start: int


def _spans(size: int, tile: int, count: int, overlap: int, pad: int) -> list[_Span]:
    """OIDN's placement along one axis (semantics 6.3)."""
    spans = []
    for i in range(count):
        start = i * (tile - (2 * overlap + pad))
        overlap_begin = overlap if i > 0 else 0
        overlap_end = overlap + pad if i < count - 1 else 0
        in_len = min(size - start, tile)
        out_len = in_len - overlap_begin - overlap_end
        align_offset = tile - round_up(in_len, MIN_TILE_ALIGNMENT)
        spans.append(
            _Span(
                in_start=start,
                in_len=in_len,
                buf_start=align_offset,
                out_start=start + overlap_begin,
                out_len=out_len,
                src_start=align_offset + overlap_begin,
            )
        )
    return spans


def _make_plan(
    height: int,
    width: int,
    tile_h: int,
    tile_w: int,
    count_h: int,
    count_w: int,
    overlap: int,
    alignment: int,
) -> TilePlan:
    rows = _spans(height, tile_h, count_h, overlap, tile_h % alignment)
    cols = _spans(width, tile_w, count_w, overlap, tile_w % alignment)
    tiles = tuple(
        Tile(
            index=i * count_w + j,
            in_y=r.in_start,
            in_x=c.in_start,
            in_h=r.in_len,
            in_w=c.in_len,
            buf_y=r.buf_start,
            buf_x=c.buf_start,
            out_y=r.out_start,
            out_x=c.out_start,
            out_h=r.out_len,
            out_w=c.out_len,
            src_y=r.src_start,
            src_x=c.src_start,
        )
        for i, r in enumerate(rows)
        for j, c in enumerate(cols)
    )
    return TilePlan(
        tile_h=tile_h,
        tile_w=tile_w,
        count_h=count_h,
        count_w=count_w,
        overlap=overlap,
        alignment=alignment,
        tiles=tiles,
        height=height,
        width=width,
    )
