"""The temporal passes' WGSL kernels agree with the NumPy oracle (wgpu on lavapipe)."""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.temporal import passes as tp
from tests.temporal import synthetic
from tests.temporal.test_passes import PARAMS

pytestmark = pytest.mark.gpu

# Float32 in the same order as NumPy; only FMA contraction by the shader compiler differs.
RTOL, ATOL = 2e-5, 2e-6


@pytest.fixture(scope="module")
def wgpu_passes():
    from oidn_gpu.backends.wgpu.temporal import WgpuTemporalPasses

    passes = WgpuTemporalPasses()
    yield passes
    passes.close()


@pytest.mark.parametrize(
    "kind, params",
    [
        ("pan", PARAMS),
        (
            "object",
            tp.TemporalParams(clamp="minmax", clamp_radius=1).with_guides(
                depth=True, normal=False, albedo=True
            ),
        ),
        (
            "static",
            tp.TemporalParams(clamp="none", firefly_ratio=0).with_guides(
                depth=False, normal=True, albedo=True
            ),
        ),
        (
            "object",
            tp.TemporalParams(disocclusion_margin=2, change_sigmas=0).with_guides(
                depth=True, normal=False, albedo=False
            ),
        ),
        (  # silhouettes within the depth tolerance
            "contact",
            tp.TemporalParams().with_guides(depth=True, normal=False, albedo=False),
        ),
    ],
)
def test_wgsl_passes_agree_with_numpy(wgpu_passes, kind, params):
    frames = synthetic.sequence(kind, frames=4, size=24)
    frames[2].motion[3, 3] = np.nan
    frames[2].motion[5, 5] = -np.inf
    frames[3].depth[7, 7] = np.nan
    expected = synthetic.run_passes(tp.NumpyTemporalPasses(), frames, params)
    got = synthetic.run_passes(wgpu_passes, frames, params)
    for (rep_e, out_e), (rep_g, out_g) in zip(expected, got, strict=True):
        np.testing.assert_allclose(rep_g, rep_e, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(out_g, out_e, rtol=RTOL, atol=ATOL)


def test_wgsl_stabilize_passes_nonfinite_denoised_pixels(wgpu_passes):
    rep = np.zeros((8, 8, tp.REPROJECTION_CHANNELS), np.float32)
    rep[..., tp.REPROJECTION_OUTPUT_COUNT] = 1.0
    den = np.ones((8, 8, 3), np.float32)
    den[2, 2] = np.nan
    out = wgpu_passes.stabilize(den, rep, PARAMS)
    np.testing.assert_array_equal(out, tp.stabilize(den, rep, PARAMS))
