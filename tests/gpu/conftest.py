"""Fixtures of the wgpu backend tests: one device per session, tiny models, a compare helper.

Every test here is marked ``gpu`` and RUNS on lavapipe. Without an adapter the
tests fail (they never skip; ``-m 'not gpu'`` deselects them). Inputs stay
small (<= 64x64): lavapipe is exact but slow.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).resolve().parents[1] / "data"

# fp32 executors vs the float64 reference: different summation order only.
FP32_REL_L2 = 1e-5
# fp16 storage of activations and weights (11-bit mantissa) over ~20 layers.
FP16_REL_L2 = 2e-3


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.gpu)


@pytest.fixture(scope="session")
def tiny_models():
    from oidn_gpu.model.unet import load_model

    names = ("tiny_base_ic3", "tiny_base_ic9", "tiny_large_ic6")
    return {name: load_model(DATA / f"{name}.tza") for name in names}


def rel_l2(candidate: np.ndarray, reference: np.ndarray) -> float:
    c = np.asarray(candidate, np.float64)
    r = np.asarray(reference, np.float64)
    return float(np.linalg.norm(c - r) / max(np.linalg.norm(r), 1e-30))


def assert_close(candidate: np.ndarray, reference: np.ndarray, rel: float, what: str = "") -> None:
    """Shape, finiteness and relative L2 error, reporting the worst element."""
    assert candidate.shape == reference.shape, (candidate.shape, reference.shape)
    assert np.isfinite(candidate).all(), f"{what}: non-finite values"
    err = rel_l2(candidate, reference)
    if err > rel:
        diff = np.abs(np.asarray(candidate, np.float64) - reference)
        where = np.unravel_index(int(np.argmax(diff)), diff.shape)
        pytest.fail(
            f"{what}: relative L2 {err:.3g} > {rel:.3g}; max abs error {diff[where]:.3g} at {where}"
        )
