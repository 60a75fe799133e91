"""Fixtures of the record tests: the session's GPU device (lavapipe in CI) and test weights.

GPU tests are marked ``gpu`` and RUN on lavapipe; without an adapter they fail
unless ``OIDN_GPU_ALLOW_NO_GPU=1`` (then they skip).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="session")
def gpu():  # noqa: ANN201 - GpuDevice
    try:
        from oidn_gpu.backends.wgpu.device import open_device

        device = open_device()
    except Exception as err:  # noqa: BLE001 - any failure means no usable adapter
        if os.environ.get("OIDN_GPU_ALLOW_NO_GPU") == "1":
            pytest.skip(f"no wgpu adapter: {err}")
        pytest.fail(f"no wgpu adapter ({err}); set OIDN_GPU_ALLOW_NO_GPU=1 to skip", pytrace=False)
    yield device
    device.close()


@pytest.fixture(scope="session")
def tiny_tza() -> dict[str, bytes]:
    return {n: (DATA / f"{n}.tza").read_bytes() for n in ("tiny_base_ic3", "tiny_base_ic9")}
