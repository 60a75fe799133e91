"""The cold-sequence rows of ``oidn-gpu bench --cold``: totals, ratios and the engine of
every frame, from the fresh processes' reports."""

from __future__ import annotations

import pytest

from oidn_gpu.backends.benchmark import frame_counts
from oidn_gpu.cli.bench_sequence import SequenceResult, _runs_of
from oidn_gpu.errors import InvalidArgumentError


def test_the_engine_of_each_frame_is_reported_in_order():
    assert _runs_of(["cudnn", "cudnn", "triton", "triton", "triton"]) == [
        ["cudnn", 2],
        ["triton", 3],
    ]
    assert _runs_of([]) == []


def test_the_table_compares_totals_with_intel_oidn():
    result = SequenceResult((1080, 1920))
    result.runs["intel_oidn"] = {
        4: [{"frame_ms": [20.0, 10.0, 10.0, 10.0], "engines": [["oidn", 4]]}]
    }
    result.runs["ours"] = {
        4: [{"frame_ms": [30.0, 5.0, 5.0, 5.0], "engines": [["cudnn", 1], ["triton", 3]]}]
    }
    summary = result.summary("ours", 4)
    assert summary["total_s"] == pytest.approx(0.045)
    assert summary["first_s"] == pytest.approx(0.030)
    assert summary["last_half_ms"] == pytest.approx(5.0)
    table = result.table()
    assert "4 frames, oidn-gpu / Intel OIDN total: 0.90" in table
    assert "4 frames, oidn-gpu engines in order: cudnn x1, triton x3" in table
    assert result.to_dict()["summary"]["intel_oidn"]["4"]["total_s"] == pytest.approx(0.05)


def test_cold_frame_counts():
    assert frame_counts("100,400") == (100, 400)
    assert frame_counts("0") == ()
    with pytest.raises(InvalidArgumentError, match="--cold-frames must be counts like 100,400"):
        frame_counts("100,x")
