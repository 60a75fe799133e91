"""The GPU autoexposure kernels' variants give the same bits.

The bins pass sums each bin's luminances over one halving tree whatever the tree levels each
invocation takes in registers (``register_levels`` 0 to 4): the bins must be equal bit for bit
on random images (partial bins, NaN/Inf, huge and subnormal pixels, float16, 1-3 channels).

The scale pass's two kernels ("levels", the default, and "stack") both sum the bins' log2
values over the host's deterministic halving tree; "levels" completes the tree with empty
ranges and combines it chunk by chunk in workgroup memory, "stack" walks each invocation's
subtree with an explicit stack. Their ``frame`` outputs (the scale and its inverse) must be
equal bit for bit: on synthetic bin grids of many shapes, 4K's 135 x 240 and up to 600 x 700
(a 9600 x 11200 image; a tree 20 levels deep), with values from below EPS to +Inf, exact ones
and zeros, and on the bins of random images from 1x1 with partial bins, NaN/Inf and huge/tiny
pixels. Checks that shuffled bins change the scale, and transposed bins their averages, show
the data is sensitive to the order of the additions.
"""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels import autoexposure as gae
from tests.kernels import gpu_runner
from tests.kernels.test_autoexposure_gpu import gpu_bins, gpu_scale

pytestmark = pytest.mark.gpu

GRIDS = [(1, 1), (1, 2), (2, 1), (1, 37), (45, 1), (2, 3), (3, 5), (7, 7), (16, 16), (17, 33)]
GRIDS += [(64, 64), (65, 63), (68, 120), (120, 68), (135, 240), (1, 4097), (600, 700), (1, 300000)]


def scale_frame(bins: np.ndarray, variant: str, thread_levels: int = 4) -> bytes:
    """The ``frame`` bytes (scale, 1 / scale) the scale kernel writes for ``bins [H, W]``."""
    bins_h, bins_w = bins.shape
    return gpu_runner.run(
        gae.generate_scale(variant, thread_levels),
        {"bins": np.ascontiguousarray(bins, np.float32).reshape(-1)},
        {"frame": 8},
        params={"bins_h": bins_h, "bins_w": bins_w},
    )["frame"]


