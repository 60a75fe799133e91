"""Atomic writes (`oidn_gpu.files`): temporary files, links, signals, stale files, outputs
that are inputs."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_support import leftovers, pythonpath_env

from oidn_gpu import files
from oidn_gpu.files import TEMP_PREFIX


def _unused_pid() -> int:
    """A process id no process can have (above the kernel's pid_max)."""
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    except OSError:
        return 2**22 + 1  # Linux's largest pid_max is 2**22


def _age(path: Path, seconds: float = 3600) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


def test_write_replaces_the_destination_with_the_new_mode_and_no_temporary(tmp_path) -> None:
    target = tmp_path / "sub" / "out.bin"
    files.write_bytes_atomic(target, b"one")
    files.write_bytes_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    target.chmod(0o640)
    files.write_bytes_atomic(target, b"three")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # a replaced file keeps its mode
    assert leftovers(tmp_path) == []


def test_temporary_file_is_new_hidden_and_keeps_the_extension(tmp_path) -> None:
    with files.atomic_write(tmp_path / "frame.exr") as tmp:
        assert tmp.path.parent == tmp_path
        assert tmp.path.name.startswith(f"{TEMP_PREFIX}{os.getpid()}-")
        assert tmp.path.name.endswith("-frame.exr")
        assert files.live_temporaries() == [tmp.path]
        tmp.file.write(b"x")
    assert files.live_temporaries() == []


def test_failure_keeps_the_old_file_and_removes_the_temporary(tmp_path) -> None:
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt), files.atomic_write(target) as tmp:
        tmp.file.write(b"partial")
        raise KeyboardInterrupt
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]
    assert files.live_temporaries() == []


