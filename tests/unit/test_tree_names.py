"""No file or folder in the tree is named after a work item (a round, an issue, a device
run's ticket) rather than after what it holds: `tests/unit/test_bench_suite.py` keeps
bench/ so, this test the package, the tests, the scripts and the docs."""

from __future__ import annotations

import re

from tests.datasets import REPO_ROOT

FOLDERS = ("src", "tests", "scripts", "docs", "bench")
# `k22`, `issue41`, `joined2`, `round3`, `h200_k22`, `_22`: names of work items. Device
# names alone (`cuda_h200.sh`, a script for that GPU) say what the file is for.
WORK_ITEM = re.compile(
    r"(?<![a-z])k[0-9]{2}|issue|joined[0-9]|_[0-9]{2}\b|round[_-]?[0-9]|sprint|ticket",
    re.IGNORECASE,
)
# Compiled kernels shipped under their content digests, and Python's caches.
SKIPPED = ("shipped", "__pycache__", ".pytest_cache", ".hypothesis")


def tree_names() -> list[str]:
    names = []
    for folder in FOLDERS:
        for path in (REPO_ROOT / folder).rglob("*"):
            relative = path.relative_to(REPO_ROOT)
            if not any(part in SKIPPED for part in relative.parts):
                names.append(relative.as_posix())
    return sorted(names)


def test_the_pattern_catches_work_item_names() -> None:
    for name in ("h200_k22.py", "issue41_probe.py", "round3.md", "joined2.patch", "run_22.json"):
        assert WORK_ITEM.search(name), name
    for name in ("cuda_h200.sh", "test_frame_path.py", "program_tiny_v2.oidnp", "mask16.py"):
        assert not WORK_ITEM.search(name), name


def test_no_file_is_named_after_a_work_item() -> None:
    named = [name for name in tree_names() if WORK_ITEM.search(name.rsplit("/", 1)[-1])]
    assert not named, f"files named after a work item, not what they hold: {named}"
