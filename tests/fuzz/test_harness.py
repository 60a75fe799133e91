"""The fuzz harness itself: it tells every outcome apart, and its cases are seeded."""

from __future__ import annotations

import os
import time
from pathlib import Path

from oidn_gpu.errors import InvalidArgumentError
from tests.fuzz import harness


def outcome_by_name(data: bytes, folder: Path) -> str | None:
    """A check whose outcome the case's bytes name (run in the fuzz child)."""
    if data == b"refuse":
        raise InvalidArgumentError("a refused case")
    if data == b"foreign":
        raise KeyError("not one of the project's exceptions")
    if data == b"crash":
        os._exit(134)  # dies as an abort in a native library would (without a core file)
    if data == b"hang":
        time.sleep(3600)
    return data.decode() if data == b"label" else None


def test_outcomes_are_told_apart_and_the_child_is_replaced(tmp_path: Path) -> None:
    cases = [b"ok", b"refuse", b"foreign", b"crash", b"label", b"hang", b"ok"]
    # the hang waits for the timeout and its retry; every other case answers in milliseconds
    report = harness.run_cases(
        "tests.fuzz.test_harness:outcome_by_name", cases, tmp_path, timeout_s=2.0
    )
    assert (report.cases, report.accepted, dict(report.labels)) == (7, 3, {"label": 1})
    assert dict(report.refused) == {"InvalidArgumentError": 1}
    assert len(report.foreign) == 1 and report.foreign[0].startswith("case 2: KeyError: ")
    assert (report.crashes, report.hangs) == ([3], [5])
    assert report.problems().splitlines()[:2] == ["crashed: case 3", "hung: case 5"]


def test_mutations_are_the_same_for_a_seed_and_differ_from_the_base() -> None:
    base = bytes(range(256)) * 8
    first = list(harness.mutations([base], 50, seed=7))
    assert first == list(harness.mutations([base], 50, seed=7))
    assert first != list(harness.mutations([base], 50, seed=8))
    assert all(case != base for case in first)


def test_a_child_reports_its_own_peak_memory_not_its_parents(tmp_path: Path) -> None:
    """Linux carries ``ru_maxrss`` across exec: a child spawned by a large test process
    must still report its own size (here the parent holds 400 MB more than the child)."""
    import numpy as np

    ballast = np.ones(400 * 2**20 // 8)
    report = harness.run_cases("tests.fuzz.test_harness:outcome_by_name", [b"ok"], tmp_path)
    assert ballast.sum() > 0 and report.accepted == 1
    assert 0 < report.peak_rss_mb < 300
