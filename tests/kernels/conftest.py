"""Fixtures of the kernel tests: the test device's limits."""

from __future__ import annotations

import pytest

from . import gpu_runner


@pytest.fixture(scope="session")
def limits():
    """`DeviceLimits` of the wgpu test device (fails clearly when there is no adapter)."""
    return gpu_runner.limits()
