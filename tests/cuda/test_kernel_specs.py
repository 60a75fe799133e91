"""Kernels known ahead: specialization lists shared between processes, compiled by several
processes without a GPU, shipped kernels chosen for their GPU and skipped for others.

Triton's compiler and ``ptxas`` run on the CPU, so the compile tests here are real: a
kernel's specialization compiled for compute capability 9.0 in child processes, with no
GPU and no torch in them.
"""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from oidn_gpu.backends.cuda import kernel_specs
from oidn_gpu.backends.cuda.kernel_specs import SpecKey

KERNEL = "tests.cuda.specs_kernel.double_kernel"


def _spec_text(block: int, name: str = KERNEL) -> str:
    """A specialization of `specs_kernel.double_kernel` in Triton's own format."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend
    from triton.runtime.jit import serialize_specialization_data

    target = GPUTarget("cuda", 90, 32)
    options = make_backend(target).parse_options({"num_warps": 4})
    args = [
        name,
        {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
        {(2,): block},
        {(0,): [["tt.divisibility", 16]]},
        options,
        f"key-{block}",
    ]
    if "target" in inspect.signature(serialize_specialization_data).parameters:
        args.append(target)
    return serialize_specialization_data(*args)


def _record(text: str, entry: str | None = None) -> str:
    """A kernel-list line."""
    return json.dumps({"entry": entry, "spec": text}, sort_keys=True)


def _entries(cache: Path) -> dict[str, float]:
    """Triton cache entries holding a compiled kernel -> the cubin's modification time."""
    return {p.parent.name: p.stat().st_mtime_ns for p in cache.glob("*/*.cubin")}


def test_a_kernel_list_compiles_in_child_processes_without_a_gpu(tmp_path, monkeypatch):
    cache = tmp_path / "triton"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    texts = [_record(_spec_text(128)), _record(_spec_text(256))]
    report = kernel_specs.compile_parallel(texts, 90, processes=2)
    assert report.ok and report.processes == 2, report
    compiled = _entries(cache)
    assert len(compiled) == 2  # one cache entry per specialization
    # A second process (another worker of the node) finds them in the cache: nothing is
    # compiled or written again.
    again = kernel_specs.compile_parallel(texts, 90, processes=1)
    assert again.ok and _entries(cache) == compiled


def test_a_failing_specialization_is_reported_and_the_others_still_compile(
    tmp_path, monkeypatch, caplog
):
    cache = tmp_path / "triton"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    broken = _spec_text(64, name="tests.cuda.specs_kernel.no_such_kernel")
    with caplog.at_level("INFO", logger="oidn_gpu.backends.cuda.kernel_specs"):
        report = kernel_specs.compile_parallel(
            [_record(broken), _record(_spec_text(64))], 90, processes=1
        )
    assert report.exit_codes == [1] and not report.ok
    assert "no_such_kernel" in caplog.text
    assert len(_entries(cache)) == 1


def test_a_stopped_compile_kills_its_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    stop = threading.Event()
    stop.set()
    with pytest.raises(kernel_specs.StoppedError):
        kernel_specs.compile_parallel([_record(_spec_text(512))], 90, stop=stop)


def test_kernel_lists_are_shared_between_processes(tmp_path):
    """One process saves a configuration's list; another, with another hash seed, finds it
    under the same digest."""
    script = (
        "import json, sys; from pathlib import Path\n"
        "from oidn_gpu.backends.cuda import kernel_specs as k\n"
        "key = k.SpecKey('9.9.9', 90, k.config_digest(('frame', 90, 'fp16', ('a', 1))))\n"
        "lines = [json.dumps({'entry': None, 'spec': t}, sort_keys=True) for t in sys.argv[2:]]\n"
        "k.save(key, lines, root=Path(sys.argv[1])); print(key.digest)\n"
    )
    digests = []
    for seed, texts in (("1", ["a", "b"]), ("2", ["b", "c"])):
        done = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path), *texts],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, **_path_env()},
        )
        digests.append(done.stdout.strip())
    assert digests[0] == digests[1]
    key = SpecKey("9.9.9", 90, digests[0])
    found = kernel_specs.load(key, root=tmp_path, shipped=tmp_path / "none")
    assert kernel_specs.spec_texts(found) == ["a", "b", "c"]
    assert not list(key.user_path(tmp_path).parent.glob("*.tmp*"))  # no temporary left
    assert (
        kernel_specs.save(key, [_record("a")], root=tmp_path) is None
    )  # nothing new: not rewritten


