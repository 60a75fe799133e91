"""``oidn-gpu denoise`` when its writes fail: a full disk, or a file-size limit.

The run goes in a subprocess whose ``RLIMIT_FSIZE`` (``ulimit -f``) makes every write past
the limit fail with EFBIG, the way a full disk fails with ENOSPC: OpenImageIO's writers
then show their real behaviour (PNG truncated and reported as written, libjpeg ending the
process, WebP retrying forever). Each format must either write a complete file or fail
that frame with an error naming it; the other frames are still tried, the summary and the
JSON summary are printed, and no temporary file is left. A copy into ``/dev/full`` gives
the kernel's own ENOSPC.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_support import leftovers, pythonpath_env, write_exr

from oidn_gpu.image import encoded, io

DATA = Path(__file__).resolve().parents[1] / "data"
WEIGHTS = DATA / "tiny_base_ic3.tza"
LIMIT_BYTES = 200  # below every output of a 48 px frame (the inputs are written here)
RUN_LIMIT_S = 30


def _frames(folder: Path, scene, count: int = 3) -> list[Path]:
    folder.mkdir()
    return [
        write_exr(folder / f"f.{i:04d}.exr", scene(48, offset=4 * i)["color_4spp"])
        for i in range(1, count + 1)
    ]


def _limited(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return apply


def _denoise(args: list[object], limit: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "oidn_gpu", "denoise", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=pythonpath_env(),
        preexec_fn=_limited(limit),
    )


def _first_error(proc: subprocess.Popen[str]) -> bool:
    """Wait (at most RUN_LIMIT_S) for the run's first ``error:`` line on stderr."""
    assert proc.stderr is not None
    deadline = time.monotonic() + RUN_LIMIT_S
    pending = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.1)
        if not ready:
            continue
        chunk = os.read(proc.stderr.fileno(), 4096).decode(errors="replace")
        if not chunk:
            return False
        pending += chunk
        if any(line.startswith("error:") for line in pending.splitlines()):
            return True
    return False


@pytest.mark.parametrize("ext", ["png", "jpg", "webp", "exr", "tif"])
def test_a_full_disk_fails_each_frame_clearly_and_the_run_reports_them_all(
    tmp_path, scene, ext
) -> None:
    frames = _frames(tmp_path / "in", scene)
    out = tmp_path / "out"
    out.mkdir()
    args = [*frames, "-o", out / f"{{stem}}.{ext}", "--weights", WEIGHTS, "--json"]
    proc = _denoise([*args, "--no-progress"], LIMIT_BYTES)
    stdout, stderr = proc.communicate(timeout=RUN_LIMIT_S)
    assert proc.returncode == 1, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == len(frames), stderr  # every frame tried, each failure named
    for frame, line in zip(frames, errors, strict=True):
        assert str(frame) in line and f"{frame.stem}.{ext}" in line, line
    summary = json.loads(stdout)
    assert summary["failed"] == len(frames), summary
    assert sorted(p.name for p in out.iterdir()) == []  # nothing partial, no temporary
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("ext", ["png", "jpg", "webp", "exr"])
def test_outputs_within_the_limit_are_written_whole(tmp_path, scene, ext) -> None:
    frames = _frames(tmp_path / "in", scene, count=1)
    out = tmp_path / "out"
    args = [*frames, "-o", out / f"{{stem}}.{ext}", "--mkdir", "--weights", WEIGHTS]
    proc = _denoise([*args, "--no-progress"], 64 << 20)
    _, stderr = proc.communicate(timeout=RUN_LIMIT_S)
    assert proc.returncode == 0, stderr
    written = io.read_image(out / f"{frames[0].stem}.{ext}")
    assert (written.height, written.width) == (48, 48)


def test_sigterm_is_honoured_within_two_seconds_while_writes_fail(tmp_path, scene) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    noise = np.random.default_rng(1).random((256, 256, 3), dtype=np.float32)
    # a WebP writer of OpenImageIO 3.2 whose writes fail retries forever at this size
    frames = [write_exr(folder / f"f.{i}.exr", noise) for i in range(1, 7)]
    out = tmp_path / "out"
    out.mkdir()
    args = [*frames, "-o", out / "{stem}.webp", "--weights", WEIGHTS, "--no-progress"]
    proc = _denoise(args, LIMIT_BYTES)
    try:
        assert _first_error(proc), "the first frame's failed write was never reported"
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        proc.wait(timeout=10)
        assert time.monotonic() - sent < 2.0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode in (1, 130)
    assert leftovers(tmp_path) == []


_BLOCKED_ENCODER = """
import ctypes, sys
from oidn_gpu import files
from oidn_gpu.image import encoded
libc = ctypes.CDLL(None)
with files.install_signal_cleanup():
    print("encoding", flush=True)
    encoded.run_interruptibly(lambda name: libc.sleep(30), "x")  # C code, never in Python
"""


def test_an_encoder_stuck_in_native_code_does_not_hold_off_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _BLOCKED_ENCODER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=pythonpath_env(),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "encoding\n"
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    try:
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert time.monotonic() - sent < 2.0
    assert "Terminated" in err


def test_a_copy_onto_a_full_device_is_a_clear_error(tmp_path) -> None:
    source = tmp_path / "encoded.png"
    io.write_image_atomic(source, np.full((8, 8, 3), 0.5, dtype=np.float32))
    with (
        source.open("rb") as src,
        open("/dev/full", "wb", buffering=0) as full,
        pytest.raises(io.ImageFileError, match=r"cannot write 'x\.png': no space"),
    ):
        encoded._copy(src.fileno(), full, Path("x.png"))


def test_a_truncated_file_fails_the_check_before_it_replaces_anything(tmp_path) -> None:
    good = tmp_path / "good.png"
    io.write_image_atomic(good, np.full((16, 16, 3), 0.5, dtype=np.float32))
    cut = tmp_path / "cut.png"
    cut.write_bytes(good.read_bytes()[:-20])
    shape = encoded.PartShape(16, 16, 3)
    encoded.verify_written(good, good, [shape])
    with pytest.raises(io.ImageFileError, match="does not decode"):
        encoded.verify_written(cut, Path("out.png"), [shape])
    with pytest.raises(io.ImageFileError, match="expected 16x16 px with 4 channels"):
        encoded.verify_written(good, Path("out.png"), [encoded.PartShape(16, 16, 4)])
