"""fp16 activation stores saturate at +-65504 (the largest half) instead of overflowing.

oidn-webgpu stores ``vec4<f16>(value)``: WGSL leaves the conversion of a float32 beyond
the half range implementation-defined, so the same network may give Inf (then NaN through
the next layers) on one device and a finite value on another. oidn-gpu clamps first
(``kernels/wgsl/to_output.wgsl``), so every device stores +-65504 (docs/architecture.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.kernels import conv_direct, conv_igemm
from oidn_gpu.kernels.gemm import GemmOptions
from oidn_gpu.kernels.spec import ConvSpec, Precision

from .conv_ref import make_case, reference, run_conv

pytestmark = pytest.mark.gpu

HALF_MAX = 65504.0


@pytest.mark.parametrize("family", ["direct", "implicit-gemm"])
def test_fp16_outputs_beyond_the_half_range_store_the_largest_half(family, rng, limits):
    spec = ConvSpec.simple(8, 8, Precision.FP16, relu=False)
    kernel = (
        conv_direct.generate(spec)
        if family == "direct"
        else conv_igemm.generate(spec, GemmOptions(), limits)
    )
    srcs, wt, bias = make_case(spec, 8, 8, rng)
    bias = np.float32([1e6, -1e6, 7e4, -7e4, 0, 0, 0, 0])  # beyond +-65504 whatever the sum
    got = run_conv(kernel, spec, srcs, wt, bias, 8, 8)
    ref = reference(spec, srcs, wt.astype(np.float64), bias)
    assert np.all(np.isfinite(got))
    beyond = np.abs(ref) > HALF_MAX
    assert beyond[..., :4].all() and not beyond[..., 4:].any()
    assert np.array_equal(got[beyond], np.sign(ref[beyond]) * HALF_MAX)
