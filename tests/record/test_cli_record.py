"""The ``record``, ``replay`` and ``program info`` subcommands (GPU: lavapipe)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from oidn_gpu.cli import record as cli
from oidn_gpu.record import read_program

from .conftest import DATA

pytestmark = pytest.mark.gpu


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="oidn-gpu")
    sub = parser.add_subparsers(dest="command")
    cli.add_record_parsers(sub)
    args = parser.parse_args(argv)
    return cli.COMMANDS[args.command](args)


def test_record_info_replay_round_trip(tmp_path, rng, capsys, gpu):
    from oidn_gpu.image import io
    from oidn_gpu.image.autoexposure import autoexposure
    from oidn_gpu.record.replay import Replayer

    program = tmp_path / "p.oidnp"
    weights = str(DATA / "tiny_base_ic3.tza")
    assert (
        run(
            [
                "record",
                "--weights",
                weights,
                "--size",
                "24x20",
                "--hdr",
                "--precision",
                "fp32",
                "-o",
                str(program),
            ]
        )
        == 0
    )
    data = program.read_bytes()
    assert read_program(data).output_width == 24

    assert run(["program", "info", str(program)]) == 0
    info = capsys.readouterr().out
    assert "denoise program, output 24x20" in info and "precision:   fp32" in info
    assert "recorded input scale 1 (replay: autoexposure per frame)" in info

    rgb = rng.random((20, 24, 3), np.float32) * np.float32(30)
    color = np.dstack([rgb, np.full((20, 24, 1), 0.5, np.float32)]).astype(np.float32)
    io.write_image_atomic(tmp_path / "in.exr", color, pixel_format="float")
    replay = ["replay", str(program), "--color", str(tmp_path / "in.exr"), "-o"]
    # an HDR program: autoexposure of the color on the host, as OIDN, unless --input-scale
    assert run([*replay, str(tmp_path / "auto.exr")]) == 0
    assert run([*replay, str(tmp_path / "scaled.exr"), "--input-scale", "0.5"]) == 0
    auto = io.read_image(tmp_path / "auto.exr").pixels
    scaled = io.read_image(tmp_path / "scaled.exr").pixels
    with Replayer(data, gpu) as replayer:
        expect_auto = replayer.run([color], input_scale=autoexposure(rgb))
        expect_scaled = replayer.run([color], input_scale=0.5)
        baked = replayer.run([color])
    assert autoexposure(rgb) != 1.0 and not np.allclose(expect_auto, baked, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(auto, expect_auto, rtol=1e-3, atol=1e-3)  # EXR may store half
    np.testing.assert_allclose(scaled, expect_scaled, rtol=1e-3, atol=1e-3)
    assert auto.shape == (20, 24, 4)


def test_replay_rejects_an_image_of_another_size(tmp_path, rng, gpu):
    from oidn_gpu.errors import InvalidArgumentError
    from oidn_gpu.image import io

    program = tmp_path / "p.oidnp"
    run(
        [
            "record",
            "--weights",
            str(DATA / "tiny_base_ic3.tza"),
            "--size",
            "16x16",
            "--baseline",
            "-o",
            str(program),
        ]
    )
    io.write_image_atomic(tmp_path / "in.exr", rng.random((8, 8, 3), np.float32))
    with pytest.raises(InvalidArgumentError, match="recorded for 16x16"):
        run(
            [
                "replay",
                str(program),
                "--color",
                str(tmp_path / "in.exr"),
                "-o",
                str(tmp_path / "o.exr"),
            ]
        )


def test_tool_has_the_record_subcommands(tmp_path):
    from oidn_gpu import cli as tool

    assert {"record", "replay", "program"} <= set(tool.COMMANDS)
    program = tmp_path / "p.oidnp"
    assert (
        tool.main(
            [
                "record",
                "--weights",
                str(DATA / "tiny_base_ic3.tza"),
                "--size",
                "16x16",
                "--baseline",
                "-o",
                str(program),
            ]
        )
        == 0
    )
    assert tool.main(["program", "info", str(program)]) == 0
    assert tool.main(["program", "info", str(DATA / "tiny_base_ic3.tza")]) == 1  # not a program


def test_ldr_replay_keeps_the_recorded_scale_and_network_programs_take_none(tmp_path, rng, gpu):
    from oidn_gpu.errors import InvalidArgumentError
    from oidn_gpu.image import io
    from oidn_gpu.record.replay import Replayer

    weights = str(DATA / "tiny_base_ic3.tza")
    ldr, net = tmp_path / "ldr.oidnp", tmp_path / "net.oidnp"
    common = ["--weights", weights, "--size", "16x16", "--precision", "fp32", "--baseline"]
    assert run(["record", *common, "--input-scale", "0.5", "-o", str(ldr)]) == 0
    assert run(["record", *common, "--network", "-o", str(net)]) == 0
    color = rng.random((16, 16, 3), np.float32)
    io.write_image_atomic(tmp_path / "in.exr", color, pixel_format="float")
    assert (
        run(
            [
                "replay",
                str(ldr),
                "--color",
                str(tmp_path / "in.exr"),
                "-o",
                str(tmp_path / "out.exr"),
            ]
        )
        == 0
    )
    with Replayer(ldr.read_bytes(), gpu) as replayer:
        assert replayer.recorded_input_scale == 0.5
        expected = replayer.run([np.dstack([color, np.ones((16, 16, 1), np.float32)])])
    written = io.read_image(tmp_path / "out.exr").pixels
    np.testing.assert_allclose(written, expected[:, :, :3], rtol=1e-3, atol=1e-3)
    with pytest.raises(InvalidArgumentError, match="--input-scale needs a denoise program"):
        run(
            [
                "replay",
                str(net),
                "--color",
                str(tmp_path / "in.exr"),
                "--input-scale",
                "2",
                "-o",
                str(tmp_path / "net.exr"),
            ]
        )


def test_record_and_replay_outputs_follow_the_denoise_rules(tmp_path, capsys):
    from oidn_gpu import cli as tool

    weights = tmp_path / "w.tza"
    weights.write_bytes((DATA / "tiny_base_ic3.tza").read_bytes())
    program = tmp_path / "p.oidnp"
    program.write_bytes(b"an older program")
    record = ["record", "--weights", str(weights), "--size", "16x16", "--baseline", "-o"]
    capsys.readouterr()
    assert tool.main([*record, str(program)]) == 2  # exists: needs --overwrite
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert program.read_bytes() == b"an older program"
    assert tool.main([*record, str(weights), "--overwrite"]) == 2  # the input itself
    assert "inputs are never replaced" in capsys.readouterr().err
    assert weights.read_bytes() == (DATA / "tiny_base_ic3.tza").read_bytes()
    assert tool.main([*record, str(program), "--overwrite"]) == 0
    assert read_program(program.read_bytes()).output_width == 16

    color = tmp_path / "in.exr"
    color.write_bytes(b"not read: the output check comes first")
    replay = ["replay", str(program), "--color", str(color), "-o"]
    assert tool.main([*replay, str(color), "--overwrite"]) == 2
    assert "inputs are never replaced" in capsys.readouterr().err
    (tmp_path / "out.exr").write_bytes(b"old output")
    assert tool.main([*replay, str(tmp_path / "out.exr")]) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert (tmp_path / "out.exr").read_bytes() == b"old output"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.exr", "out.exr", "p.oidnp", "w.tza"]


def test_record_never_writes_through_a_planted_link(tmp_path):
    from oidn_gpu import cli as tool

    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    program = tmp_path / "p.oidnp"
    (tmp_path / ".p.oidnp.tmp").symlink_to(victim)  # the fixed temporary name of old versions
    argv = ["record", "--weights", str(DATA / "tiny_base_ic3.tza"), "--size", "16x16"]
    assert tool.main([*argv, "--baseline", "-o", str(program)]) == 0
    assert victim.read_bytes() == b"precious"
    assert program.stat().st_size > 1000 and not program.is_symlink()


def test_network_size_is_reported_width_first(tmp_path, capsys):
    from oidn_gpu import cli as tool

    argv = ["record", "--weights", str(DATA / "tiny_base_ic3.tza"), "--size", "48x40"]
    capsys.readouterr()
    assert tool.main([*argv, "--network", "--baseline", "-o", str(tmp_path / "n.oidnp")]) == 1
    assert "network size 48x40 must be positive multiples of 16" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
