"""SIGTERM to the driver of ``oidn-gpu denoise --ray`` stops the run as Ctrl-C does: the
workers are stopped, "interrupted" is said, exit 130, and every output is complete or
absent (a subprocess with its own local Ray instance)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from farm_support import write_frames

from oidn_gpu import sequence

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_to_the_ray_driver_exits_130_with_complete_outputs(tmp_path):
    frames = write_frames(tmp_path / "in", 150)
    out = tmp_path / "out"
    home = tmp_path / "driver-home"  # the driver's HOME, empty: Ray probes no cloud there
    home.mkdir()
    (home / "ray_bootstrap_config.yaml").write_text("")
    env = dict(
        os.environ,
        PYTHONPATH=f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        HOME=str(home),
        OIDN_GPU_BACKEND="reference",
        RAY_ADDRESS="local",
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
        RAY_USAGE_STATS_ENABLED="0",
    )
    code = "import sys; from oidn_gpu.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            code,
            "denoise",
            str(tmp_path / "in"),
            "-o",
            f"{out}/",
            "--mkdir",
            "--ray",
            "--workers",
            "2",
            "--no-progress",
            "--no-aux",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (out.is_dir() and any(p.suffix == ".exr" for p in out.iterdir())):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no frame was written"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    written = sorted(out.iterdir())
    assert proc.returncode == 130, err
    said = re.search(
        r"error: interrupted; (\d+) of 150 frames finished \(their outputs are complete\) and "
        r"no partial outputs were left; run the same command with --skip-existing to denoise "
        r"the rest",
        err,
    )
    assert said, err
    assert len(written) < len(frames), "the run finished before SIGTERM"
    # frames the driver heard of; a worker may have written one more it had not yet reported
    assert int(said.group(1)) <= len(written)
    for path in written:  # no temporary file; every output decodes whole
        job = sequence.FrameJob(tmp_path / "in" / path.name, path)
        assert sequence.output_is_complete(job), path
