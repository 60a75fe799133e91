"""``oidn-gpu bench --backend reference --max-memory-mb``: the tiled denoise's time and peak."""

from __future__ import annotations

import json


def test_bench_with_a_memory_budget_times_one_tile_and_reports_the_tiles(cli, tmp_path) -> None:
    out = tmp_path / "bench.json"
    # 16 x 1000 px: wider than OIDN's smallest tile (768 px), so a zero budget tiles it
    result = cli(
        "bench",
        "--backend",
        "reference",
        "--size",
        "1000x16",
        "--runs",
        "1",
        "--warmup",
        "0",
        "--weights",
        "rt_hdr_alb_nrm_small",
        "--max-memory-mb",
        "0",
        "--json",
        str(out),
    )
    assert result.rc == 0, result.err
    data = json.loads(out.read_text())
    assert data["max_memory_mb"] == 0 and data["tiles"] > 1
    assert (data["network_height"], data["network_width"]) == (16, 768)
    assert len(data["denoise_ms"]) == 1 and data["peak_rss_mib"] > 0
    assert "tiles, max_memory_mb 0)" in result.out and "(768x16)" in result.out
