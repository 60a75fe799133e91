"""Every ``--json`` output of the tool parses and names its schema and version
(docs/json.md): ``info``, ``inspect``, ``program info``, ``denoise --list-layers``,
``denoise`` and ``bench``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import write_exr

from oidn_gpu.cli.json_output import SCHEMAS
from oidn_gpu.model.weights import bundled_weights_dir

DATA = Path(__file__).resolve().parents[1] / "data"


def _parsed(text: str, schema: str) -> dict:
    doc = json.loads(text)
    assert doc["schema"] == schema
    assert doc["schema_version"] == SCHEMAS[schema]
    assert list(doc)[:2] == ["schema", "schema_version"]
    return doc


def test_info_json_on_stdout_and_in_a_file(cli, tmp_path):
    result = cli("info", "--no-probe", "--json")
    assert result.rc == 0, result.err
    doc = _parsed(result.out, "oidn-gpu.info")
    assert {b["name"] for b in doc["backends"]} >= {"reference", "wgpu"}
    assert doc["modules"]["numpy"]
    path = tmp_path / "info.json"
    assert cli("info", "--no-probe", "--json", path).rc == 0
    assert _parsed(path.read_text(), "oidn-gpu.info")["version"] == doc["version"]


def test_inspect_json_describes_the_official_weights(cli):
    result = cli("inspect", bundled_weights_dir() / "rt_ldr_small.tza", "--json")
    assert result.rc == 0, result.err
    doc = _parsed(result.out, "oidn-gpu.inspect")
    assert doc["official"] == "rt_ldr_small.tza"
    assert doc["network"]["input_channels"] == 3
    assert doc["tensors"][0] == {
        "name": "enc_conv0.weight",
        "shape": [32, 3, 3, 3],
        "dtype": "float16",
    }


def test_inspect_json_of_weights_it_does_not_recognise(cli):
    result = cli("inspect", DATA / "tiny_base_ic3.tza", "--json")
    assert result.rc == 0, result.err
    doc = _parsed(result.out, "oidn-gpu.inspect")
    assert doc["official"] is None
    assert doc["tensor_values"] == sum(
        int(__import__("math").prod(t["shape"])) for t in doc["tensors"]
    )


def test_program_info_json(cli):
    result = cli("program", "info", DATA / "program_tiny_v2.oidnp", "--json")
    assert result.rc == 0, result.err
    doc = _parsed(result.out, "oidn-gpu.program-info")
    assert doc["byte_size"] == (DATA / "program_tiny_v2.oidnp").stat().st_size
    assert doc["kind"] in ("denoise", "network")
    assert doc["output_width"] > 0 and doc["dispatch_count"] > 0


def test_list_layers_json_names_what_a_denoise_would_use(cli, tmp_path, scene):
    crop = scene(16)
    color = write_exr(tmp_path / "c.exr", crop["color_4spp"])
    broken = tmp_path / "broken.exr"
    broken.write_bytes(b"not an image")
    result = cli("denoise", "--list-layers", "--json", color, broken)
    assert result.rc == 1, result.err  # the broken file
    doc = _parsed(result.out, "oidn-gpu.layers")
    first, unreadable = doc["files"]
    assert first["denoise_uses"]["color"] == {
        "layer": "(root)",
        "file": None,
        "named_by_flag": False,
    }
    assert first["parts"][0]["data_window"] == [0, 0, 16, 16]
    assert "broken.exr" in unreadable["error"]


def test_denoise_json_summary_names_its_schema(cli, tmp_path, scene):
    crop = scene(16)
    color = write_exr(tmp_path / "c.exr", crop["color_4spp"])
    result = cli("denoise", color, "-o", tmp_path / "out.exr", "--json", "--quality", "fast")
    assert result.rc == 0, result.err
    doc = _parsed(result.out, "oidn-gpu.denoise")
    assert doc["denoised"] == 1


BENCH = (
    "bench",
    "--backend",
    "reference",
    "--size",
    "32x16",
    "--runs",
    "1",
    "--warmup",
    "0",
    "--weights",
    "rt_hdr_alb_nrm_small",
)


def test_bench_json_in_a_file_keeps_its_fields_beside_the_schema(cli, tmp_path):
    path = tmp_path / "bench.json"
    result = cli(*BENCH, "--json", path)
    assert result.rc == 0, result.err
    doc = _parsed(path.read_text(), "oidn-gpu.bench")
    assert doc["backend"] == "reference" and doc["kind"] == "denoise"
    assert len(doc["denoise_ms"]) == 1


def test_bench_json_on_stdout_alone_with_the_table_on_stderr(cli):
    result = cli(*BENCH, "--json", "-")
    assert result.rc == 0, result.err
    doc = _parsed(result.out, "oidn-gpu.bench")
    assert doc["backend"] == "reference"
    assert "ms" in result.err  # the table


@pytest.mark.parametrize("schema", sorted(SCHEMAS))
def test_every_schema_is_documented(schema):
    text = (Path(__file__).resolve().parents[2] / "docs" / "json.md").read_text()
    assert f"`{schema}`" in text and f"version {SCHEMAS[schema]}" in text
