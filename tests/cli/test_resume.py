"""Resuming interrupted runs with ``--skip-existing``: one test of "complete" for every path.

`image.complete` decides whether a frame is done: its output (every part) and preview
exist, decode and have the frame's sizes. The CLI's single-process loop
(`sequence.run_sequence`) and the farm (`farm.output_is_complete`) both skip a frame by
it. The fault suite interrupts real ``oidn-gpu denoise`` runs (a subprocess) with
SIGINT, SIGTERM or SIGKILL at seeded points: just before or just after one of the
atomic writes is renamed into place (so also between a frame's output and its preview),
sometimes with an output then truncated as another tool would leave it. Every resume
must end with every output and preview byte-identical to an uninterrupted run.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_support import leftovers, pythonpath_env, write_exr, write_multilayer

from oidn_gpu import sequence
from oidn_gpu.files import TEMP_PREFIX
from oidn_gpu.image import complete, io
from oidn_gpu.image.preview import write_side_by_side

FRAMES = 3
SIZE = 32
TRIALS = 10
SEED = 21
SIGNALS = ("SIGINT", "SIGTERM", "SIGKILL")
TRUNCATED_BYTES = 1000

# Runs the real command line, sending itself a signal just before or just after the
# N-th rename of a finished temporary file into place (files.atomic_write: chmod, then
# replace). SIGINT and SIGTERM are held while the rename runs, so "after" is the first
# moment they can arrive.
_INTERRUPTED_RUN = """
import os, signal, sys
# Ctrl-C as in a terminal, also when the tests were started with SIGINT ignored (a
# background job of a non-interactive shell)
signal.signal(signal.SIGINT, signal.default_int_handler)
from oidn_gpu.cli import main
from oidn_gpu.files import TEMP_PREFIX

stop_at, when, signame = int(sys.argv[1]), sys.argv[2], sys.argv[3]
count = {"chmod": 0, "replace": 0}
real_chmod, real_replace = os.chmod, os.replace

def stop(kind):
    count[kind] += 1
    if count[kind] == stop_at:
        os.kill(os.getpid(), getattr(signal, signame))

def chmod(path, mode, *args, **kwargs):
    real_chmod(path, mode, *args, **kwargs)
    if when == "before" and os.path.basename(path).startswith(TEMP_PREFIX):
        stop("chmod")

def replace(src, dst, *args, **kwargs):
    real_replace(src, dst, *args, **kwargs)
    if when == "after" and os.path.basename(src).startswith(TEMP_PREFIX):
        stop("replace")

