"""PyTorch's kernel cache folder made ready before the cuda backend's first CUDA work, so
that a fresh home (a new container user) gets no "kernel cache directory could not be
created" warning in its output."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.backends.cuda.torch_cache import TORCH_CACHE_ENV_VAR, ensure_torch_kernel_cache

DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_home_without_a_cache_folder_gets_the_folder_pytorch_uses(tmp_path):
    environ = {"HOME": str(tmp_path)}
    folder = ensure_torch_kernel_cache(environ)
    assert folder == tmp_path / ".cache" / "torch" / "kernels"
    assert folder.is_dir()
    assert TORCH_CACHE_ENV_VAR not in environ  # PyTorch finds it by itself


def test_xdg_cache_home_is_where_pytorch_looks_first(tmp_path):
    environ = {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert ensure_torch_kernel_cache(environ) == tmp_path / "xdg" / "torch" / "kernels"
    assert (tmp_path / "xdg" / "torch" / "kernels").is_dir()
    assert not (tmp_path / "home").exists()


def test_an_unusable_home_moves_the_cache_into_oidn_gpus_cache_folder(tmp_path):
    home = tmp_path / "home"
    home.write_text("a file, not a folder")  # no folder can be made under it, even by root
    ours = tmp_path / "oidn-gpu-cache"
    environ = {"HOME": str(home)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OIDN_GPU_CACHE_DIR", str(ours))
        folder = ensure_torch_kernel_cache(environ)
    assert folder == ours / "torch-kernels"
    assert folder.is_dir()
    assert environ[TORCH_CACHE_ENV_VAR] == str(folder)


def test_with_no_usable_folder_anywhere_a_private_temporary_one_is_used(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    environ = {"HOME": str(blocker)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OIDN_GPU_CACHE_DIR", str(blocker / "cache"))
        folder = ensure_torch_kernel_cache(environ)
    assert folder is not None and folder.is_dir()
    assert folder.name.startswith("oidn-gpu-torch-kernels-")
    assert environ[TORCH_CACHE_ENV_VAR] == str(folder)
    folder.rmdir()


def test_the_users_own_setting_is_kept_as_it_is(tmp_path):
    environ = {"HOME": str(tmp_path), TORCH_CACHE_ENV_VAR: "/nowhere/they/chose"}
    assert ensure_torch_kernel_cache(environ) == Path("/nowhere/they/chose")
    assert environ[TORCH_CACHE_ENV_VAR] == "/nowhere/they/chose"
    assert not (tmp_path / ".cache").exists()


def test_a_denoiser_on_cuda_prepares_the_folder(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv(TORCH_CACHE_ENV_VAR, raising=False)
    monkeypatch.setenv("OIDN_GPU_CACHE_DIR", str(tmp_path / "cache"))
    image = np.random.default_rng(3).random((8, 8, 3), dtype=np.float32)
    weights = DATA / "tiny_base_ic9.tza"
    with oidn_gpu.Denoiser(backend="cuda", engine="cudnn", hdr=True, weights=weights) as den:
        den.denoise(image, image, image * 2 - 1)
    assert os.environ[TORCH_CACHE_ENV_VAR] == str(tmp_path / "cache" / "torch-kernels")
    assert (tmp_path / "cache" / "torch-kernels").is_dir()
