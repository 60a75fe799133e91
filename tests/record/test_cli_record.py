"""The ``record``, ``replay`` and ``program info`` subcommands (GPU: lavapipe)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from oidn_gpu.record import cli, read_program

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

    color = np.dstack([rng.random((20, 24, 3), np.float32), np.full((20, 24, 1), 0.5, np.float32)])
    io.write_image_atomic(tmp_path / "in.exr", color, pixel_format="float")
    out_path = tmp_path / "out.exr"
    assert (
        run(["replay", str(program), "--color", str(tmp_path / "in.exr"), "-o", str(out_path)]) == 0
    )
    written = io.read_image(out_path).pixels
    with Replayer(data, gpu) as replayer:
        expected = replayer.run([color.astype(np.float32)])
    np.testing.assert_allclose(written, expected, rtol=1e-3, atol=1e-3)  # EXR may store half
    assert written.shape == (20, 24, 4)


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
