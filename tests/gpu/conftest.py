"""Fixtures of the wgpu backend tests: one device per session, tiny models, tolerances.

Every test here is marked ``gpu`` and RUNS on lavapipe. Without an adapter the
tests fail (they never skip; ``-m 'not gpu'`` deselects them). Inputs stay
small (<= 64x64): lavapipe is exact but slow.
"""

from __future__ import annotations

from pathlib import Path

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
