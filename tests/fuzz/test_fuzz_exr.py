"""Mutated OpenEXR files through every reader and a whole denoised frame: no crash, no
hang, and no exception but the project's own (`tests.fuzz.harness`, `tests.fuzz.checks`).

Seeded and bounded: the same cases on every machine, a few seconds on 2 cores.
"""

from __future__ import annotations

from pathlib import Path

from tests.fuzz import checks, harness

EXR_CASES = 600
SEED = 20261201
PEAK_RSS_MB = 1024  # 16 x 16 files: a child above this allocated for a header's claims


def test_mutated_exrs_are_read_or_refused_with_project_errors(tmp_path: Path) -> None:
    bases = tmp_path / "bases"
    bases.mkdir()
    cases = list(harness.mutations(checks.base_exrs(bases), EXR_CASES, SEED))
    work = tmp_path / "work"
    work.mkdir()
    report = harness.run_cases("tests.fuzz.checks:check_exr", cases, work)
    assert report.problems() == ""
    assert report.cases == EXR_CASES
    # the mutations reach both outcomes: some files still denoise, most are refused
    assert report.accepted > 0 and sum(report.refused.values()) > EXR_CASES // 4
    assert report.peak_rss_mb < PEAK_RSS_MB
