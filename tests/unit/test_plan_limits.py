"""The entries that `tests/unit/test_frame_path.py` does not reach plan within the backend's
tile limits too: the one-call `oidn_gpu.denoise` (its cache of warm denoisers), composable
AOVs (`Denoiser.denoise_aovs`), a `TemporalDenoiser` on a backend without a session of its
own (`HostTemporalSession`, which denoises through the denoiser's frame path), and the
planner alone over sizes up to 8K with any ``tile_size`` and ``max_memory_mb``.

As there, the backend is the reference backend with a runner that stops each frame at the
plan it is given; its limits are the cuda backend's (8K entries) or, for the temporal
session's NumPy passes, smaller ones that a 900x900 frame must already be cut for.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oidn_gpu
from oidn_gpu.backends import base
from oidn_gpu.backends.base import TileLimits, tile_limits
from oidn_gpu.backends.host_temporal import HostTemporalSession
from oidn_gpu.backends.plan import DenoiseOptions, plan_denoise
from oidn_gpu.filter_cache import clear_denoiser_cache
from oidn_gpu.model import unet
from tests.unit.test_frame_path import K8, TINY, _CudaLimitedReference, _Planned

HUGE_BUDGET_MB = 10**7
LARGE = [{"tile_size": 16384}, {"max_memory_mb": HUGE_BUDGET_MB}]
# Tiles of at most 800x800 px of 128 channels: a 900x900 frame must be cut (into tiles of
# at least OIDN's minimum, 768x768 px for these weights).
SMALL_LIMITS = TileLimits(max_elements=128 * 800 * 800, stored_channels=128)
SMALL_FRAME = (900, 900)


class _SmallLimitedReference(_CudaLimitedReference):
    name = "small-limited"

    @property
    def tile_limits(self) -> Any:
        return SMALL_LIMITS


CUDA_LIMITED = _CudaLimitedReference()
SMALL_LIMITED = _SmallLimitedReference()


@pytest.fixture
def probes(monkeypatch):
    """Registers the two probe backends (and forgets the warm denoisers afterwards)."""
    monkeypatch.setitem(base.REGISTRY, "cuda-limited", f"{__name__}:CUDA_LIMITED")
    monkeypatch.setitem(base.REGISTRY, "small-limited", f"{__name__}:SMALL_LIMITED")
    monkeypatch.setattr(base, "_loaded", {})
    yield
    clear_denoiser_cache()


def _broadcast(shape: tuple[int, int], channels: int, value: float = 0.5) -> np.ndarray:
    """An image of ``shape`` without its memory: every pixel is the same one."""
    return np.broadcast_to(np.full((1, 1, channels), value, np.float32), (*shape, channels))


def _within(plan: Any, limits: TileLimits, shape: tuple[int, int], options: dict) -> None:
    assert limits.fits(*plan.tile_shape), plan.tile_shape
    model = _model()
    unbounded = plan_denoise(model, *shape, DenoiseOptions(**options))
    assert not limits.fits(*unbounded.tile_shape), "the options alone would cut the frame"
    assert plan.tiles == plan_denoise(model, *shape, DenoiseOptions(**options), limits).tiles


@pytest.mark.parametrize("options", LARGE, ids=["tile_size", "max_memory_mb"])
def test_the_one_call_api_plans_within_the_limits(probes, options) -> None:
    with pytest.raises(_Planned) as planned:
        oidn_gpu.denoise(
            _broadcast(K8, 3), backend="cuda-limited", weights=TINY.read_bytes(), **options
        )
    _within(planned.value.plan, tile_limits("cuda"), K8, options)


@pytest.mark.parametrize("options", LARGE, ids=["tile_size", "max_memory_mb"])
def test_composable_aovs_plan_within_the_limits(probes, options) -> None:
    with (
        oidn_gpu.Denoiser(backend="cuda-limited", weights=TINY.read_bytes(), **options) as den,
        pytest.raises(_Planned) as planned,
    ):
        den.denoise_aovs(_broadcast(K8, 3), {"diffuse": _broadcast(K8, 3, 0.25)})
    _within(planned.value.plan, tile_limits("cuda"), K8, options)


def test_a_host_temporal_session_plans_within_the_limits(probes) -> None:
    options = {"max_memory_mb": HUGE_BUDGET_MB}
    with oidn_gpu.Denoiser(
        backend="small-limited", weights=TINY.read_bytes(), temporal=True, **options
    ) as den:
        assert isinstance(den.session, HostTemporalSession)
        with pytest.raises(_Planned) as planned:
            den.denoise(
                np.full((*SMALL_FRAME, 3), 0.5, np.float32),
                motion=np.zeros((*SMALL_FRAME, 2), np.float32),
                depth=np.ones(SMALL_FRAME, np.float32),
            )
    _within(planned.value.plan, SMALL_LIMITS, SMALL_FRAME, options)


@settings(max_examples=40, deadline=None)
@given(
    height=st.integers(1, K8[0]),
    width=st.integers(1, K8[1]),
    tile_size=st.one_of(st.none(), st.integers(208, 16384)),  # 208: two overlaps and 16
    max_memory_mb=st.one_of(st.none(), st.integers(1, HUGE_BUDGET_MB)),
    whole_image=st.booleans(),
)
def test_the_planner_keeps_every_frame_within_the_cuda_limits(
    height: int, width: int, tile_size: int | None, max_memory_mb: int | None, whole_image: bool
) -> None:
    limits = tile_limits("cuda")
    options = DenoiseOptions(
        tile_size=tile_size, max_memory_mb=max_memory_mb, whole_image=whole_image
    )
    plan = plan_denoise(_model(), height, width, options, limits)
    assert limits.fits(*plan.tile_shape), plan.tile_shape
    covered = np.zeros((height, width), bool)
    for tile in plan.tiles.tiles:
        covered[tile.out_y : tile.out_y + tile.out_h, tile.out_x : tile.out_x + tile.out_w] = True
    assert covered.all()


@functools.cache
def _model() -> Any:
    return unet.load_model(TINY)
