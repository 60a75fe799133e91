"""bench/charts.py: the committed benchmark documents carry the bench schema and the
numbers of docs/benchmarks.md's tables, and the charts are drawn from them (with
matplotlib installed: ``pip install 'oidn-gpu[bench]'``)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from oidn_gpu.backends.bench_result import BENCH_SCHEMA, BENCH_SCHEMA_VERSION
from tests.datasets import REPO_ROOT

DATA = REPO_ROOT / "docs" / "benchmark-data"


def _charts():
    spec = importlib.util.spec_from_file_location("charts", REPO_ROOT / "bench" / "charts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_committed_document_has_the_bench_schema_and_names_its_source():
    paths = sorted(DATA.glob("*.json"))
    assert len(paths) >= 3
    for path in paths:
        doc = json.loads(path.read_text())
        assert (doc["schema"], doc["schema_version"]) == (BENCH_SCHEMA, BENCH_SCHEMA_VERSION)
        section = doc["transcribed_from"].split("'")[1]
        assert f"## {section}" in (REPO_ROOT / "docs" / "benchmarks.md").read_text() or (
            f"### {section}" in (REPO_ROOT / "docs" / "benchmarks.md").read_text()
        ), path.name


def test_the_committed_numbers_are_the_tables_numbers():
    text = (REPO_ROOT / "docs" / "benchmarks.md").read_text()
    cuda = json.loads((DATA / "cuda-h200-1080p.json").read_text())
    assert f"**{cuda['cuda']['e2e_gpu_median_ms']:.3f}**" in text
    cold = json.loads((DATA / "cuda-cold-h100.json").read_text())["sequences"]["summary"]
    row = f"| **100 frames, total** | {cold['intel_oidn']['100']['total_s']:.3f} | "
    assert row + f"**{cold['ours']['100']['total_s']:.3f}**" in text
    oidn = json.loads((DATA / "oidn-cpu.json").read_text())["rows"]
    assert (
        f"| 1920x1080 | {oidn[1]['denoiser_median_ms']} ms | {oidn[1]['pyoidn_median_ms']} ms"
        in text
    )


def test_docs_show_every_chart_the_script_draws():
    text = (REPO_ROOT / "docs" / "benchmarks.md").read_text()
    for name in _charts().CHARTS:
        assert f"(img/{name})" in text
        assert (REPO_ROOT / "docs" / "img" / name).is_file()


def test_the_charts_are_drawn_from_the_documents(tmp_path):
    pytest.importorskip("matplotlib")
    charts = _charts()
    written = charts.draw(charts.load_documents(DATA), tmp_path)
    assert sorted(p.name for p in written) == sorted(charts.CHARTS)
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)
