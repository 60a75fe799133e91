"""The per-user cache folder and its locked, atomic updates: the CUDA tuning cache and the
kernel spec files updated by several processes at once (real files, real processes; no
GPU: the cache modules need neither torch nor Triton)."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from oidn_gpu import user_cache
from oidn_gpu.backends.cuda import kernel_specs, tuning
from oidn_gpu.backends.cuda.tuning import TileConfig, Tuner

DEVICE_KEY = "NVIDIA H100|triton 3.6|fp16"
KEYS_PER_PROCESS = 40


def _tune_keys(path: str, prefix: str, start: multiprocessing.synchronize.Event) -> None:
    """One process's tuning run: ``KEYS_PER_PROCESS`` layers, each saved when chosen."""
    start.wait()
    tuner = Tuner(DEVICE_KEY, Path(path))
    config = TileConfig(128, 64, 32, 4, 3)
    for index in range(KEYS_PER_PROCESS):
        tuner.choose(f"{prefix}{index}->64@0", (config,), lambda _c: 1.0)


def test_cache_root_follows_the_environment_variable_then_the_platform(monkeypatch, tmp_path):
    monkeypatch.setenv("OIDN_GPU_CACHE_DIR", str(tmp_path / "named"))
    assert user_cache.cache_root() == tmp_path / "named"
    monkeypatch.delenv("OIDN_GPU_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = user_cache.cache_root()
    assert root.name == "oidn-gpu"
    if Path.home() != tmp_path and "xdg" in str(root):  # Linux: XDG rules
        assert root == tmp_path / "xdg" / "oidn-gpu"


def test_tuning_cache_lives_in_the_cache_root_unless_named(monkeypatch, tmp_path):
    monkeypatch.setenv("OIDN_GPU_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(tuning.TUNING_ENV_VAR, "on")
    assert tuning.cache_path() == tmp_path / "cuda-tuning.json"
    monkeypatch.setenv(tuning.TUNING_ENV_VAR, str(tmp_path / "mine.json"))
    assert tuning.cache_path() == tmp_path / "mine.json"
    monkeypatch.setenv(tuning.TUNING_ENV_VAR, "off")
    assert tuning.cache_path() is None


def test_two_processes_tuning_at_once_lose_no_entry(tmp_path):
    path = tmp_path / "cache" / "cuda-tuning.json"
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    workers = [
        context.Process(target=_tune_keys, args=(str(path), prefix, start)) for prefix in ("a", "b")
    ]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    section = json.loads(path.read_text())[DEVICE_KEY]
    expected = {f"{p}{i}->64@0" for p in "ab" for i in range(KEYS_PER_PROCESS)}
    assert set(section) == expected
    assert section["a0->64@0"] == {
        "block_m": 128,
        "block_n": 64,
        "block_k": 32,
        "num_warps": 4,
        "num_stages": 3,
    }
    leftovers = [
        p.name for p in path.parent.iterdir() if p.name not in (path.name, "cuda-tuning.json.lock")
    ]
    assert leftovers == []


def test_a_tuner_keeps_entries_another_process_wrote_after_it_loaded(tmp_path):
    path = tmp_path / "cuda-tuning.json"
    first, second = Tuner(DEVICE_KEY, path), Tuner(DEVICE_KEY, path)
    config = TileConfig(64, 32, 32, 4, 3)
    first.choose("16->32@0", (config,), lambda _c: 1.0)
    second.choose("32->32p@0", (config,), lambda _c: 1.0)
    assert set(json.loads(path.read_text())[DEVICE_KEY]) == {"16->32@0", "32->32p@0"}
    assert set(Tuner(DEVICE_KEY, path).choices()) == {"16->32@0", "32->32p@0"}


def test_an_update_that_fails_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "cache.json"
    user_cache.update_json(path, lambda data: {**data, "kept": 1})

    def broken(_data: dict) -> dict:
        raise RuntimeError("update failed")

    with pytest.raises(RuntimeError, match="update failed"):
        user_cache.update_json(path, broken)
    assert json.loads(path.read_text()) == {"kept": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json", "cache.json.lock"]


def test_a_held_lock_times_out_with_a_message_naming_the_file(tmp_path):
    path = tmp_path / "cache.json"
    context = multiprocessing.get_context("spawn")
    with user_cache.locked(path):
        child = context.Process(target=_update_quickly, args=(str(path),))
        child.start()
        child.join(timeout=60)
    assert child.exitcode == 3
    assert not path.exists()


def _update_quickly(path: str) -> None:
    try:
        user_cache.update_json(path, lambda data: {"late": 1}, timeout_s=0.2)
    except TimeoutError as err:
        assert "cache.json" in str(err) and "locked by another process" in str(err)
        raise SystemExit(3) from None


def _save_specs(root: str, prefix: str, start: multiprocessing.synchronize.Event) -> None:
    start.wait()
    key = kernel_specs.SpecKey("3.6.0", 90, "0" * 32)
    for index in range(KEYS_PER_PROCESS):
        text = json.dumps({"spec": f"{prefix}{index}"})
        kernel_specs.save(key, [text], root=Path(root), shipped=Path(root) / "none")


def test_two_processes_saving_kernel_specs_at_once_lose_no_text(tmp_path):
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    workers = [
        context.Process(target=_save_specs, args=(str(tmp_path), prefix, start))
        for prefix in ("a", "b")
    ]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    key = kernel_specs.SpecKey("3.6.0", 90, "0" * 32)
    specs = {json.loads(t)["spec"] for t in key.user_path(tmp_path).read_text().splitlines()}
    assert specs == {f"{p}{i}" for p in "ab" for i in range(KEYS_PER_PROCESS)}
