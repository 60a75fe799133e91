"""Fixtures of the record tests: the session's GPU device (lavapipe in CI) and test weights.

GPU tests are marked ``gpu`` and RUN on lavapipe; the ``gpu`` fixture lives in
``tests/conftest.py`` and fails without an adapter.
"""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="session")
def tiny_tza() -> dict[str, bytes]:
    return {n: (DATA / f"{n}.tza").read_bytes() for n in ("tiny_base_ic3", "tiny_base_ic9")}
