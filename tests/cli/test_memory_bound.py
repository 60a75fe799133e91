"""``oidn-gpu denoise --max-memory-mb 500`` of a 4096x4096 multi-layer EXR (beauty with
alpha, albedo, normal) on the reference backend peaks at 1.5 GiB or less, file reading
and writing included: the layers are read without the rest of the file, and the output
EXR is written a band of rows at a time, its untouched channels copied from the input.

The denoise runs in a child process that reports its own peak resident memory (Linux's
``VmHWM``; ``ru_maxrss`` would carry the parent's peak across exec). The full 4096x4096
denoise takes a few minutes on two cores.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.cli.cli_support import pythonpath_env

oiio = pytest.importorskip("OpenImageIO")

SIZE = 4096
PEAK_LIMIT_MIB = 1.5 * 1024
CHANNELS = ("R", "G", "B", "A", *(f"albedo.{c}" for c in "RGB"), *(f"normal.{c}" for c in "XYZ"))

# Runs the command line, then prints this process's peak resident memory in KiB.
RUN_AND_REPORT_PEAK = """
import sys
from oidn_gpu.cli import main
code = main(sys.argv[1:])
with open("/proc/self/status") as status:
    peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
print(f"peak_kib {peak}")
sys.exit(code)
"""


def _write_frame(path: Path) -> None:
    """A noisy-looking 4096x4096 float frame, written a band of rows at a time."""
    rng = np.random.default_rng(7)
    spec = oiio.ImageSpec(SIZE, SIZE, len(CHANNELS), "float")
    spec.channelnames = CHANNELS
    spec.attribute("compression", "none")
    out = oiio.ImageOutput.create(str(path))
    assert out.open(str(path), spec), oiio.geterror()
    rows = 256
    for top in range(0, SIZE, rows):
        band = rng.random((rows, SIZE, len(CHANNELS)), dtype=np.float32)
        band[:, :, :3] *= 4.0  # HDR colour
        band[:, :, 7:] = band[:, :, 7:] * 2 - 1  # normals in [-1, 1]
        assert out.write_scanlines(top, top + rows, 0, band), out.geterror()
    assert out.close()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's VmHWM")
def test_a_4096_frame_under_max_memory_mb_500_peaks_at_most_1_5_gib(tmp_path: Path) -> None:
    source, output = tmp_path / "frame.exr", tmp_path / "denoised.exr"
    _write_frame(source)
    command = [
        sys.executable,
        "-c",
        RUN_AND_REPORT_PEAK,
        "denoise",
        str(source),
        "-o",
        str(output),
        "--backend",
        "reference",
        "--max-memory-mb",
        "500",
    ]
    done = subprocess.run(
        command, env=pythonpath_env(), capture_output=True, text=True, timeout=3600
    )
    assert done.returncode == 0, done.stderr
    assert "albedo 'albedo', normal 'normal'" in done.stderr  # the whole frame was used
    peak_mib = int(done.stdout.split("peak_kib ")[1].split()[0]) / 1024
    assert peak_mib <= PEAK_LIMIT_MIB, f"peak resident memory {peak_mib:.0f} MiB"
    written = oiio.ImageInput.open(str(output))
    try:
        assert tuple(written.spec().channelnames) == CHANNELS
        kept = written.read_scanlines(0, 0, SIZE - 8, SIZE, 0, 3, 10, "float")
    finally:
        written.close()
    original = oiio.ImageInput.open(str(source))
    try:
        np.testing.assert_array_equal(
            kept, original.read_scanlines(0, 0, SIZE - 8, SIZE, 0, 3, 10, "float")
        )
    finally:
        original.close()
