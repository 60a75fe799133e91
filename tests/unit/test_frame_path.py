"""Every entry of the filter plans an 8K frame within the backend's tile limits.

`Denoiser.denoise` of host arrays, of device tensors, `Denoiser.denoise_many` and the
frames of a temporal session all plan through the denoiser's one frame path
(`filter_frame.FramePath`); a large ``tile_size`` or ``max_memory_mb`` asks for one
4320x7680 tile, past the cuda kernels' 32-bit indexing, and every entry must cut it.
The backend here is the reference backend with the cuda backend's tile limits and a
runner that stops each frame at the plan it is given (no 8K denoise is run).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.backends import base
from oidn_gpu.backends.base import TemporalFrame, tile_limits
from oidn_gpu.backends.plan import DenoiseOptions, plan_denoise
from oidn_gpu.backends.reference.backend import ReferenceBackend
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.model import unet
from tests.datasets import DATA_DIR

TINY = DATA_DIR / "tiny_base_ic3.tza"
K8 = (4320, 7680)
HUGE_BUDGET_MB = 10**7  # no memory bound: only the backend's limits cut tiles
LARGE = [{"tile_size": 16384}, {"max_memory_mb": HUGE_BUDGET_MB}]


class _Planned(Exception):  # noqa: N818 - a frame stopped at its plan, not an error
    """Raised by `_PlanProbe` with the plan a runner was given."""

    def __init__(self, plan: Any) -> None:
        super().__init__("stopped at the plan")
        self.plan = plan


class _PlanProbe:
    """A `TileRunner`, `DeviceRunner` (on the CPU) and `SequenceRunner` that raises
    `_Planned` with the plan of the frame it is asked to run."""

    @property
    def device(self) -> Any:
        import torch

        return torch.device("cpu")

    def run(self, images: Any, plan: Any, progress: Any = None) -> Any:
        raise _Planned(plan)

    def run_device(self, images: Any, plan: Any, progress: Any = None) -> Any:
        raise _Planned(plan)

    def run_device_autoexposed(self, images: Any, plan: Any, progress: Any = None) -> Any:
        raise _Planned(plan)

    def run_many(self, frames: Any, plan: Any, *, autoexposure: bool) -> Any:
        raise _Planned(plan)

    def close(self) -> None:
        pass


class _CudaLimitedReference(ReferenceBackend):
    name = "cuda-limited"
    priority = -1

    @property
    def tile_limits(self) -> Any:
        return tile_limits("cuda")

    def create_runner(self, executor: Any) -> Any:
        return _PlanProbe()


PROBE = _CudaLimitedReference()


@pytest.fixture
def denoiser(monkeypatch, request):
    monkeypatch.setitem(base.REGISTRY, "cuda-limited", f"{__name__}:PROBE")
    monkeypatch.setattr(base, "_loaded", {})
    with oidn_gpu.Denoiser(
        backend="cuda-limited", weights=TINY.read_bytes(), **request.param
    ) as den:
        yield den


def _expected(options: dict[str, Any]) -> Any:
    """The plan within the cuda limits, and the one tile planned without them."""
    model = unet.load_model(TINY)
    limited = plan_denoise(model, *K8, DenoiseOptions(**options), tile_limits("cuda"))
    unbounded = plan_denoise(model, *K8, DenoiseOptions(**options))
    assert not unbounded.tiles.is_tiled and limited.tiles.is_tiled
    assert not tile_limits("cuda").fits(*unbounded.tile_shape)
    return limited


def _check(planned: _Planned | Any, options: dict[str, Any]) -> None:
    plan = planned.plan
    assert tile_limits("cuda").fits(*plan.tile_shape), plan.tile_shape
    assert plan.tiles == _expected(options).tiles


def _color() -> np.ndarray:
    # An 8K image without 8K of memory: every pixel is the same one.
    return np.broadcast_to(np.full((1, 1, 3), 0.5, np.float32), (*K8, 3))


@pytest.mark.parametrize("denoiser", LARGE, indirect=True, ids=["tile_size", "max_memory_mb"])
def test_numpy_denoise_plans_within_the_limits(denoiser) -> None:
    with pytest.raises(_Planned) as planned:
        denoiser.denoise(_color())
    _check(planned.value, _options(denoiser))


@pytest.mark.parametrize("denoiser", LARGE, indirect=True, ids=["tile_size", "max_memory_mb"])
def test_device_tensors_plan_within_the_limits(denoiser) -> None:
    torch = pytest.importorskip("torch")
    color = torch.full((1, 1, 3), 0.5).expand(*K8, 3)
    with pytest.raises(_Planned) as planned:
        denoiser.denoise(color)
    _check(planned.value, _options(denoiser))


@pytest.mark.parametrize("denoiser", LARGE, indirect=True, ids=["tile_size", "max_memory_mb"])
def test_sequences_plan_within_the_limits(denoiser) -> None:
    with pytest.raises(_Planned) as planned:
        next(denoiser.denoise_many([_color()]))
    _check(planned.value, _options(denoiser))


@pytest.mark.parametrize("denoiser", LARGE, indirect=True, ids=["tile_size", "max_memory_mb"])
def test_temporal_frames_plan_within_the_limits(denoiser) -> None:
    pytest.importorskip("wgpu")
    from oidn_gpu.backends.wgpu.temporal_session import WgpuTemporalSession

    motion = np.broadcast_to(np.zeros((1, 1, 2), np.float32), (*K8, 2))
    frame = TemporalFrame(_color(), None, None, motion, None)
    session = WgpuTemporalSession(denoiser.frames)
    try:
        _images, planned = session._planned(frame)  # what each session frame runs with
    finally:
        session.close()
    _check(planned, _options(denoiser))
    assert planned.runner is next(iter(denoiser._engines.values())).runner


def test_the_cuda_runner_refuses_a_plan_past_its_limits() -> None:
    pytest.importorskip("torch")
    from oidn_gpu.backends.cuda.backend import CudaTileRunner

    model = unet.load_model(TINY)
    plan = plan_denoise(model, *K8, DenoiseOptions(tile_size=16384))  # one 4320x7680 tile
    with pytest.raises(InvalidArgumentError, match="7680x4320 px tile is past the cuda"):
        CudaTileRunner(None).run(None, plan)


def _options(denoiser: Any) -> dict[str, Any]:
    options = denoiser.options
    return {"tile_size": options.tile_size, "max_memory_mb": options.max_memory_mb}


def test_one_plan_cache_serves_every_entry(rng) -> None:
    color = rng.random((40, 56, 3), np.float32)
    with oidn_gpu.Denoiser(backend="reference", weights=TINY.read_bytes()) as den:
        frames = den.frames
        den.denoise(color)
        first = _cached_plans(frames)
        next(den.denoise_many([color]))
        assert _cached_plans(frames) == first  # the sequence's frame found the same plan
        assert len(first) == 1 and first[0].tiles.height == 40
        den.close()
        assert _cached_plans(frames) == []


def _cached_plans(frames: Any) -> list[Any]:
    return [plan for _model, plan in frames._plans.values()]
