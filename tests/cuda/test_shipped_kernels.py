"""The kernels shipped with the package: chosen for their GPU and Triton and skipped for
others, copied into Triton's cache whole and once (a later process trusts the stamp), on
a thread started before the network is built, which a first frame waits for.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from oidn_gpu.backends.cuda import kernel_specs, shipped_kernels
from oidn_gpu.backends.cuda.kernel_specs import SpecKey
from tests.cuda.test_kernel_specs import _record


def _shipped(tmp_path: Path, version: str, capability: int) -> Path:
    """A shipped-kernels folder: one kernel list and a cache archive of two entries (and
    a member that would escape the cache folder)."""
    shipped = tmp_path / "shipped"
    folder = shipped / f"triton-{version}" / f"sm{capability}"
    folder.mkdir(parents=True)
    (folder / "abc.jsonl").write_text(
        f"{_record('spec-1', 'ENTRYA')}\nnot a record\n{_record('spec-2', 'ENTRYB')}\n"
    )
    source = tmp_path / "source"
    for entry in ("ENTRYA", "ENTRYB"):
        (source / entry).mkdir(parents=True)
        (source / entry / "k.cubin").write_bytes(entry.encode())
    with tarfile.open(folder / shipped_kernels.ARCHIVE_NAME, "w:gz") as tar:
        tar.add(source / "ENTRYA", arcname="ENTRYA")
        tar.add(source / "ENTRYB", arcname="ENTRYB")
        evil = tmp_path / "evil"
        evil.write_bytes(b"x")
        tar.add(evil, arcname="../evil2")
    return shipped


def test_shipped_kernels_are_used_for_their_gpu_and_triton_only(tmp_path):
    shipped = _shipped(tmp_path, "7.7.1", 90)
    cache = tmp_path / "cache"
    (cache / "ENTRYB").mkdir(parents=True)  # already there (another process): kept
    (cache / "ENTRYB" / "k.cubin").write_bytes(b"mine")
    # another GPU architecture or Triton version: nothing shipped for it
    assert shipped_kernels.install_shipped("7.7.1", 89, cache_dir=cache, shipped=shipped) == 0
    assert shipped_kernels.install_shipped("7.7.2", 90, cache_dir=cache, shipped=shipped) == 0
    assert kernel_specs.load(SpecKey("7.7.1", 89, "abc"), root=tmp_path, shipped=shipped) == []
    # its own: the missing entry copied whole, the existing one untouched, nothing outside
    assert shipped_kernels.install_shipped("7.7.1", 90, cache_dir=cache, shipped=shipped) == 1
    assert (cache / "ENTRYA" / "k.cubin").read_bytes() == b"ENTRYA"
    assert (cache / "ENTRYB" / "k.cubin").read_bytes() == b"mine"
    entries = sorted(p.name for p in cache.iterdir() if not p.name.startswith("."))
    assert not (tmp_path / "evil2").exists() and entries == ["ENTRYA", "ENTRYB"]
    key = SpecKey("7.7.1", 90, "abc")
    records = kernel_specs.load(key, root=tmp_path, shipped=shipped)
    assert kernel_specs.spec_texts(records) == ["spec-1", "spec-2"]  # the bad line skipped
    assert kernel_specs.in_cache(records, cache)
    assert not kernel_specs.in_cache(records, tmp_path / "empty")
    assert not kernel_specs.in_cache([_record("spec-3")], cache)  # no entry recorded


def test_a_later_process_finds_the_shipped_entries_by_their_stamp(tmp_path, monkeypatch):
    shipped = _shipped(tmp_path, "7.7.3", 90)
    cache = tmp_path / "cache"
    assert shipped_kernels.install_shipped("7.7.3", 90, cache_dir=cache, shipped=shipped) == 2
    (stamp,) = cache.glob(f"{shipped_kernels.STAMP_PREFIX}*")
    assert json.loads(stamp.read_text()) == ["ENTRYA", "ENTRYB"]

    def unreadable(*args, **kwargs):
        raise AssertionError("the archive was opened")

    # another process (nothing installed in it yet): the stamp says all is there
    monkeypatch.setattr(shipped_kernels, "_INSTALLED", set())
    monkeypatch.setattr(shipped_kernels.tarfile, "open", unreadable)
    assert shipped_kernels.install_shipped("7.7.3", 90, cache_dir=cache, shipped=shipped) == 0
    # an entry removed since (a cleaned cache): the archive is read again
    monkeypatch.undo()
    monkeypatch.setattr(shipped_kernels, "_INSTALLED", set())
    shutil.rmtree(cache / "ENTRYA")
    assert shipped_kernels.install_shipped("7.7.3", 90, cache_dir=cache, shipped=shipped) == 1
    assert (cache / "ENTRYA" / "k.cubin").read_bytes() == b"ENTRYA"
    # a stamp naming a path outside the cache is not trusted
    monkeypatch.setattr(shipped_kernels, "_INSTALLED", set())
    stamp.write_text(json.dumps(["../../etc"]))
    assert shipped_kernels.install_shipped("7.7.3", 90, cache_dir=cache, shipped=shipped) == 0
    assert json.loads(stamp.read_text()) == ["ENTRYA", "ENTRYB"]


def test_export_writes_what_install_reads(tmp_path):
    root, cache = tmp_path / "root", tmp_path / "cache"
    key = SpecKey("7.8.0", 80, "d1")
    kernel_specs.save(key, [_record("s1", "E1")], root=root)
    (cache / "E1").mkdir(parents=True)
    (cache / "E1" / "k.cubin").write_bytes(b"1")
    lines = shipped_kernels.export("7.8.0", 80, tmp_path / "ship", root=root, cache_dir=cache)
    assert "1 kernel lists and 1 Triton cache entries" in lines[0]
    sources = tmp_path / "ship" / "triton-7.8.0" / "sm80" / shipped_kernels.SOURCES_FILE
    assert sources.read_text("utf-8").strip() == kernel_specs.source_fingerprint()
    fresh = tmp_path / "fresh"
    assert shipped_kernels.install_shipped("7.8.0", 80, cache_dir=fresh, shipped=tmp_path / "ship")
    assert (fresh / "E1" / "k.cubin").read_bytes() == b"1"
    found = kernel_specs.load(key, root=tmp_path / "other", shipped=tmp_path / "ship")
    assert kernel_specs.spec_texts(found) == ["s1"]


def test_the_shipped_kernels_were_compiled_from_these_kernel_sources():
    """An edit of a kernel module (a comment too) changes the kernels' cache keys: the
    shipped kernels must then be made again on the GPU (``oidn-gpu prepare --inputs hdr
    srgb --export src/oidn_gpu/backends/cuda/shipped`` with empty caches), else a fresh
    process runs the cuDNN bridge while Triton compiles."""
    for folder in shipped_kernels.shipped_folders():
        recorded = (folder / shipped_kernels.SOURCES_FILE).read_text("utf-8").strip()
        assert recorded == kernel_specs.source_fingerprint(), folder


def test_installed_group_files_name_their_files_where_they_were_installed(tmp_path):
    cache, fresh = tmp_path / "cache", tmp_path / "fresh"
    entry = cache / "E1"
    entry.mkdir(parents=True)
    files = {"k.cubin": b"1", "k.json": b"{}", "k.ptx": b"not shipped"}
    for name, data in files.items():
        (entry / name).write_bytes(data)
    group = f"{kernel_specs.GROUP_PREFIX}k.json"
    (entry / group).write_text(json.dumps({"child_paths": {n: str(entry / n) for n in files}}))
    archive = shipped_kernels.shipped_archive("7.9.0", 90, tmp_path / "ship")
    assert shipped_kernels.pack_cache_entries(cache, ["E1"], archive) == 1
    assert shipped_kernels.install_shipped("7.9.0", 90, cache_dir=fresh, shipped=tmp_path / "ship")
    installed = fresh / "E1"
    assert sorted(p.name for p in installed.iterdir()) == sorted([group, "k.cubin", "k.json"])
    assert json.loads((installed / group).read_text()) == {
        "child_paths": {"k.cubin": str(installed / "k.cubin"), "k.json": str(installed / "k.json")}
    }
    assert (installed / "k.cubin").read_bytes() == b"1"


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"TRITON_CACHE_DIR": "/tmp/oidn-gpu-test/triton-cache"},
        {"TRITON_HOME": "/tmp/oidn-gpu-test/home"},
        {"HOME": "/tmp/oidn-gpu-test/user"},
    ],
)
def test_the_triton_cache_is_found_without_importing_triton(env):
    script = (
        "import sys; from oidn_gpu.backends.cuda.kernel_specs import triton_cache_dir; "
        "found = str(triton_cache_dir()); assert 'triton' not in sys.modules; "
        "import triton; print(found == triton.knobs.cache.dir, found)"
    )
    names = ("TRITON_CACHE_DIR", "TRITON_HOME")
    child = {k: v for k, v in os.environ.items() if k not in names} | env
    done = subprocess.run(
        [sys.executable, "-c", script], env=child, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    same, found = done.stdout.split()
    assert same == "True", found
    assert found.startswith(next(iter(env.values()), os.path.expanduser("~")))


def test_the_shipped_kernels_install_on_a_thread_that_a_frame_waits_for(tmp_path, monkeypatch):
    version = kernel_specs.triton_version()
    assert version is not None  # the cuda tests run with Triton installed
    shipped = _shipped(tmp_path, version, 90)
    cache = tmp_path / "cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    monkeypatch.setattr(shipped_kernels, "_INSTALLED", set())
    assert shipped_kernels.install_shipped_soon(89, shipped=shipped) is None  # none shipped
    thread = shipped_kernels.install_shipped_soon(90, shipped=shipped)
    assert thread is not None and thread.daemon
    # the frame's own call waits for the thread, then finds its work done
    assert shipped_kernels.install_shipped(version, 90, shipped=shipped) == 0
    assert (cache / "ENTRYA" / "k.cubin").read_bytes() == b"ENTRYA"
    assert (cache / "ENTRYB" / "k.cubin").read_bytes() == b"ENTRYB"
    thread.join(30)
    assert not thread.is_alive()
    assert shipped_kernels.install_shipped_soon(90, shipped=shipped) is None  # installed
    # another cache (Triton's setting changed since): installed there too
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "other"))
    again = shipped_kernels.install_shipped_soon(90, shipped=shipped)
    assert again is not None
    again.join(30)
    assert (tmp_path / "other" / "ENTRYA" / "k.cubin").read_bytes() == b"ENTRYA"


def test_a_damaged_archive_on_the_thread_is_logged_not_raised(tmp_path, monkeypatch, caplog):
    version = kernel_specs.triton_version()
    assert version is not None
    archive = shipped_kernels.shipped_archive(version, 90, tmp_path / "ship")
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"\x1f\x8b\x08\x00" + b"not deflate data" * 8)  # a gzip header
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(shipped_kernels, "_INSTALLED", set())
    raised: list[object] = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    with caplog.at_level("INFO", logger="oidn_gpu.backends.cuda.shipped_kernels"):
        thread = shipped_kernels.install_shipped_soon(90, shipped=tmp_path / "ship")
        assert thread is not None
        thread.join(30)
    assert raised == []
    assert "shipped kernels not installed" in caplog.text
    assert not any((tmp_path / "cache").glob("ENTRY*"))


def test_a_kernel_s_files_are_read_from_the_package_then_triton_s_cache_and_never_copied(
    tmp_path,
):
    shipped = _shipped(tmp_path, "7.7.4", 90)
    cache = tmp_path / "cache"
    (cache / "ENTRYC").mkdir(parents=True)  # compiled by an earlier process of this user
    (cache / "ENTRYC" / "k.cubin").write_bytes(b"compiled")
    (cache / "ENTRYC" / "k.ttir").write_bytes(b"not read")
    files = shipped_kernels.entry_files("7.7.4", 90, cache_dir=cache, shipped=shipped)
    assert files("ENTRYA") == {"k.cubin": b"ENTRYA"}
    assert files("ENTRYC") == {"k.cubin": b"compiled"}
    assert files("ENTRYD") is None and files("../evil2") is None
    # another GPU architecture: only Triton's cache
    other = shipped_kernels.entry_files("7.7.4", 89, cache_dir=cache, shipped=shipped)
    assert other("ENTRYA") is None and other("ENTRYC") == {"k.cubin": b"compiled"}
    assert sorted(p.name for p in cache.iterdir()) == ["ENTRYC"]  # nothing copied in
