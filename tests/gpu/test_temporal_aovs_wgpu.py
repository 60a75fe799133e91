"""`TemporalAovDenoiser` on the wgpu backend (lavapipe in CI): the beauty goes through the
WGSL temporal passes on host arrays and wgpu's network, the passes through the NumPy
reprojection under its decisions; a pass holding the beauty comes out as the beauty (float
rounding of the two reprojections aside), and the summed passes add up to it (tiny weights
keep it fast)."""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu import TemporalAovDenoiser, TemporalDenoiser
from tests.temporal import synthetic

from .conftest import DATA

pytestmark = pytest.mark.gpu

WEIGHTS = (DATA / "tiny_base_ic9.tza").read_bytes()  # color + albedo + normal


def test_temporal_passes_on_wgpu_keep_the_beauty_history_and_sum() -> None:
    frames = synthetic.sequence("object", frames=3, size=32)
    options = dict(weights=WEIGHTS, backend="wgpu", precision="fp32", hdr=True)
    with oidn_gpu.Denoiser(**options) as den, TemporalAovDenoiser(TemporalDenoiser(den)) as td:
        assert td.session.name.startswith("host wgpu")  # the backend's temporal passes
        for f in frames:
            share = np.linspace(0.2, 0.8, 32, dtype=np.float32)[None, :, None]
            key = (f.color * share).astype(np.float32)
            fill = (f.color - key).astype(np.float32)
            beauty = key + fill
            result = td.denoise(
                beauty,
                {"key": key, "fill": fill, "copy": beauty},
                f.albedo,
                f.normal,
                motion=f.motion,
                depth=f.depth,
                summed=["key", "fill"],
            )
            scale = np.abs(result.beauty).max()
            np.testing.assert_allclose(result.passes["copy"], result.beauty, atol=1e-4 * scale)
            total = result.passes["key"].astype(np.float64) + result.passes["fill"]
            assert np.abs(total - result.beauty).max() <= 1e-5 * scale
