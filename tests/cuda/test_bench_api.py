"""The public-API rows of the cuda benchmark (`cli.bench_api`) run and report each
row; on the CPU here, through the torch engine and a tiny U-Net (the H200 gives the numbers)."""

from __future__ import annotations

import math
from pathlib import Path

from oidn_gpu.cli import bench_api

TINY_AOV = Path(__file__).resolve().parents[1] / "data" / "tiny_base_ic9.tza"


def test_every_api_row_is_measured():
    rows = bench_api.api_rows(
        backend="cuda",
        size=(16, 16),
        weights=TINY_AOV,
        precision="fp16",
        engine="cudnn",
        runs=2,
        host_runs=2,
        warmup=1,
    )
    assert set(rows) == set(bench_api.ROWS)
    assert all(math.isfinite(ms) and ms > 0 for ms in rows.values())