def _path_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "HOME")}


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
    with tarfile.open(folder / kernel_specs.ARCHIVE_NAME, "w:gz") as tar:
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
    assert kernel_specs.install_shipped("7.7.1", 89, cache_dir=cache, shipped=shipped) == 0
    assert kernel_specs.install_shipped("7.7.2", 90, cache_dir=cache, shipped=shipped) == 0
    assert kernel_specs.load(SpecKey("7.7.1", 89, "abc"), root=tmp_path, shipped=shipped) == []
    # its own: the missing entry copied whole, the existing one untouched, nothing outside
    assert kernel_specs.install_shipped("7.7.1", 90, cache_dir=cache, shipped=shipped) == 1
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
    assert kernel_specs.install_shipped("7.7.3", 90, cache_dir=cache, shipped=shipped) == 2
    (stamp,) = cache.glob(f"{kernel_specs.STAMP_PREFIX}*")
    assert json.loads(stamp.read_text()) == ["ENTRYA", "ENTRYB"]

    def unreadable(*args, **kwargs):
        raise AssertionError("the archive was opened")

    # another process (nothing installed in it yet): the stamp says all is there
    monkeypatch.setattr(kernel_specs, "_INSTALLED", set())
    monkeypatch.setattr(kernel_specs.tarfile, "open", unreadable)
    assert kernel_specs.install_shipped("7.7.3", 90, cache_dir=cache, shipped=shipped) == 0
    # an entry removed since (a cleaned cache): the archive is read again
    monkeypatch.undo()
    monkeypatch.setattr(kernel_specs, "_INSTALLED", set())
    shutil.rmtree(cache / "ENTRYA")
    assert kernel_specs.install_shipped("7.7.3", 90, cache_dir=cache, shipped=shipped) == 1
    assert (cache / "ENTRYA" / "k.cubin").read_bytes() == b"ENTRYA"
    # a stamp naming a path outside the cache is not trusted
    monkeypatch.setattr(kernel_specs, "_INSTALLED", set())
    stamp.write_text(json.dumps(["../../etc"]))
    assert kernel_specs.install_shipped("7.7.3", 90, cache_dir=cache, shipped=shipped) == 0
    assert json.loads(stamp.read_text()) == ["ENTRYA", "ENTRYB"]


def test_export_writes_what_install_reads(tmp_path):
    root, cache = tmp_path / "root", tmp_path / "cache"
    key = SpecKey("7.8.0", 80, "d1")
    kernel_specs.save(key, [_record("s1", "E1")], root=root)
    (cache / "E1").mkdir(parents=True)
    (cache / "E1" / "k.cubin").write_bytes(b"1")
    lines = kernel_specs.export("7.8.0", 80, tmp_path / "ship", root=root, cache_dir=cache)
    assert "1 kernel lists and 1 Triton cache entries" in lines[0]
    sources = tmp_path / "ship" / "triton-7.8.0" / "sm80" / kernel_specs.SOURCES_FILE
    assert sources.read_text("utf-8").strip() == kernel_specs.source_fingerprint()
    fresh = tmp_path / "fresh"
    assert kernel_specs.install_shipped("7.8.0", 80, cache_dir=fresh, shipped=tmp_path / "ship")
    assert (fresh / "E1" / "k.cubin").read_bytes() == b"1"
    found = kernel_specs.load(key, root=tmp_path / "other", shipped=tmp_path / "ship")
    assert kernel_specs.spec_texts(found) == ["s1"]


def test_recording_keeps_this_packages_kernels_of_the_calling_thread():
    import triton

    ours = json.dumps({"name": "oidn_gpu.backends.cuda.triton_kernels.k"})
    theirs = json.dumps({"name": "someone_else.kernel"})
    seen = []
    previous = triton.knobs.runtime.jit_post_compile_hook
    triton.knobs.runtime.jit_post_compile_hook = lambda **kw: seen.append(kw)
    try:
        with kernel_specs.recording() as texts:
            hook = triton.knobs.runtime.jit_post_compile_hook
            hook(compile={"specialization_data": ours})
            hook(compile={"specialization_data": theirs})
            other = threading.Thread(target=lambda: hook(compile={"specialization_data": ours}))
            other.start()
            other.join()
        assert kernel_specs.spec_texts(texts) == [ours]  # not another package's or thread's
        assert len(seen) == 3  # the hook that was there before still hears every kernel
    finally:
        triton.knobs.runtime.jit_post_compile_hook = previous


def test_compile_processes(monkeypatch):
    monkeypatch.setenv(kernel_specs.PROCESSES_ENV_VAR, "3")
    assert kernel_specs.process_count(40) == 3
    assert kernel_specs.process_count(2) == 2
    monkeypatch.setenv(kernel_specs.PROCESSES_ENV_VAR, "zero")
    with pytest.raises(ValueError, match="OIDN_GPU_CUDA_COMPILE_PROCESSES must be an integer"):
        kernel_specs.process_count(4)
    assert kernel_specs.shares(["a", "b", "c", "d", "e"], 2) == [["a", "c", "e"], ["b", "d"]]


def test_the_shipped_kernels_were_compiled_from_these_kernel_sources():
    """An edit of a kernel module (a comment too) changes the kernels' cache keys: the
    shipped kernels must then be made again on the GPU (``oidn-gpu prepare --inputs hdr
    srgb --export src/oidn_gpu/backends/cuda/shipped`` with empty caches), else a fresh
    process runs the cuDNN bridge while Triton compiles."""
    for folder in kernel_specs.shipped_folders():
        recorded = (folder / kernel_specs.SOURCES_FILE).read_text("utf-8").strip()
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
    archive = kernel_specs.shipped_archive("7.9.0", 90, tmp_path / "ship")
    assert kernel_specs.pack_cache_entries(cache, ["E1"], archive) == 1
    assert kernel_specs.install_shipped("7.9.0", 90, cache_dir=fresh, shipped=tmp_path / "ship")
    installed = fresh / "E1"
    assert sorted(p.name for p in installed.iterdir()) == sorted([group, "k.cubin", "k.json"])
    assert json.loads((installed / group).read_text()) == {
        "child_paths": {"k.cubin": str(installed / "k.cubin"), "k.json": str(installed / "k.json")}
    }
    assert (installed / "k.cubin").read_bytes() == b"1"
