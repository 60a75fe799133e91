"""File and channel names whose bytes are not UTF-8 (Latin-1 names from old archives,
hand-edited EXR headers): read, written and shown as ``\\xNN``, never an internal error.

Python holds such names as surrogate escapes, which OpenImageIO's binding refuses; the
runs go in a subprocess so stdout and stderr are the real streams.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_support import leftovers, pythonpath_env, write_exr

from oidn_gpu.image import io

WEIGHTS = Path(__file__).resolve().parents[1] / "data" / "tiny_base_ic3.tza"
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="names as bytes (Linux)")


def _run(*args: object, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    argv = [os.fsencode(a) if isinstance(a, bytes | str) else os.fsencode(str(a)) for a in args]
    return subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"oidn_gpu", *argv],
        capture_output=True,
        env=pythonpath_env(),
        cwd=cwd,
        timeout=120,
    )


@pytest.mark.parametrize("ext", ["exr", "png"])
def test_an_input_and_an_output_named_in_latin1_are_denoised(tmp_path, scene, ext) -> None:
    color = scene(32)["color_4spp"]
    write_exr(tmp_path / "plain.exr", color)
    os.rename(tmp_path / "plain.exr", os.path.join(os.fsencode(tmp_path), b"caf\xe9.exr"))
    result = _run(
        b"denoise",
        b"caf\xe9.exr",
        b"-o",
        b"sortie\xe9." + ext.encode(),
        b"--weights",
        WEIGHTS,
        b"--no-aux",
        b"--json",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    written = os.path.join(os.fsencode(tmp_path), b"sortie\xe9." + ext.encode())
    image = io.read_image(os.fsdecode(written))
    assert (image.height, image.width) == (32, 32)
    assert b"sortie\\xe9." + ext.encode() in result.stderr  # shown escaped, not as a raw byte
    assert json.loads(result.stdout)["denoised"] == 1
    assert leftovers(tmp_path) == []


def test_a_channel_name_that_is_not_utf8_is_listed_escaped(tmp_path) -> None:
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    path = tmp_path / "aovs.exr"
    spec = oiio.ImageSpec(8, 8, 4, "half")
    spec.channelnames = ("R", "G", "B", "albedo.Q")
    out = oiio.ImageOutput.create(str(path))
    assert out.open(str(path), spec)
    assert out.write_image(np.zeros((8, 8, 4), np.float32))
    out.close()
    data = path.read_bytes()
    path.write_bytes(data.replace(b"albedo.Q\0", b"albedo.\xff\0", 1))  # same length
    result = _run(b"denoise", path, b"--list-layers", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert b"albedo: \\xff (half)" in result.stdout
    assert b"\xff" not in result.stdout and b"udcff" not in result.stdout
    result = _run(b"denoise", path, b"-o", b"o.exr", b"--color-layer", b"albedo", cwd=tmp_path)
    assert result.returncode == 1
    assert b"has channels \\xff;" in result.stderr and b"udcff" not in result.stderr
