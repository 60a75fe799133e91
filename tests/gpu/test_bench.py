"""The wgpu benchmark on lavapipe: network-only and end-to-end numbers, JSON, CLI flag."""

from __future__ import annotations

import json

import pytest

from oidn_gpu.backends.wgpu import bench
from oidn_gpu.cli.bench import main as bench_main

from .conftest import DATA

TINY = str(DATA / "tiny_base_ic9.tza")


def wgpu_main(argv: list[str]) -> int:
    return bench_main(["--backend", "wgpu", *argv])


@pytest.fixture(scope="module")
def result():
    return bench.run_bench(size=(24, 40), weights=TINY, precision="fp32", runs=2, warmup=1, top=3)


def test_network_and_end_to_end_numbers(result) -> None:
    assert (result.network_height, result.network_width) == (32, 48)
    assert len(result.wall_ms) == 2 and result.wall_median_ms > 0
    assert result.end_to_end and result.e2e_tiles == 1
    assert len(result.e2e_wall_ms) == 2 and len(result.host_wall_ms) == 2
    assert result.host_wall_median_ms > 0 and result.e2e_wall_median_ms > 0
    if result.gpu_median_ms is not None:  # timestamps: network, layers and e2e on the GPU
        assert len(result.network_gpu_ms) == 2 and len(result.e2e_gpu_ms) == 2
        assert result.e2e_gpu_median_ms > 0 and result.network_gpu_median_ms > 0
        assert len(result.layers) >= len(result.top_layers) == 3
    assert "rows_per_thread=" in result.gemm
    parts = [
        result.host_upload_median_ms,
        result.host_submit_median_ms,
        result.host_wait_median_ms,
        result.host_readback_median_ms,
    ]
    assert all(p is not None and p >= 0 for p in parts)
    assert sum(parts) <= result.host_wall_median_ms * 1.5  # parts of one call (medians)
    assert result.host_autoexposure_cpu_ms is not None  # an HDR model: autoexposure on the GPU
    table = result.table()
    assert "e2e wall" in table and "host wall" in table and "GPU wait" in table


def test_json_keeps_old_fields_and_adds_new(result) -> None:
    data = json.loads(result.to_json())
    for key in ("wall_median_ms", "gpu_median_ms", "gflops_per_s", "top_layers", "compile_s"):
        assert key in data
    for key in (
        "e2e_gpu_median_ms",
        "e2e_wall_median_ms",
        "host_wall_median_ms",
        "host_upload_median_ms",
        "host_readback_median_ms",
        "network_gpu_median_ms",
        "e2e_tiles",
        "gemm",
        "layers",
    ):
        assert key in data


def test_cli_network_only(tmp_path, capsys) -> None:
    out = tmp_path / "b.json"
    code = wgpu_main(
        [
            "--size",
            "32x16",
            "--weights",
            TINY,
            "--precision",
            "fp32",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--no-end-to-end",
            "--gemm",
            '{"cols_per_thread": 2}',
            "--json",
            str(out),
        ]
    )
    assert code == 0
    data = json.loads(out.read_text())
    assert data["end_to_end"] is False and data["e2e_wall_ms"] == []
    assert "cols_per_thread=2" in data["gemm"]
    assert "e2e wall" not in capsys.readouterr().out


def test_cli_times_the_denoiser_on_half_host_images(tmp_path, capsys) -> None:
    out = tmp_path / "h.json"
    args = ["--size", "40x24", "--weights", TINY, "--precision", "fp32", "--runs", "2"]
    code = wgpu_main([*args, "--warmup", "1", "--host-dtype", "float16", "--json", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    assert data["host_dtype"] == "float16" and data["upload_mode"] in ("mapped", "queue")
    assert data["copy_threads"] >= 1 and data["facade_tiles"] == 1
    assert len(data["facade_wall_ms"]) == 2 and data["facade_wall_median_ms"] > 0
    assert data["facade_output_wall_median_ms"] > 0
    parts = [data[f"facade_{p}_median_ms"] for p in ("upload", "submit", "wait", "readback")]
    assert all(p >= 0 for p in parts) and sum(parts) <= data["facade_wall_median_ms"] * 1.5
    text = capsys.readouterr().out
    assert "Denoiser.denoise on NumPy arrays" in text
    # what "rest" holds, said where it is: the GPU work itself on a CPU Vulkan driver
    cpu = data["adapter_type"].lower() == "cpu"
    assert ("on this CPU Vulkan driver the GPU work runs within submit and rest" in text) == cpu
    assert ("rest: checks, planning and the tile loop" in text) == (not cpu)


@pytest.mark.slow
def test_cli_cold_start_times_fresh_processes_to_the_first_image(tmp_path, capsys) -> None:
    """``--cold``: fresh processes with empty caches (every pipeline compiles), their first
    image and where its first denoise went; Intel OIDN beside it when pyoidn is there."""
    out = tmp_path / "cold.json"
    args = ["--cold", "--size", "32x48", "--second-size", "48x16", "--cold-runs", "1"]
    assert wgpu_main([*args, "--json", str(out)]) == 0
    document = json.loads(out.read_text())
    assert "sequences" not in document  # --cold-frames is 0 on wgpu unless asked for
    data = document["cold"]
    assert data["size"] == [48, 32] and data["second_size"] == [16, 48]  # (height, width)
    ours, warm = data["medians"]["ours"], data["medians"]["ours_warm"]
    for times in (ours, warm):
        assert times["first_image_s"] > times["first_denoise_s"] > 0
        assert times["first_denoise_s"] > times["device_s"] > 0
        assert times["pipelines"] >= 10  # the network's kernels, the passes, autoexposure
        assert 0 < times["compile_span_s"] < times["first_denoise_s"]
        assert "import_torch_s" not in times
    assert ours["pipelines"] == warm["pipelines"]
    table = capsys.readouterr().out
    assert "process start to first image" in table and "pipelines compiled" in table
    if data["runs"].get("intel_oidn"):  # pyoidn installed: its default device (here the CPU)
        assert data["medians"]["intel_oidn"]["first_image_s"] > 0
        assert "Intel OIDN" in table


def test_cli_tile_size_tiles_the_frame_and_times_one_tile(tmp_path, capsys) -> None:
    out = tmp_path / "t.json"
    args = ["--size", "256x256", "--weights", TINY, "--precision", "fp32", "--runs", "1"]
    code = wgpu_main([*args, "--warmup", "0", "--tile-size", "208", "--json", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    assert data["tile_size"] == 208
    assert (data["network_height"], data["network_width"]) == (208, 208)
    assert data["e2e_tiles"] > 1 and data["facade_tiles"] == data["e2e_tiles"]
    assert "one tile; denoised in tiles of at most 208 px" in capsys.readouterr().out


def test_a_frame_larger_than_the_device_binds_is_tiled() -> None:
    """A device that binds less than the whole frame's activations (lavapipe's 128 MiB
    against a 1080p frame; here a device opened with a 3 MiB limit against 320x320) gets
    the largest tile that fits instead of an error."""
    import wgpu

    adapter = wgpu.gpu.request_adapter_sync()
    limit = 3 << 20
    device = adapter.request_device_sync(required_limits={"max-storage-buffer-binding-size": limit})
    result = bench.run_bench(
        size=(320, 320), weights=TINY, precision="fp32", runs=1, warmup=0, top=1, device=device
    )
    assert result.tile_size is not None and result.tile_size < 320
    assert result.network_height == result.network_width == result.tile_size
    assert result.e2e_tiles > 1
