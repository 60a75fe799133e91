"""Property tests: fused graphs compute what unfused graphs compute.

Random U-Net-like graphs with odd channel counts and random tiny weights run
through `graph.reference.run_graph` and the `ReferenceExecutor`, fused
(`optimize`, any ``channel_align``) and unfused.

Tolerances:
- `run_graph` fused vs unfused: the fused nodes do the same im2col + gemm on
  the same arrays (the concat and the pre-pool conv output are built exactly
  as the unfused nodes build them), so results are expected to be identical;
  ``rtol = 1e-6`` only allows for a BLAS that picks different kernels.
- `ReferenceExecutor` fused vs unfused: the same products, but a pixel can sit
  at another column of the BLAS calls, and some BLAS kernels (OpenBLAS's AVX2
  ones) round by column position: equal up to float32 summation order
  (`tests.compare.assert_equal_up_to_summation_order`).
- `ReferenceExecutor` vs `run_graph` (both fp32): same products, different
  summation order (bias inside the gemm, other call shapes), so about 1e-7
  relative per layer; ``rtol = atol = 2e-5`` of the output scale.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from oidn_gpu.backends.reference import ReferenceExecutor
from oidn_gpu.graph import ir
from oidn_gpu.graph.passes import optimize
from oidn_gpu.graph.plan import size_alignment
from oidn_gpu.graph.reference import run_graph
from tests.compare import assert_close, assert_equal_up_to_summation_order
from tests.models import Model, random_model
from tests.property.graph_strategies import unet_graphs

CHANNELS = st.integers(1, 11)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Model, np.ndarray]:
    graph = draw(
        unet_graphs(
            channels=CHANNELS,
            depths=st.integers(0, 3),
            bottleneck_convs=st.integers(0, 1),
            decoder_convs=st.just(1),
            activations=st.sampled_from(ir.Activation),
        )
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from([np.float16, np.float32]))
    model = random_model(graph, rng, dtype)
    align = size_alignment(graph)
    height = align * draw(st.integers(1, 3))
    width = align * draw(st.integers(1, 3))
    x = rng.standard_normal((graph.input_channels, height, width)).astype(np.float32)
    return model, x


@settings(max_examples=40, deadline=None)
@given(cases(), st.sampled_from([1, 2, 4]))
def test_run_graph_fused_equals_unfused(case: tuple[Model, np.ndarray], align: int) -> None:
    model, x = case
    unfused = run_graph(model.graph, model.convs, x)
    fused = run_graph(optimize(model.graph, channel_align=align), model.convs, x)
    scale = float(np.abs(unfused).max()) or 1.0
    assert_close(fused, unfused, rtol=1e-6, atol=1e-6 * scale)


@settings(max_examples=25, deadline=None)
@given(cases())
def test_executor_fused_and_unfused_agree_and_match_run_graph(
    case: tuple[Model, np.ndarray],
) -> None:
    model, x = case
    fused = ReferenceExecutor(model).run(x)
    unfused = ReferenceExecutor(model, fuse=False).run(x)
    assert_equal_up_to_summation_order(fused, unfused, label="fused vs unfused")
    expected = run_graph(model.graph, model.convs, x)
    scale = float(np.abs(expected).max()) or 1.0
    assert_close(fused, expected, rtol=2e-5, atol=2e-5 * scale)
