"""One denoise plan: the processing mode and the tile plan of one image size.

`plan_denoise` is the one place where a filter configuration becomes what a
`TileRunner` executes: the mode (transfer function, hdr, snorm, input scale;
`image.process.mode_for`) and the tile plan (`image.tiling`, OIDN's plan with
the model's overlap and alignment, or tiles bounded by an edge, or one tile for
the whole image), every tile within the backend's `base.TileLimits` (the cuda
kernels' 32-bit indexing). The filter, every runner, the recorder and the
benchmarks use it, so tile seams cannot differ between them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from oidn_gpu.backends.base import NO_TILE_LIMITS, TileLimits
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.graph.plan import plan as plan_graph
from oidn_gpu.graph.plan import size_alignment
from oidn_gpu.image import process, tiling
from oidn_gpu.image.transfer import Transfer
from oidn_gpu.model import unet
from oidn_gpu.model.unet import ValidatedModel

BYTES_PER_MB = 1024 * 1024


@dataclass(frozen=True)
class DenoiseOptions:
    """What the plan of one denoise depends on besides the model and the image size.

    Attributes:
        filter_type: ``"RT"`` or ``"RTLightmap"``.
        hdr, srgb, directional: OIDN's filter parameters.
        normal_only: the normal image is filtered alone (RT; signed values).
        input_scale: the resolved input scale (autoexposure already applied).
        transfer: a transfer function replacing OIDN's choice (recorded programs);
            None keeps OIDN's.
        tile_size: tiles of at most this edge (px) instead of OIDN's plan.
        max_memory_mb: OIDN's memory budget; None or negative: at most 2160x2160 px
            per tile.
        whole_image: one tile for the whole image whatever its size (unless
            ``tile_size`` is set): benchmarks and recorded programs.
        quality: OIDN's quality (``"fast"``, ``"balanced"``, ``"high"``). The model was
            chosen by it already; a runner that hands the images to Intel OIDN's own
            filter passes it on (on OIDN's CUDA device it also picks the kernels).
    """

    filter_type: str = "RT"
    hdr: bool = False
    srgb: bool = False
    directional: bool = False
    normal_only: bool = False
    input_scale: float = 1.0
    transfer: Transfer | None = None
    tile_size: int | None = None
    max_memory_mb: int | None = None
    whole_image: bool = False
    quality: str = "high"


# One tile for the whole image, within the backend's limits (a device runner's default).
WHOLE_IMAGE = DenoiseOptions(whole_image=True)


@dataclass(frozen=True)
class DenoisePlan:
    """The mode and tiles of one denoise of a ``height x width`` image.

    Attributes:
        mode: how the main input maps to network space and back.
        tiles: the tile plan (tile buffer size, every tile's rectangles).
        alignment: tile alignment in px (the model's size alignment, at least 16).
        options: the options it was planned from (`plan_denoise` sets them): a runner that
            hands the whole filter to another library reads OIDN's parameters there.
    """

    mode: process.Mode
    tiles: tiling.TilePlan
    alignment: int
    options: DenoiseOptions | None = None

    @property
    def height(self) -> int:
        return self.tiles.height

    @property
    def width(self) -> int:
        return self.tiles.width

    @property
    def tile_shape(self) -> tuple[int, int]:
        """``(tile_h, tile_w)``: the network input size of every tile."""
        return self.tiles.tile_h, self.tiles.tile_w


def model_alignment(model: ValidatedModel) -> int:
    """The tile alignment of ``model``: its graph's size alignment, at least OIDN's 16."""
    align = size_alignment(model.graph)
    return tiling.round_up(max(align, tiling.MIN_TILE_ALIGNMENT), tiling.MIN_TILE_ALIGNMENT)


def plan_mode(options: DenoiseOptions) -> process.Mode:
    """The processing mode of ``options`` (OIDN's choice unless ``transfer`` overrides it)."""
    if options.transfer is None:
        return process.mode_for(
            options.filter_type,
            hdr=options.hdr,
            srgb=options.srgb,
            directional=options.directional,
            normal_only=options.normal_only,
            input_scale=options.input_scale,
        )
    return process.Mode(
        transfer=options.transfer,
        hdr=options.hdr,
        snorm=options.normal_only,
        input_scale=options.input_scale,
    )


def plan_tiles(
    model: ValidatedModel,
    height: int,
    width: int,
    options: DenoiseOptions,
    limits: TileLimits = NO_TILE_LIMITS,
) -> tiling.TilePlan:
    """The tile plan of a ``height x width`` image for ``model`` (see `DenoiseOptions`),
    every tile within ``limits`` (OIDN's plan shrinks its tiles until they fit; an edge
    bound or a whole image gives way to them too)."""
    alignment = model_alignment(model)
    overlap = unet.tile_overlap(model.spec, alignment)
    plan = _plan_tiles(model, height, width, options, limits, overlap, alignment)
    if not limits.fits(plan.tile_h, plan.tile_w):
        raise InvalidArgumentError(
            f"the backend runs tiles of at most {limits.max_pixels} px; the smallest tile "
            f"for a {width}x{height} image with overlap {overlap} is "
            f"{plan.tile_w}x{plan.tile_h} px"
        )
    return plan


def _plan_tiles(
    model: ValidatedModel,
    height: int,
    width: int,
    options: DenoiseOptions,
    limits: TileLimits,
    overlap: int,
    alignment: int,
) -> tiling.TilePlan:
    """`plan_tiles` before the final check: OIDN's loop stops at its minimum tile."""
    if options.tile_size is not None:
        return _plan_max_edge(height, width, options.tile_size, overlap, alignment, limits)
    if options.whole_image:
        return tiling.plan_tiles(
            height,
            width,
            overlap=overlap,
            alignment=alignment,
            max_tile_px=None,
            fits=limits.fits,
        )
    if options.max_memory_mb is None or options.max_memory_mb < 0:
        return tiling.plan_tiles(
            height, width, overlap=overlap, alignment=alignment, fits=limits.fits
        )
    budget = options.max_memory_mb * BYTES_PER_MB

    def fits(tile_h: int, tile_w: int) -> bool:
        # The planner's activation memory of one tile (fp32, unfused: an upper bound of
        # what the backends allocate; OIDN's own estimate is device-specific).
        return (
            limits.fits(tile_h, tile_w)
            and plan_graph(model.graph, tile_h, tile_w).peak_bytes <= budget
        )

    return tiling.plan_tiles(
        height, width, overlap=overlap, alignment=alignment, max_tile_px=None, fits=fits
    )


def _plan_max_edge(
    height: int, width: int, max_edge: int, overlap: int, alignment: int, limits: TileLimits
) -> tiling.TilePlan:
    """Tiles of at most ``max_edge`` px a side, the edge lowered until they fit ``limits``."""
    plan = tiling.plan_tiles_max_edge(
        height, width, max_edge=max_edge, overlap=overlap, alignment=alignment
    )
    smallest = 2 * overlap + alignment  # the smallest edge that keeps pixels of its own
    while not limits.fits(plan.tile_h, plan.tile_w) and max_edge > smallest:
        assert limits.max_pixels is not None
        shortest, longest = sorted((plan.tile_h, plan.tile_w))
        # A strip keeps its short side; a square-ish tile shrinks on both.
        fitting = max(math.isqrt(limits.max_pixels), limits.max_pixels // shortest)
        max_edge = max(min(longest - alignment, fitting), smallest)
        plan = tiling.plan_tiles_max_edge(
            height, width, max_edge=max_edge, overlap=overlap, alignment=alignment
        )
    return plan


def plan_denoise(
    model: ValidatedModel,
    height: int,
    width: int,
    options: DenoiseOptions,
    limits: TileLimits = NO_TILE_LIMITS,
) -> DenoisePlan:
    """The `DenoisePlan` of one ``height x width`` image (both at least 1) on a backend
    whose tiles must fit ``limits`` (its `base.tile_limits`; default: no bound).

    Raises:
        InvalidArgumentError: an empty image, a bad tile size or filter type, a tile
            size that cannot fit ``limits``.
    """
    if height < 1 or width < 1:
        raise InvalidArgumentError(f"image size {width}x{height} is empty; nothing to plan")
    return DenoisePlan(
        mode=plan_mode(options),
        tiles=plan_tiles(model, height, width, options, limits),
        alignment=model_alignment(model),
        options=options,
    )
