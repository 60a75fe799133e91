"""Bad usage gives ``error: ...`` and exit code 2; inspect, info, example, bench, --list-layers.

None of these tests denoises anything, so they are fast.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cli_support import write_exr, write_multilayer

import oidn_gpu
from oidn_gpu.cli import map_path
from oidn_gpu.image import io


@pytest.fixture
def image(tmp_path: Path) -> Path:
    return write_exr(tmp_path / "in.exr", np.ones((16, 16, 3), np.float32))


def _usage_error(result, fragment: str) -> None:
    assert result.rc == 2, result.err
    lines = result.err.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), result.err
    assert fragment in result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--quality", "ultra"], "unknown quality 'ultra'; expected 'fast', 'balanced' or 'high'"),
        (["--prefilter", "slow"], "unknown prefilter 'slow'"),
        (["--backend", "metal"], "unknown backend 'metal'"),
        (["--tile-size", "0"], "0 must be at least 1"),
        (["--tile-size", "big"], "invalid integer 'big'"),
        (["--input-scale", "nan"], "must be a finite number"),
        (["--input-scale", "-1"], "must be a finite number >= 0"),
        (["--max-memory-mb", "-5"], "must not be negative"),
        (["--hdr", "--srgb"], "not allowed with argument"),
        (["--overwrite", "--skip-existing"], "not allowed with argument"),
        (["--directional"], "--directional needs --lightmap"),
        (["--lightmap", "--albedo", "a.exr"], "--albedo cannot be used with --lightmap"),
        (["--lightmap", "--hdr"], "--hdr cannot be used with --lightmap"),
        (["--weights", "missing.tza"], "weights file 'missing.tza' does not exist"),
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ],
)
def test_bad_flag_values_are_usage_errors(
    cli, image: Path, tmp_path: Path, flags: list[str], fragment: str
) -> None:
    result = cli("denoise", image, "-o", tmp_path / "out.exr", *flags)
    _usage_error(result, fragment)
    assert not (tmp_path / "out.exr").exists()


def test_missing_output_is_a_usage_error(cli, image: Path) -> None:
    _usage_error(cli("denoise", image), "no output given; pass -o OUTPUT")


def test_missing_input_glob_and_empty_directory(cli, tmp_path: Path) -> None:
    _usage_error(cli("denoise", tmp_path / "nope.exr", "-o", tmp_path / "o.exr"), "does not exist")
    _usage_error(cli("denoise", str(tmp_path / "*.exr"), "-o", tmp_path / "o"), "no files match")
    empty = tmp_path / "empty"
    empty.mkdir()
    _usage_error(cli("denoise", empty, "-o", tmp_path / "o"), "holds no image files")


def test_existing_output_needs_overwrite_or_skip(cli, image: Path, tmp_path: Path) -> None:
    out = write_exr(tmp_path / "out.exr", np.zeros((16, 16, 3), np.float32))
    before = out.read_bytes()
    _usage_error(cli("denoise", image, "-o", out), "pass --overwrite or --skip-existing")
    assert out.read_bytes() == before
    skipped = cli("denoise", image, "-o", out, "--skip-existing")
    assert skipped.rc == 0 and "1 skipped" in skipped.err
    assert out.read_bytes() == before


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "case", ["same-file", "same-folder", "albedo", "hard-link", "symlink", "side-by-side"]
)
def test_overwrite_never_replaces_an_input(cli, tmp_path: Path, case: str) -> None:
    frames = tmp_path / "frames"
    frames.mkdir()
    color = write_exr(frames / "f1.exr", np.full((16, 16, 3), 0.5, np.float32))
    albedo = write_exr(tmp_path / "albedo.exr", np.full((16, 16, 3), 0.25, np.float32))
    args: list[object] = [color, "-o", tmp_path / "out.exr"]
    if case == "same-file":
        args = [color, "-o", color]
    elif case == "same-folder":
        write_exr(frames / "f2.exr", np.full((16, 16, 3), 0.5, np.float32))
        args = [frames, "-o", frames]
    elif case == "albedo":
        args = [color, "--albedo", albedo, "-o", albedo]
    elif case == "hard-link":
        (tmp_path / "link.exr").hardlink_to(color)
        args = [color, "-o", tmp_path / "link.exr"]
    elif case == "symlink":
        (tmp_path / "link.exr").symlink_to(color)
        args = [color, "-o", tmp_path / "link.exr"]
    elif case == "side-by-side":
        args = [color, "-o", tmp_path / "out.exr", "--side-by-side", color]
    before = _snapshot(tmp_path)
    result = cli("denoise", *args, "--overwrite")
    _usage_error(result, "inputs are never replaced, even with --overwrite")
    source = albedo if case == "albedo" else color
    if case in ("hard-link", "symlink"):
        assert f"is the same file as the input '{source}'" in result.err
    else:
        assert "is also an input" in result.err and f"'{source}'" in result.err
    assert _snapshot(tmp_path) == before


def test_output_folder_problems_are_found_before_the_first_frame(cli, tmp_path: Path) -> None:
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in (1, 2):
        write_exr(frames / f"f{i}.exr", np.full((16, 16, 3), 0.5, np.float32))
    (tmp_path / "plain").write_bytes(b"a file")
    result = cli("denoise", frames, "-o", tmp_path / "plain" / "out")
    _usage_error(result, f"'{tmp_path / 'plain'}' is a file, not a folder")
    assert "exists" not in result.err and "denoised" not in result.err
    if Path("/proc/self").is_dir():  # /proc refuses new files for every user, root included
        result = cli("denoise", frames, "-o", "/proc/{stem}.exr")
        _usage_error(result, "folder '/proc' is not writable")
        assert "denoised" not in result.err


def test_a_missing_output_folder_is_an_error_unless_mkdir(cli, tmp_path: Path) -> None:
    color = write_exr(tmp_path / "f1.exr", np.full((16, 16, 3), 0.5, np.float32))
    missing = tmp_path / "no" / "such"
    for output in (missing / "x.exr", f"{missing}/"):
        result = cli("denoise", color, "-o", output, "--quality", "fast")
        _usage_error(result, f"folder '{missing}' does not exist; create it or pass --mkdir")
        assert not (tmp_path / "no").exists()


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{stem}_dn.{ext}", "shot.0042_dn.exr"),
        ("dn.####.exr", "dn.0042.exr"),
        ("dn.##.exr", "dn.42.exr"),
        ("dn.%06d.exr", "dn.000042.exr"),
        ("dn.%d.exr", "dn.42.exr"),
        ("dn.$F4.exr", "dn.0042.exr"),
        ("dn.$F.{ext}", "dn.42.exr"),
        ("{frame}/####.exr", "0042/0042.exr"),
    ],
)
def test_output_templates_take_frame_patterns(template: str, expected: str) -> None:
    src = Path("in") / "shot.0042.exr"
    for many in (False, True):
        assert map_path(f"out/{template}", src, many=many) == Path("out") / expected


def test_a_frame_pattern_needs_a_numbered_input(cli, tmp_path: Path) -> None:
    color = write_exr(tmp_path / "still.exr", np.full((16, 16, 3), 0.5, np.float32))
    result = cli("denoise", color, "-o", tmp_path / "dn.####.exr")
    _usage_error(result, f"'{tmp_path / 'dn.####.exr'}' needs a frame number, but ")
    assert "'render.0001.exr'" in result.err


def test_corrupt_weights_are_one_error_before_the_first_frame(cli, tmp_path: Path) -> None:
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in (1, 2, 3):
        write_exr(frames / f"f{i}.exr", np.full((16, 16, 3), 0.5, np.float32))
    bad = tmp_path / "bad.tza"
    bad.write_bytes(b"not a tza file at all")
    result = cli("denoise", frames, "-o", tmp_path / "out", "--weights", bad)
    _usage_error(result, f"weights file '{bad}' cannot be used: ")
    assert result.err.count("error:") == 1
    assert not (tmp_path / "out").exists()


def test_unwritable_extension_and_missing_aux(cli, image: Path, tmp_path: Path) -> None:
    _usage_error(cli("denoise", image, "-o", tmp_path / "out.xyz"), "cannot write '.xyz' files")
    _usage_error(
        cli("denoise", image, "-o", tmp_path / "o.exr", "--albedo", tmp_path / "alb.exr"),
        "auxiliary file",
    )


def test_one_aux_file_for_many_inputs_needs_a_template(cli, image: Path, tmp_path: Path) -> None:
    second = write_exr(tmp_path / "in2.exr", np.ones((16, 16, 3), np.float32))
    _usage_error(
        cli("denoise", image, second, "-o", tmp_path / "out", "--albedo", image),
        "give a directory or a template",
    )
    _usage_error(cli("denoise", image, "-o", tmp_path / "{nope}.exr"), "bad template")


def test_two_inputs_mapping_to_one_output_are_refused(cli, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = write_exr(tmp_path / "a" / "f.exr", np.ones((8, 8, 3), np.float32))
    two = write_exr(tmp_path / "b" / "f.exr", np.ones((8, 8, 3), np.float32))
    _usage_error(cli("denoise", one, two, "-o", tmp_path / "out"), "would both write")


def test_no_command_prints_help_and_exits_2(cli) -> None:
    result = cli()
    assert result.rc == 2 and "usage:" in result.err


def test_help_and_version_exit_0(cli) -> None:
    assert cli("--version").rc == 0
    result = cli("denoise", "--help")
    assert result.rc == 0 and "--prefilter" in result.out


def test_list_layers_shows_layers_and_the_default_picks(cli, tmp_path: Path) -> None:
    ones = np.ones((4, 4, 3), np.float32)
    path = write_multilayer(tmp_path / "m.exr", {"": ones, "albedo": ones, "nn": ones})
    result = cli("denoise", "--list-layers", path)
    assert result.rc == 0, result.err
    assert "(root): R, G, B" in result.out and "nn: X, Y, Z" in result.out
    assert "-> albedo: 'albedo'" in result.out and "-> normal: 'nn'" in result.out
    assert "used only with an albedo" not in result.out
    vray = write_multilayer(tmp_path / "v.exr", {"": ones, "VRayNormals": ones})
    result = cli("denoise", "--list-layers", vray)
    assert "-> albedo: none found" in result.out and "-> normal: 'VRayNormals'" in result.out
    assert "(a normal is used only with an albedo: the color would be denoised alone)" in result.out


def test_inspect_official_weights(cli, package_weights_dir: Path) -> None:
    result = cli("inspect", package_weights_dir / "rt_hdr_alb_nrm.tza")
    assert result.rc == 0, result.err
    out = result.out
    assert "sha-256:         e586ef2ff48d7fbb" in out
    assert "official:        yes, rt_hdr_alb_nrm.tza" in out
    assert "topology:        base U-Net" in out
    assert "9 channels: HDR color (3) + albedo (3) + normal (3)" in out
    assert "receptive field: 174 px" in out
    assert "flops per pixel:" in out
    assert "enc_conv0.weight" in out and "32x9x3x3" in out


def test_inspect_corrupt_and_missing_files(cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.tza"
    bad.write_bytes(b"not a tza file at all")
    result = cli("inspect", bad)
    assert result.rc == 1 and result.err.startswith("error: invalid or corrupted weights blob")
    _usage_error(cli("inspect", tmp_path / "none.tza"), "does not exist")


def test_info_lists_version_modules_and_backends(cli) -> None:
    result = cli("info", "--no-probe")
    assert result.rc == 0, result.err
    assert "oidn-gpu 0." in result.out
    assert "reference    available" in result.out
    assert "OpenImageIO" in result.out


def test_example_path_exists_and_is_a_multilayer_exr(cli, tmp_path: Path) -> None:
    result = cli("example")
    assert result.rc == 0
    path = Path(result.out.strip())
    assert path.is_file() and path.stat().st_size < 1_000_000
    copied = cli("example", "--copy", tmp_path)
    assert Path(copied.out.strip()).read_bytes() == path.read_bytes()
    layers = cli("denoise", "--list-layers", path)
    assert "-> albedo: 'albedo'" in layers.out and "-> normal: 'nn'" in layers.out


def test_bench_reports_a_clear_error_when_unavailable(cli, monkeypatch) -> None:
    import sys

    import oidn_gpu.backends.wgpu as package

    monkeypatch.setitem(sys.modules, "oidn_gpu.backends.wgpu.bench", None)  # import fails
    monkeypatch.delattr(package, "bench", raising=False)
    result = cli("bench")
    assert result.rc == 1
    assert result.err.startswith("error: the wgpu benchmark needs the wgpu backend")


def test_bench_rejects_an_unknown_backend(cli) -> None:
    result = cli("bench", "--backend", "metal")
    assert result.rc == 2
    assert result.err.startswith("error: unknown bench backend 'metal'")


def test_bench_runs_the_reference_backend(cli, tmp_path) -> None:
    out = tmp_path / "bench.json"
    result = cli(
        "bench",
        "--backend",
        "reference",
        "--size",
        "64x48",
        "--runs",
        "2",
        "--weights",
        "rt_hdr_alb_nrm_small",
        "--json",
        str(out),
    )
    assert result.rc == 0, result.err
    assert "network" in result.out and "denoise" in result.out
    import json

    data = json.loads(out.read_text())
    assert len(data["network_ms"]) == 2 and data["network_median_ms"] > 0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--precision", "fp8"], "unknown precision 'fp8'"),
        (["--kernel", "tensor"], "unknown kernel 'tensor'"),
        (["--gemm", "{rows"], "--gemm is not valid JSON"),
        (["--gemm", "[1]"], "--gemm must be a JSON object"),
        (["--gemm", '{"rows": 3}'], "unknown GEMM option"),
        (["--gemm", '{"rows_per_thread": 3}'], "rows_per_thread=3"),
        (["--backend", "reference", "--precision", "fp16"], "cannot be used with the reference"),
        (["--backend", "reference", "--kernel", "direct"], "cannot be used with the reference"),
        (["--backend", "reference", "--threads", "0"], "--threads must be an integer >= 1"),
        (["--threads", "two"], "--threads must be an integer >= 1, got 'two'"),
        # OIDN_GPU_BACKEND=reference (set for every CLI test) makes --backend auto pick it.
        (["--gemm", '{"rows_per_thread": 4}'], "reference backend (chosen by --backend auto"),
    ],
)
def test_bad_gpu_option_values_are_usage_errors(cli, tmp_path, flags, message) -> None:
    source = tmp_path / "in.exr"
    write_exr(source, np.zeros((16, 16, 3), np.float32))
    result = cli("denoise", str(source), "-o", str(tmp_path / "out.exr"), *flags)
    assert result.rc == 2
    assert result.err.startswith("error: ")
    assert message in result.err


def test_threads_reach_the_reference_backend_and_keep_the_image(cli, tmp_path) -> None:
    """--threads N is OIDN's numThreads: each count gives the same bits."""
    source = tmp_path / "in.exr"
    write_exr(source, np.random.default_rng(3).random((48, 40, 3)).astype(np.float32))
    outputs = []
    for threads in ("1", "3"):
        out = tmp_path / f"out{threads}.exr"
        result = cli("denoise", source, "-o", out, "--backend", "reference", "--threads", threads)
        assert result.rc == 0, result.err
        outputs.append(io.read_image(out).pixels)
    np.testing.assert_array_equal(outputs[0], outputs[1])
    with oidn_gpu.Denoiser(backend="reference", threads=3) as den:
        den.denoise(np.ones((16, 16, 3), np.float32))
        assert "(3 threads" in den.info().device


@pytest.mark.gpu
def test_wgpu_options_reach_the_backend(cli, tmp_path) -> None:
    """--backend wgpu --precision fp32 --kernel direct --gemm ... runs and equals the
    reference backend within the fp32 contract."""
    rng = np.random.default_rng(3)
    source = tmp_path / "in.exr"
    write_exr(source, rng.random((24, 40, 3), dtype=np.float32))
    gpu_out, ref_out = tmp_path / "gpu.exr", tmp_path / "ref.exr"
    result = cli(
        "denoise",
        str(source),
        "-o",
        str(gpu_out),
        "--backend",
        "wgpu",
        "--precision",
        "fp32",
        "--kernel",
        "direct",
        "--gemm",
        '{"rows_per_thread": 4}',
        "--quality",
        "fast",
        "-q",
    )
    assert result.rc == 0, result.err
    assert (
        cli(
            "denoise",
            str(source),
            "-o",
            str(ref_out),
            "--backend",
            "reference",
            "--quality",
            "fast",
            "-q",
        ).rc
        == 0
    )
    got = io.read_image(gpu_out).pixels
    want = io.read_image(ref_out).pixels
    assert np.linalg.norm(got - want) / np.linalg.norm(want) <= 1e-5
