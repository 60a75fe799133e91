"""Backend tile limits: `plan_denoise` keeps every tile within what the backend's kernels index."""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.backends import base
from oidn_gpu.backends.base import NO_TILE_LIMITS, TileLimits, tile_limits
from oidn_gpu.backends.plan import DenoiseOptions, plan_denoise
from oidn_gpu.backends.reference.backend import ReferenceBackend
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.model import unet
from oidn_gpu.model import weights as builtin
from tests.datasets import DATA_DIR

TINY = DATA_DIR / "tiny_base_ic3.tza"
INT32_MAX = 2**31 - 1
WIDEST_CUDA_CHANNELS = 128  # the widest activation the cuda kernels store (112 padded)
HUGE_BUDGET_MB = 10**7  # no memory bound: only the backend's limits cut tiles
K8, K16 = (4320, 7680), (8640, 15360)


MODELS = ("tiny", "rt_hdr_alb_nrm")


@pytest.fixture(scope="module", params=MODELS)
def model(request: pytest.FixtureRequest) -> unet.ValidatedModel:
    if request.param == "tiny":
        return unet.load_model(TINY)
    return builtin.load_builtin(request.param)


@pytest.fixture
def model_name(request: pytest.FixtureRequest, model) -> str:
    return request.node.callspec.params["model"]


def _shape(plan) -> tuple[int, int, int, int]:
    tiles = plan.tiles
    return tiles.tile_h, tiles.tile_w, tiles.count_h, tiles.count_w


def _covered_once(plan) -> bool:
    """Whether the kept rectangles of the tile grid cover every pixel exactly once."""
    tiles = plan.tiles
    rows = sorted({(t.out_y, t.out_h) for t in tiles.tiles})
    cols = sorted({(t.out_x, t.out_w) for t in tiles.tiles})

    def partition(spans: list[tuple[int, int]], size: int) -> bool:
        ends = [start + length for start, length in spans]
        return [s for s, _ in spans] == [0, *ends[:-1]] and ends[-1] == size

    return (
        len(tiles.tiles) == len(rows) * len(cols)
        and partition(rows, plan.height)
        and partition(cols, plan.width)
    )


@pytest.mark.parametrize("size", [K8, K16], ids=["8K", "16K"])
@pytest.mark.parametrize(
    "options",
    [
        DenoiseOptions(max_memory_mb=HUGE_BUDGET_MB),
        DenoiseOptions(tile_size=16384),
        DenoiseOptions(whole_image=True),
    ],
    ids=["budget", "tile_size", "whole_image"],
)
def test_cuda_tiles_a_large_frame_within_32_bit_indexing(model, size, options) -> None:
    h, w = size
    unbounded = plan_denoise(model, h, w, options)
    assert h * w * WIDEST_CUDA_CHANNELS > INT32_MAX and not unbounded.tiles.is_tiled
    plan = plan_denoise(model, h, w, options, tile_limits("cuda"))
    assert plan.tiles.is_tiled
    assert plan.tile_shape[0] * plan.tile_shape[1] * WIDEST_CUDA_CHANNELS <= INT32_MAX
    assert _covered_once(plan)
    assert plan.mode == unbounded.mode


def test_cuda_keeps_plans_that_already_fit(model) -> None:
    for options in (DenoiseOptions(), DenoiseOptions(tile_size=1024)):
        assert plan_denoise(model, *K8, options, tile_limits("cuda")) == plan_denoise(
            model, *K8, options
        )


# (height, width, options) -> (tile_h, tile_w, count_h, count_w) of the planner before
# backends declared tile limits, for each of MODELS.
TODAY = {
    ((1080, 1920), DenoiseOptions()): ((1088, 1920, 1, 1), (1088, 1920, 1, 1)),
    (K8, DenoiseOptions()): ((2256, 2064, 2, 4), (2256, 2064, 2, 4)),
    (K8, DenoiseOptions(max_memory_mb=HUGE_BUDGET_MB)): ((*K8, 1, 1), (*K8, 1, 1)),
    (K16, DenoiseOptions(max_memory_mb=HUGE_BUDGET_MB)): ((*K16, 1, 1), (*K16, 1, 1)),
    ((2160, 3840), DenoiseOptions(max_memory_mb=3000)): (
        (2160, 3840, 1, 1),
        (1184, 2016, 2, 2),
    ),
    (K8, DenoiseOptions(tile_size=8192)): ((*K8, 1, 1), (*K8, 1, 1)),
    (K8, DenoiseOptions(tile_size=1024)): ((1024, 1024, 5, 9), (1024, 1024, 5, 9)),
    (K8, DenoiseOptions(whole_image=True)): ((*K8, 1, 1), (*K8, 1, 1)),
    ((37, 23), DenoiseOptions()): ((48, 32, 1, 1), (48, 32, 1, 1)),
}


@pytest.mark.parametrize("name", ["reference", "wgpu"])
def test_backends_without_limits_plan_as_before(model, model_name, name) -> None:
    assert tile_limits(name) is NO_TILE_LIMITS
    for (size, options), expected in TODAY.items():
        plan = plan_denoise(model, *size, options, tile_limits(name))
        assert _shape(plan) == expected[MODELS.index(model_name)], (size, options)
        assert plan == plan_denoise(model, *size, options)


def test_tile_limits_are_checked() -> None:
    assert TileLimits().fits(10**6, 10**6)
    assert TileLimits(max_elements=100, stored_channels=4).fits(5, 5)
    assert TileLimits(max_elements=103, stored_channels=4).max_pixels == 25
    assert not TileLimits(max_elements=100, stored_channels=4).fits(5, 6)
    for bad in ({"max_elements": 0}, {"stored_channels": 0}, {"max_elements": 2.5}):
        with pytest.raises(InvalidArgumentError, match="expected a positive integer"):
            TileLimits(**bad)


@pytest.mark.parametrize(
    "options", [DenoiseOptions(), DenoiseOptions(tile_size=512), DenoiseOptions(whole_image=True)]
)
def test_limits_no_tile_can_meet_are_refused(options) -> None:
    model = unet.load_model(TINY)
    tiny_tiles = TileLimits(max_elements=200 * 200)
    with pytest.raises(InvalidArgumentError, match="tiles of at most 40000 px; the smallest"):
        plan_denoise(model, 900, 1000, options, tiny_tiles)


class _LimitedReference(ReferenceBackend):
    """The reference backend with a tile bound (as a backend with 32-bit kernels has)."""

    name = "limited"
    priority = -1
    tile_limits = TileLimits(max_elements=48 * 240)


def test_the_filter_plans_within_its_backends_limits(monkeypatch, rng) -> None:
    monkeypatch.setitem(base.REGISTRY, "limited", f"{__name__}:LIMITED")
    monkeypatch.setattr(base, "_loaded", {})
    color = rng.random((48, 272, 3), np.float32)
    blob = TINY.read_bytes()
    with oidn_gpu.Denoiser(backend="limited", weights=blob, tile_size=512) as den:
        limited = den.denoise(color)
        assert den.info().tiles == 2  # one 48x272 tile would exceed 48 * 240 elements
    with oidn_gpu.Denoiser(backend="reference", weights=blob, tile_size=240) as den:
        np.testing.assert_array_equal(limited, den.denoise(color))  # the same two tiles
        assert den.info().tiles == 2


LIMITED = _LimitedReference()