os.chmod, os.replace = chmod, replace
sys.exit(main(sys.argv[4:]))
"""


def _write_frames(folder: Path, scene) -> Path:
    folder.mkdir()
    for i in range(FRAMES):
        crop = scene(SIZE, offset=8 * i)
        layers = {"": crop["color_4spp"], "albedo": crop["albedo"], "normal": crop["normal"]}
        write_multilayer(folder / f"shot.{i + 1:04d}.exr", layers)
    return folder


def _args(frames: Path, out: Path) -> list[str]:
    return ["denoise", str(frames), "-o", f"{out}/", "--side-by-side", f"{out}/{{stem}}.png"]


def _outputs(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def frames(tmp_path_factory, scene) -> Path:
    return _write_frames(tmp_path_factory.mktemp("resume") / "frames", scene)


@pytest.fixture(scope="module")
def uninterrupted(frames: Path, tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("uninterrupted") / "out"
    from oidn_gpu.cli import main

    with pytest.MonkeyPatch.context() as patch:  # module scope: before the autouse fixture
        patch.setenv("OIDN_GPU_BACKEND", "reference")
        assert main([*_args(frames, out), "--mkdir", "--quiet"]) == 0
    written = _outputs(out)
    assert len(written) == 2 * FRAMES
    return written


def _trials() -> list[tuple[str, int, str, bool]]:
    """(signal, write number, before/after, truncate an output) per trial, seeded.

    Writes alternate output, preview, output, ...; each signal's first trial stops a
    run right after some frame's output is renamed into place, before its preview.
    """
    rng = random.Random(SEED)
    trials = []
    for trial in range(TRIALS):
        if trial < len(SIGNALS):
            point = (2 * rng.randint(1, FRAMES) - 1, "after")
        else:
            point = (rng.randint(1, 2 * FRAMES), rng.choice(("before", "after")))
        trials.append((SIGNALS[trial % len(SIGNALS)], *point, trial % 4 == 3))
    return trials


def _age_stale_temporaries(out: Path) -> None:
    """Date a killed run's temporary files before this test process started, as they
    are for a resume started after the kill (`files.remove_stale_temporaries`)."""
    old = time.time() - 3600
    for path in out.iterdir():
        if path.name.startswith(TEMP_PREFIX):
            os.utime(path, (old, old))


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(("signame", "stop_at", "when", "truncate"), _trials())
def test_interrupted_run_resumes_to_the_uninterrupted_outputs(
    cli,
    frames: Path,
    uninterrupted: dict[str, bytes],
    tmp_path: Path,
    signame: str,
    stop_at: int,
    when: str,
    truncate: bool,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    hook = [sys.executable, "-c", _INTERRUPTED_RUN, str(stop_at), when, signame]
    run = subprocess.run(
        [*hook, *_args(frames, out), "--quiet"],
        env=pythonpath_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0, f"the run was not interrupted: {run.stderr}"
    if signame != "SIGKILL":
        assert leftovers(out) == []  # the signal handlers removed the temporary file
    _age_stale_temporaries(out)
    if truncate:  # an output (written, or not yet) as another tool leaves it half-written
        victim = ([*sorted(out.glob("*.exr")), out / "shot.0001.exr"])[0]
        victim.write_bytes(uninterrupted[victim.name][:TRUNCATED_BYTES])
    for name, data in _outputs(out).items():
        if name in uninterrupted and not (truncate and name.endswith(".exr")):
            assert data == uninterrupted[name], f"{name}: a final path holds a partial file"

    resumed = cli(*_args(frames, out), "--skip-existing")
    assert resumed.rc == 0, resumed.err
    assert _outputs(out) == uninterrupted
    assert leftovers(out) == []
    again = cli(*_args(frames, out), "--skip-existing")
    assert again.rc == 0 and f"0 denoised, {FRAMES} skipped" in again.err


def test_a_frame_is_complete_only_with_every_file_whole_and_of_its_size(
    tmp_path: Path, scene
) -> None:
    crop = scene(SIZE)
    src = write_multilayer(tmp_path / "in.exr", {"": crop["color_4spp"], "albedo": crop["albedo"]})
    out, preview = tmp_path / "out.exr", tmp_path / "side.png"
    pixels = crop["color_4spp"]
    assert complete.incomplete_reason(src, out, preview) == f"'{out}' is missing"
    write_exr(out, pixels)
    assert complete.incomplete_reason(src, out, preview) == f"'{preview}' is missing"
    io.write_image_atomic(preview, np.zeros((SIZE, SIZE, 3), np.float32))
    assert "expected 68x32 px" in complete.incomplete_reason(src, out, preview)
    write_side_by_side(preview, pixels, pixels, encoding="linear")
    assert complete.is_complete(src, out, preview)
    assert complete.is_complete(src, out)
    preview.write_bytes(preview.read_bytes()[:-100])
    assert "does not decode" in complete.incomplete_reason(src, out, preview)
    write_exr(out, pixels[:-1])
    assert "is 32x31 px; expected 32x32 px" in complete.incomplete_reason(src, out)


def test_a_png_cut_in_its_last_bytes_is_incomplete(tmp_path: Path, scene) -> None:
    """OpenImageIO decodes every pixel of a PNG missing its 12-byte IEND chunk: such a
    file is not complete."""
    pixels = scene(SIZE)["color_4spp"]
    src = write_exr(tmp_path / "in.exr", pixels)
    out = tmp_path / "out.png"
    io.write_image_atomic(out, pixels)
    assert complete.is_complete(src, out)
    whole = out.read_bytes()
    for cut in (1, 2, 12):
        out.write_bytes(whole[:-cut])
        reason = complete.incomplete_reason(src, out)
        assert reason is not None and "is cut short" in reason, (cut, reason)


def test_a_truncated_later_part_of_a_multi_part_output_is_incomplete(tmp_path: Path, scene) -> None:
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    crop = scene(SIZE)
    src = write_exr(tmp_path / "in.exr", crop["color_4spp"])
    out = tmp_path / "out.exr"
    specs = []
    for name in ("beauty", "albedo"):
        spec = oiio.ImageSpec(SIZE, SIZE, 3, "float")
        spec.attribute("name", name)
        spec.attribute("compression", "none")
        specs.append(spec)
    writer = oiio.ImageOutput.create(str(out))
    assert writer.open(str(out), tuple(specs))
    assert writer.write_image(crop["color_4spp"])
    assert writer.open(str(out), specs[1], "AppendSubimage")
    assert writer.write_image(crop["albedo"])
    writer.close()
    assert complete.is_complete(src, out)
    out.write_bytes(out.read_bytes()[: out.stat().st_size - 2048])  # part 1 loses rows
    assert io.read_image(out).height == SIZE  # part 0 alone still reads
    assert "does not decode" in complete.incomplete_reason(src, out)


def test_skip_existing_denoises_a_frame_whose_preview_is_missing_again(
    cli, frames: Path, uninterrupted: dict[str, bytes], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for name, data in uninterrupted.items():
        if name != "shot.0002.png":
            (out / name).write_bytes(data)
    result = cli(*_args(frames, out), "--skip-existing", "--verbose")
    assert result.rc == 0, result.err
    assert "1 denoised, 2 skipped" in result.err
    assert f"'{out / 'shot.0002.png'}' is missing" in result.err
    assert _outputs(out) == uninterrupted
    job = sequence.FrameJob(frames / "shot.0002.exr", out / "shot.0002.exr")
    assert sequence.output_is_complete(job)
    shutil.rmtree(out)
