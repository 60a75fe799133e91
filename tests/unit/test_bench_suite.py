"""bench/ stays a small benchmark suite: a few files, each one documented, none a run's record.

A device run's logs and one-off scripts belong in git history with their numbers in
docs/benchmarks.md (bench/README.md, "What does not belong here").
"""

from __future__ import annotations

import re

from tests.datasets import REPO_ROOT

BENCH = REPO_ROOT / "bench"
MAX_FILES = 30
# A bench path in the docs that is not a record in history (`COMMIT:bench/...`).
CITED = re.compile(r"(?<![:\w/])bench/[\w./-]*[\w/]")
# Names of work items rather than of what a file measures: `k22`, `issue`, `joined2`, `_22`.
WORK_ITEM = re.compile(r"k[0-9]{2}|issue|joined[0-9]|_[0-9]{2}\b", re.IGNORECASE)


def bench_files() -> list[str]:
    """Paths under bench/, relative to it (Python's caches left out)."""
    return sorted(
        path.relative_to(BENCH).as_posix()
        for path in BENCH.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )


def test_bench_holds_at_most_thirty_files() -> None:
    files = bench_files()
    assert 0 < len(files) <= MAX_FILES, (
        f"bench/ holds {len(files)} files, expected at most {MAX_FILES}: keep device "
        f"records in git history and their numbers in docs/benchmarks.md"
    )


def test_every_bench_file_is_documented() -> None:
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    benchmarks = (REPO_ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    undocumented = [
        name
        for name in bench_files()
        if name != "README.md" and f"`{name}`" not in readme and f"bench/{name}" not in benchmarks
    ]
    assert not undocumented, (
        f"bench/ files named neither in bench/README.md nor in docs/benchmarks.md: {undocumented}"
    )


def test_no_bench_file_is_named_after_a_work_item() -> None:
    named = [name for name in bench_files() if WORK_ITEM.search(name)]
    assert not named, f"bench/ files named after a work item, not what they measure: {named}"


def test_bench_paths_the_docs_cite_exist() -> None:
    docs = ["README.md", "docs/benchmarks.md", "docs/architecture.md", "bench/README.md"]
    missing = {}
    for doc in docs:
        text = (REPO_ROOT / doc).read_text(encoding="utf-8")
        gone = sorted({cited for cited in CITED.findall(text) if not (REPO_ROOT / cited).exists()})
        if gone:
            missing[doc] = gone
    assert not missing, (
        f"bench/ paths cited but not in the tree (write a record in history as "
        f"COMMIT:bench/PATH): {missing}"
    )
