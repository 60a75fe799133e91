"""What a new user meets first: one clear error per problem, before any frame.

An unavailable backend is one usage error (exit 2) naming why and the backends that run;
a misspelt flag names the closest one; NaN and infinite input pixels are counted in the log
and in ``--json``. Backend availability is probed once per process, so the unavailable
backends run in a subprocess whose environment hides them: no Vulkan driver manifest
(``VK_DRIVER_FILES``) for wgpu, no CUDA device and no Triton interpreter for cuda.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_support import pythonpath_env, write_exr

from oidn_gpu.backends import probe
from oidn_gpu.cli import bench as bench_cli
from oidn_gpu.cli import build_parser
from oidn_gpu.image import io

HIDDEN = {
    "cuda": {"CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": None},
    "wgpu": {"VK_DRIVER_FILES": "/nonexistent/oidn-gpu-test.json", "VK_ICD_FILENAMES": None},
}
REASONS = {
    "cuda": r"(no NVIDIA driver found|torch sees no CUDA GPU)",
    "wgpu": r"no Vulkan driver is installed \(no ICD manifest\); no CPU Vulkan driver either "
    r"\(Mesa's lavapipe: 'apt-get install mesa-vulkan-drivers'\)",
}


def _env(backend: str) -> dict[str, str]:
    env = pythonpath_env()
    for name, value in HIDDEN[backend].items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def _frames(folder: Path, count: int) -> list[Path]:
    folder.mkdir()
    rng = np.random.default_rng(5)
    return [
        write_exr(folder / f"f{i}.exr", rng.random((16, 16, 3), dtype=np.float32))
        for i in range(count)
    ]


@pytest.mark.skipif(sys.platform != "linux", reason="Vulkan driver manifests: Linux")
@pytest.mark.parametrize("backend", ["cuda", "wgpu"])
def test_an_unavailable_backend_is_one_usage_error_before_any_frame(
    tmp_path: Path, backend: str
) -> None:
    frames = _frames(tmp_path / "in", 3)
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "oidn_gpu",
            "denoise",
            *map(str, frames),
            "-o",
            str(out),
            "--mkdir",
            "--backend",
            backend,
            "--json",
        ],
        env=_env(backend),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr  # once, not per frame
    assert re.fullmatch(
        rf"error: the {backend} backend cannot run on this machine: {REASONS[backend]}; "
        r"the backends that run here: .*'reference'.* \('oidn-gpu info' lists what each "
        r"sees\); pass --backend NAME with one of those",
        lines[0],
    ), lines[0]
    assert json.loads(done.stdout) == {
        "schema": "oidn-gpu.denoise",
        "schema_version": 1,
        "error": lines[0][len("error: ") :],
        "exit_code": 2,
    }
    assert not out.exists()  # not even the folder --mkdir would make


def test_run_sequence_checks_the_backend_before_any_frame(tmp_path: Path) -> None:
    frames = _frames(tmp_path / "in", 2)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from oidn_gpu import DenoiserConfig, sequence\n"
        "from oidn_gpu.errors import UnsupportedDeviceError\n"
        "jobs = [sequence.FrameJob(Path(p), Path(p).with_suffix('.out.exr')) "
        "for p in sys.argv[1:]]\n"
        "try:\n"
        "    sequence.run_sequence(jobs, DenoiserConfig(backend='cuda'))\n"
        "except UnsupportedDeviceError as err:\n"
        "    print(err)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, frames)],
        env=_env("cuda"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("the cuda backend cannot run on this machine: "), done.stdout
    assert done.stderr == ""  # no frame was tried
    assert not list((tmp_path / "in").glob("*.out.exr"))


def test_wgpu_on_a_cpu_vulkan_driver_says_so_once(cli, tmp_path: Path) -> None:
    """Without a GPU, wgpu runs on lavapipe (CI): a note says it is slow, before any frame;
    on a GPU there is none. The run itself stops at a refused output, so no frame runs."""
    availability = probe("wgpu")
    frames = _frames(tmp_path / "in", 1)
    (tmp_path / "in" / "taken.exr").write_bytes(b"")
    result = cli("denoise", frames[0], "-o", tmp_path / "in" / "taken.exr", "--backend", "wgpu")
    if not availability.available:
        assert result.rc == 2 and "the wgpu backend cannot run" in result.err
        return
    assert result.rc == 2 and "exists; pass --overwrite" in result.err
    note = (
        "note: the wgpu backend finds no GPU here and runs on a CPU Vulkan driver (such as "
        "lavapipe): expect seconds per small frame; --backend reference is faster on a CPU"
    )
    if availability.auto:
        assert note not in result.err
    else:
        assert result.err.splitlines()[0] == note


@pytest.mark.parametrize(
    ("flag", "closest", "prog"),
    [
        ("--qualty", "--quality", "oidn-gpu denoise"),
        ("--precison", "--precision", "oidn-gpu denoise"),
        ("--skip-exsting", "--skip-existing", "oidn-gpu denoise"),
    ],
)
def test_a_misspelt_flag_names_the_closest(
    cli, tmp_path: Path, flag: str, closest: str, prog: str
) -> None:
    frames = _frames(tmp_path / "in", 1)
    result = cli("denoise", frames[0], "-o", tmp_path / "o.exr", flag, "x")
    assert result.rc == 2
    assert result.err == (
        f"error: unrecognized arguments: {flag} x (did you mean {closest}?) (see '{prog} --help')\n"
    )


def test_a_misspelt_flag_of_a_subcommand_is_matched_there(cli) -> None:
    result = cli("weights", "fetch", "--forse")
    assert result.rc == 2
    assert result.err == (
        "error: unrecognized arguments: --forse (did you mean --force?) "
        "(see 'oidn-gpu weights fetch --help')\n"
    )
    result = cli("denoise", "x.exr", "--wxyzzy")
    assert result.err == (
        "error: unrecognized arguments: --wxyzzy (see 'oidn-gpu denoise --help')\n"
    )


def test_nan_and_infinite_pixels_are_counted_in_the_log_and_json(cli, tmp_path: Path) -> None:
    frames = _frames(tmp_path / "in", 2)
    half = np.random.default_rng(1).random((16, 16, 3), dtype=np.float32)
    half[:8] = np.nan  # half the beauty NaN
    half[12, 3, 1] = np.inf
    write_exr(frames[1], half)
    result = cli("denoise", *frames, "-o", tmp_path / "out", "--mkdir", "--no-aux", "--json")
    assert result.rc == 0, result.err
    message = (
        "128 NaN and 1 infinite pixels of 256 in the color: denoised as Intel OIDN does "
        "(NaN as 0, infinities clamped to the input range); fix them in the render"
    )
    warned = [line for line in result.err.splitlines() if line.startswith("warning:")]
    assert warned[0] == f"warning: {frames[1]}: {message}"
    # the infinite input pixel also makes denoised pixels infinite (as in OIDN): said too
    assert all("non-finite (NaN or infinite) denoised pixels" in w for w in warned[1:])
    report = json.loads(result.out)
    assert [r["warnings"][:1] for r in report["results"]] == [[], [message]]
    assert report["results"][0]["warnings"] == []


def test_an_all_nan_beauty_is_warned_about(cli, tmp_path: Path) -> None:
    frames = _frames(tmp_path / "in", 1)
    write_exr(frames[0], np.full((16, 16, 3), np.nan, np.float32))
    result = cli("denoise", frames[0], "-o", tmp_path / "o.exr", "--no-aux")
    assert result.rc == 0, result.err
    assert f"warning: {frames[0]}: 256 NaN pixels of 256 in the color: " in result.err


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _parsers(sub)
    return found


def test_every_flag_and_argument_has_help() -> None:
    missing = [
        f"{parser.prog} {'/'.join(action.option_strings) or action.metavar or action.dest}"
        for parser in _parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert missing == []


def test_the_weights_fetch_and_bench_help_say_what_they_do(cli, capsys) -> None:
    weights = cli("weights", "--help").out
    assert "the package bundles them too" in " ".join(weights.split())
    top = " ".join(cli("--help").out.split())
    assert "[--backend reference|wgpu|cuda|oidn]" in top
    with pytest.raises(SystemExit):  # the benchmark's own parser prints its help
        bench_cli.main(["--help"])
    bench = " ".join(capsys.readouterr().out.split())
    assert "'oidn-gpu bench --backend reference --help'" in bench
    assert "'oidn-gpu bench --backend cuda --help'" in bench


@pytest.mark.parametrize("pattern", ["r.####.exr", "r.%04d.exr", "r.$F4.exr", "r.%d.exr"])
def test_frame_patterns_name_inputs_too(cli, tmp_path: Path, pattern: str) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    rng = np.random.default_rng(2)
    for name in ("r.0001.exr", "r.0002.exr", "r.0010.exr", "r.x.exr", "s.0003.exr"):
        write_exr(folder / name, rng.random((16, 16, 3), dtype=np.float32))
    result = cli(
        "denoise",
        folder / pattern,
        "-o",
        tmp_path / "out" / "dn.####.exr",
        "--mkdir",
        "--no-aux",
        "--quality",
        "fast",
    )
    assert result.rc == 0, result.err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "dn.0001.exr",
        "dn.0002.exr",
        "dn.0010.exr",
    ]
    missing = cli("denoise", folder / "q.####.exr", "-o", tmp_path / "out2", "--mkdir")
    assert missing.rc == 2
    assert missing.err == (f"error: no files match the frame pattern '{folder / 'q.####.exr'}'\n")


@pytest.mark.parametrize("flag", ["-o", "--side-by-side"])
def test_one_output_file_for_several_inputs_is_refused(cli, tmp_path: Path, flag: str) -> None:
    frames = _frames(tmp_path / "in", 2)
    target = tmp_path / "new" / ("x.png" if flag == "--side-by-side" else "x.exr")
    args = ["-o", tmp_path / "out"] if flag == "--side-by-side" else []
    result = cli("denoise", *frames, *args, flag, target, "--mkdir")
    assert result.rc == 2
    assert result.err == (
        f"error: {flag} '{target}' names one file but 2 inputs are given; give a folder "
        f"('{target.with_suffix('')}/') or a template such as "
        f"'{target.parent / ('{stem}' + target.suffix)}'\n"
    )
    assert not (tmp_path / "new").exists()


def test_a_renderman_root_alpha_goes_into_a_png(cli, tmp_path: Path) -> None:
    """RenderMan writes the beauty as Ci.r/g/b beside a root 'a': a PNG output keeps it."""
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    rng = np.random.default_rng(4)
    data = rng.random((16, 16, 5), dtype=np.float32)
    data[:, :, 3] = np.linspace(0, 1, 16, dtype=np.float32)[None, :]
    src = tmp_path / "rman.exr"
    spec = oiio.ImageSpec(16, 16, 5, "half")
    spec.channelnames = ("Ci.r", "Ci.g", "Ci.b", "a", "mse.r")
    out = oiio.ImageOutput.create(str(src))
    assert out.open(str(src), spec) and out.write_image(data) and out.close()
    png = tmp_path / "o.png"
    result = cli("denoise", src, "-o", png, "--no-aux", "--srgb", "--quality", "fast")
    assert result.rc == 0, result.err
    assert "color 'Ci' +alpha" in result.err
    written = io.read_image(png)
    assert written.pixels.shape == (16, 16, 4)
    expected = np.round(data[:, :, 3].astype(np.float16).astype(np.float32) * 255) / 255
    np.testing.assert_allclose(written.pixels[:, :, 3], expected, atol=1e-6)


def test_list_layers_shows_pixel_types_windows_and_tiles(cli, tmp_path: Path) -> None:
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    src = tmp_path / "w.exr"
    spec = oiio.ImageSpec(40, 30, 5, "half")
    spec.channelnames = ("R", "G", "B", "A", "Z")
    spec.channelformats = tuple(oiio.TypeDesc(t) for t in ("half",) * 4 + ("float",))
    spec.x, spec.y, spec.full_width, spec.full_height = 5, 7, 100, 80
    spec.tile_width = spec.tile_height = 16
    spec.attribute("compression", "piz")
    out = oiio.ImageOutput.create(str(src))
    assert out.open(str(src), spec) and out.write_image(np.ones((30, 40, 5), np.float32))
    assert out.close()
    result = cli("denoise", "--list-layers", src)
    assert result.rc == 0, result.err
    assert result.out.splitlines()[:3] == [
        f"{src}: 100x80 (openexr), half and float channels",
        "  part 0: data window 40x30 at (5, 7), display window 100x80; 16x16 tiles, "
        "piz compression",
        "  (root): R, G, B, A (half), Z (float)",
    ]
