"""Mutated weight (.tza) files: loaded or refused with `WeightsFormatError`, and those
that load denoise a frame whose non-finite pixel count matches its output
(`tests.fuzz.harness`, `tests.fuzz.checks`). Seeded and bounded.
"""

from __future__ import annotations

from pathlib import Path

from tests.fuzz import checks, harness

WEIGHT_CASES = 1200
SEED = 20261202
PEAK_RSS_MB = 1024


def test_mutated_weights_load_or_are_refused_with_project_errors(tmp_path: Path) -> None:
    cases = list(harness.mutations(checks.base_weights(), WEIGHT_CASES, SEED, header_byte_size=256))
    report = harness.run_cases("tests.fuzz.checks:check_weights", cases, tmp_path)
    assert report.problems() == ""
    assert report.cases == WEIGHT_CASES
    assert report.refused["WeightsFormatError"] > 0
    # some mutated weights load and make non-finite pixels, and the frame counts them
    assert report.labels["finite"] > 0 and report.labels["non-finite"] > 0
    assert report.peak_rss_mb < PEAK_RSS_MB
