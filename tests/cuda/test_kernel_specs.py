"""Kernels known ahead: specialization lists shared between processes, compiled by several
processes without a GPU, shipped kernels chosen for their GPU and skipped for others.

Triton's compiler and ``ptxas`` run on the CPU, so the compile tests here are real: a
kernel's specialization compiled for compute capability 9.0 in child processes, with no
GPU and no torch in them.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
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
