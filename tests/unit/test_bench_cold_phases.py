"""`oidn-gpu bench --cold`'s rows of a first denoise's phases: the logged phases in seconds,
the pipelines compiled and the kernels rendered rather than found shipped."""

from __future__ import annotations

import logging

from oidn_gpu.cli.bench_cold import ColdResult, _PhaseLog


def _log(name: str, phase: str, elapsed_ms: float) -> None:
    logging.getLogger(name).debug("x", extra={"phase": phase, "elapsed_ms": elapsed_ms})


def test_phase_rows_count_the_compiles_and_the_kernels_rendered() -> None:
    with _PhaseLog() as phases:
        _log("oidn_gpu.wgpu", "find a GPU adapter", 300.0)
        _log("oidn_gpu.wgpu", "open the device", 120.0)
        _log("oidn_gpu.kernels", "render", 5.0)
        _log("oidn_gpu.wgpu", "compile", 50.0)
        _log("oidn_gpu.wgpu", "compile", 40.0)
        logging.getLogger("oidn_gpu.wgpu").debug("no phase")
    rows = phases.rows()
    assert rows["probe_s"] == 0.3 and rows["device_s"] == 0.12
    assert rows["pipelines"] == 2 and rows["rendered"] == 1
    assert abs(rows["compile_sum_s"] - 0.09) < 1e-6  # from the records' float clock times


def test_no_kernel_rendered_is_a_row_of_zero_and_counts_print_as_integers() -> None:
    with _PhaseLog() as phases:
        _log("oidn_gpu.wgpu", "compile", 50.0)
    rows = phases.rows()
    assert rows["rendered"] == 0
    result = ColdResult((64, 64), (32, 32), runs={"ours": [{**rows, "first_denoise_s": 1.0}]})
    table = result.table()
    line = next(t for t in table.splitlines() if "kernels rendered" in t)
    assert line.split()[-1] == "0"
    assert "import wgpu" not in table  # a phase no run logged has no row