def synthetic_bins(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Bin averages, some at or below EPS: dim ones (log2 -26 to -17) and bright ones (log2
    83 to 123) in proportions whose log2 sums nearly cancel, so rounding in the large partial
    sums shows in the total: another order of the additions gives another scale."""
    dim = 10.0 ** rng.uniform(-7.9, -5, shape)
    bright = 10.0 ** rng.uniform(25, 37, shape)
    bins = np.where(rng.random(shape) < 0.2, bright, dim).astype(np.float32)
    pick = rng.random(shape)
    bins[pick < 0.05] = 0.0
    bins[(pick >= 0.05) & (pick < 0.08)] = 1.0  # log2 exactly 0
    bins[(pick >= 0.08) & (pick < 0.1)] = np.float32(1e-8)  # EPS itself: not counted
    return bins


def describe(frame: bytes) -> str:
    return str(np.frombuffer(frame, np.float32).tolist())


@pytest.mark.parametrize("shape", GRIDS, ids=[f"{h}x{w}" for h, w in GRIDS])
def test_synthetic_bin_grids_give_the_same_bits(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(shape[0] * 1000 + shape[1])
    bins = synthetic_bins(rng, shape)
    stack = scale_frame(bins, "stack")
    levels = scale_frame(bins, "levels")
    assert levels == stack, f"{shape}: levels {describe(levels)}, stack {describe(stack)}"


@pytest.mark.parametrize("thread_levels", [1, 2, 3, 5, 6])
def test_every_register_depth_gives_the_same_bits(thread_levels: int) -> None:
    rng = np.random.default_rng(thread_levels)
    for shape in [(1, 1), (5, 9), (68, 120)]:
        bins = synthetic_bins(rng, shape)
        stack = scale_frame(bins, "stack")
        levels = scale_frame(bins, "levels", thread_levels)
        assert levels == stack, f"{shape}, {thread_levels} levels: {describe(levels)}"


def test_infinite_and_near_flt_max_bins_give_the_same_bits() -> None:
    rng = np.random.default_rng(4)
    bins = synthetic_bins(rng, (30, 50))
    bins[7, 9] = np.inf  # log2 +Inf: the mean is not finite, the scale 0
    assert scale_frame(bins, "levels") == scale_frame(bins, "stack")
    assert np.frombuffer(scale_frame(bins, "levels"), np.float32).tolist() == [0.0, 0.0]
    bins[7, 9] = np.finfo(np.float32).max
    assert scale_frame(bins, "levels") == scale_frame(bins, "stack")
    bins[:] = 0.0  # no bin counts: the scale is 1
    assert np.frombuffer(scale_frame(bins, "levels"), np.float32).tolist() == [1.0, 1.0]


def test_the_data_is_sensitive_to_the_order_of_the_additions() -> None:
    # The same values in other places sum in another order: most scales change, so equal
    # bits above are not an accident of order-insensitive data.
    rng = np.random.default_rng(9)
    changed = 0
    for shape in [(17, 33), (68, 120), (64, 64)]:
        bins = synthetic_bins(rng, shape)
        shuffled = rng.permutation(bins.reshape(-1)).reshape(shape)
        changed += scale_frame(shuffled, "levels") != scale_frame(bins, "levels")
    assert changed >= 2


SIZES = [(1, 1), (1, 17), (17, 1), (15, 16), (33, 47), (100, 70), (70, 100), (128, 128)]


@pytest.mark.parametrize("size", SIZES, ids=[f"{h}x{w}" for h, w in SIZES])
def test_random_images_give_the_same_bits(size: tuple[int, int]) -> None:
    rng = np.random.default_rng(size[0] * 7 + size[1])
    h, w = size
    color = random_image(rng, (h, w, 3))
    frames = {}
    for variant in ("stack", "levels"):
        bins = gpu_bins(color)
        frames[variant] = scale_frame(bins, variant)
    assert frames["levels"] == frames["stack"], describe(frames["levels"])
    if h * w > 1:
        color[0, 0] = np.inf  # FLT_MAX in a bin: its average and the scale overflow to 0
        bins = gpu_bins(color)
        assert scale_frame(bins, "levels") == scale_frame(bins, "stack")


def random_image(rng: np.random.Generator, shape: tuple[int, int, int]) -> np.ndarray:
    """HDR pixels from 1e-30 to 1e30 with NaN, -Inf, subnormal and zero pixels."""
    h, w, _ = shape
    color = (10.0 ** rng.uniform(-30, 30, shape)).astype(np.float32)
    pick = rng.random((h, w))
    color[pick < 0.03] = np.nan
    color[(pick >= 0.03) & (pick < 0.05), -1] = -np.inf
    color[(pick >= 0.05) & (pick < 0.07), 0] = 1e-40  # subnormal
    color[(pick >= 0.07) & (pick < 0.09)] = 0.0
    return color


BIN_SHAPES = [(1, 1, 3), (15, 16, 3), (16, 17, 3), (33, 47, 3), (70, 100, 3), (31, 45, 1)]
BIN_SHAPES += [(29, 17, 2), (128, 128, 3)]


@pytest.mark.parametrize("register_levels", [1, 2, 3, 4])
def test_every_bins_register_depth_gives_the_same_bits(register_levels: int) -> None:
    rng = np.random.default_rng(register_levels + 20)
    for shape in BIN_SHAPES:
        color = random_image(rng, shape)
        reference = gpu_bins(color, 0)
        bins = gpu_bins(color, register_levels)
        assert bins.tobytes() == reference.tobytes(), f"{shape}, {register_levels} levels"
        # moderate values: no bin saturates, so the sums' rounding shows
        moderate = (rng.random(shape) * 50).astype(np.float16)
        reference = gpu_bins(moderate, 0)
        assert gpu_bins(moderate, register_levels).tobytes() == reference.tobytes(), shape


def test_the_bins_are_sensitive_to_the_order_of_the_additions() -> None:
    # Each bin transposed: its pixels sum in another order, and many bins change.
    rng = np.random.default_rng(21)
    color = rng.random((64, 64, 3), dtype=np.float32) * np.float32(50)
    moved = color.reshape(4, 16, 4, 16, 3).transpose(0, 3, 2, 1, 4).reshape(64, 64, 3).copy()
    assert np.count_nonzero(gpu_bins(moved, 0) != gpu_bins(color, 0)) >= 3


def test_the_default_is_levels_and_the_pipelines_scale_matches() -> None:
    assert gae.generate_scale().key == gae.generate_scale("levels").key
    rng = np.random.default_rng(2)
    color = rng.random((40, 56, 3), dtype=np.float32) * np.float32(30)
    scale, _ = gpu_scale(color)
    assert np.float32(scale).tobytes() == scale_frame(gpu_bins(color), "stack")[:4]


def test_bad_variants_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="variant 'tree'"):
        gae.generate_scale("tree")
    with pytest.raises(InvalidArgumentError, match="thread_levels is 7"):
        gae.generate_scale("levels", 7)
    with pytest.raises(InvalidArgumentError, match="register_levels is 5"):
        gae.generate_bins(gae.AutoexposureSpec(), 5)