def test_planted_links_at_the_old_temporary_names_are_never_followed(tmp_path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    target = tmp_path / "out.oidnp"
    # the names older versions used: '.NAME.tmp' and '.NAME.part-PID'
    for name in (f".{target.name}.tmp", f".{target.name}.part-{os.getpid()}"):
        (tmp_path / name).symlink_to(victim)
    with pytest.raises(RuntimeError), files.atomic_write(target) as tmp:
        tmp.file.write(b"garbage")
        raise RuntimeError("failed")
    files.write_bytes_atomic(target, b"program")
    assert victim.read_bytes() == b"precious"
    assert target.read_bytes() == b"program" and not target.is_symlink()


def test_a_destination_link_is_replaced_not_written_through(tmp_path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    link = tmp_path / "out.bin"
    link.symlink_to(victim)
    files.write_bytes_atomic(link, b"new")
    assert victim.read_bytes() == b"precious"
    assert not link.is_symlink() and link.read_bytes() == b"new"


def test_parent_that_is_a_file_is_named(tmp_path) -> None:
    (tmp_path / "notdir").write_bytes(b"")
    target = tmp_path / "notdir" / "out.exr"
    with pytest.raises(files.OutputFileError, match=r"'.*notdir' is a file, not a folder"):
        files.write_bytes_atomic(target, b"x")
    with pytest.raises(files.OutputFileError, match=r"is a file, not a folder"):
        files.check_output_folder(tmp_path / "notdir" / "deeper" / "out.exr")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_unwritable_folder_is_found_before_writing() -> None:
    # /proc refuses new files for every user, root included
    with pytest.raises(files.OutputFileError, match=r"folder '/proc' is not writable"):
        files.check_output_folder("/proc/out.exr")


def test_stale_temporaries_of_dead_runs_are_removed_on_the_next_write(tmp_path) -> None:
    dead = tmp_path / f"{TEMP_PREFIX}{_unused_pid()}-abcd1234-f01.exr"
    fresh_dead = tmp_path / f"{TEMP_PREFIX}{_unused_pid()}-efgh5678-f02.exr"
    alive = tmp_path / f"{TEMP_PREFIX}{os.getppid()}-ijkl9012-f03.exr"
    unrelated = tmp_path / ".f04.exr.tmp"
    for path in (dead, fresh_dead, alive, unrelated):
        path.write_bytes(b"partial")
    for path in (dead, alive, unrelated):
        _age(path)
    # fresh_dead is newer than this run: it may belong to a run that started since
    assert files.remove_stale_temporaries(tmp_path) == [dead]
    files.write_bytes_atomic(tmp_path / "f05.exr", b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [fresh_dead.name, alive.name, unrelated.name, "f05.exr"]
    )


def test_temporaries_of_a_runs_destinations_are_removed_whoever_wrote_them(tmp_path) -> None:
    since = time.time() - 60
    out, other = tmp_path / "out", tmp_path / "other"
    out.mkdir()
    other.mkdir()
    ours = out / f"{TEMP_PREFIX}{os.getpid()}-abcd1234-f01.exr"  # a live writer's too
    dead = out / f"{TEMP_PREFIX}{_unused_pid()}-efgh5678-f02.exr"
    older = out / f"{TEMP_PREFIX}{_unused_pid()}-ijkl9012-f01.exr"  # before the run
    elsewhere = out / f"{TEMP_PREFIX}{_unused_pid()}-mnop3456-f09.exr"  # not a destination
    similar = out / f"{TEMP_PREFIX}{_unused_pid()}-qrst7890-xf01.exr"
    same_name = other / f"{TEMP_PREFIX}{_unused_pid()}-uvwx1234-f01.exr"  # another folder
    plain = out / "f02.exr"
    for path in (ours, dead, older, elsewhere, similar, same_name, plain):
        path.write_bytes(b"partial")
    _age(older)
    destinations = [out / "f01.exr", out / "f02.exr", tmp_path / "missing" / "f03.exr"]
    removed = files.remove_temporaries_of(destinations, since)
    assert sorted(removed) == sorted([ours, dead])
    assert sorted(p.name for p in out.iterdir()) == sorted(
        p.name for p in (older, elsewhere, similar, plain)
    )
    assert same_name.exists()


_WRITER = """
import sys, time
from oidn_gpu import files
with files.install_signal_cleanup():
    with files.atomic_write(sys.argv[1]) as tmp:
        tmp.file.write(b"partial")
        tmp.file.flush()
        time.sleep(120)
"""


def _start_writer(target: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(target)],
        env=pythonpath_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_temporary(folder: Path, proc: subprocess.Popen[str]) -> Path:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = [p for p in folder.iterdir() if p.name.startswith(TEMP_PREFIX)]
        if found and found[0].stat().st_size > 0:
            return found[0]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    proc.kill()
    raise AssertionError("the writer never created its temporary file")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_removes_the_temporary_and_leaves_the_old_file(tmp_path) -> None:
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    proc = _start_writer(target)
    _wait_for_temporary(tmp_path, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "Terminated" in err  # stopped by the handler
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]
    assert target.read_bytes() == b"old"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_temporary_of_a_killed_run_is_removed_by_the_next_run(tmp_path) -> None:
    proc = _start_writer(tmp_path / "a.bin")
    stale = _wait_for_temporary(tmp_path, proc)
    proc.kill()  # SIGKILL: no chance to clean up
    proc.communicate(timeout=60)
    assert stale.exists()
    _age(stale, 5)  # older than the next run (whose start the file system clock may round)
    subprocess.run(
        [sys.executable, "-c", _WRITER.replace("time.sleep(120)", "pass"), str(tmp_path / "b")],
        env=pythonpath_env(),
        check=True,
        timeout=60,
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_outputs_that_are_inputs(tmp_path) -> None:
    src = tmp_path / "in.exr"
    src.write_bytes(b"input")
    hard = tmp_path / "hard.exr"
    os.link(src, hard)
    soft = tmp_path / "soft.exr"
    soft.symlink_to(src)
    (tmp_path / "d").mkdir()
    for output in (src, hard, soft, tmp_path / "d" / ".." / "in.exr"):
        assert files.find_input_overwritten([tmp_path / "other.exr", output], [src]) == (
            output,
            src,
        )
        with pytest.raises(files.OutputRefusedError, match="inputs are never replaced"):
            files.check_outputs([output], [src], overwrite=True)
    assert files.find_input_overwritten([tmp_path / "new.exr"], [src]) is None
    files.check_outputs([tmp_path / "new.exr"], [src], overwrite=False)
    with pytest.raises(files.OutputRefusedError, match="exists; pass --overwrite"):
        files.check_outputs([hard], [tmp_path / "new.exr"], overwrite=False)
    assert src.read_bytes() == b"input"
