"""Kernels compiled ahead on the compile threads: the same image bits, only the kernels a
frame runs, the thread setting, and wgpu-py's C types parsed in one pass."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from oidn_gpu.backends.wgpu.device import open_device
from oidn_gpu.backends.wgpu.executor import PREPARE_IN_BACKGROUND, WgpuExecutor
from oidn_gpu.backends.wgpu.pipeline_cache import (
    COMPILE_THREADS_ENV,
    MAX_COMPILE_THREADS,
    compile_threads,
    pipeline_cache,
)
from oidn_gpu.backends.wgpu.runner import GpuDenoiser
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import tiling
from oidn_gpu.image.process import Mode
from oidn_gpu.image.transfer import Transfer
from oidn_gpu.kernels import io_passes
from oidn_gpu.kernels.spec import Precision

H, W = 40, 56
HDR = Mode(Transfer.PU, True, False, 1.0)
REPO_ROOT = Path(__file__).resolve().parents[2]


def _images() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    color = (rng.random((H, W, 3), np.float32) ** 3 * 8).astype(np.float32)
    albedo = rng.random((H, W, 3), np.float32)
    normal = rng.random((H, W, 3), np.float32) * 2 - 1
    return color, albedo, normal


def _first_image(model, prepare, threads: int, monkeypatch) -> tuple[np.ndarray, bool, bool]:
    """A fresh device's first HDR image (autoexposure on the GPU, two tiles), and whether
    its pipeline cache then holds the executor's input-pack kernel and every network
    kernel."""
    monkeypatch.setenv(COMPILE_THREADS_ENV, str(threads))
    device = open_device()  # its own pipeline cache: every kernel compiles here
    executor = WgpuExecutor(model, device=device, precision="fp16", prepare=prepare)
    runner = GpuDenoiser(executor)
    plan = tiling.plan_tiles_max_edge(H, W, max_edge=48, overlap=16)
    try:
        image = runner.denoise(*_images(), mode=HDR, plan=plan, autoexposure=True)
        cache = pipeline_cache(device)
        pack = io_passes.generate_input_pack(io_passes.PackSpec(9, Precision.FP16))
        network_ready = all(cache.is_ready(k) for k in executor.kernels)
        return image, cache.is_ready(pack), network_ready
    finally:
        runner.close()
        executor.close()
        device.close()


def test_kernels_compiled_ahead_on_threads_give_the_same_image_bits(tiny_models, monkeypatch):
    model = tiny_models["tiny_base_ic9"]
    on_first_use, pack_on_first_use, _ = _first_image(model, False, 1, monkeypatch)
    background, pack_in_background, network = _first_image(
        model, PREPARE_IN_BACKGROUND, 8, monkeypatch
    )
    prepared, pack_prepared, _ = _first_image(model, True, 3, monkeypatch)
    assert np.isfinite(on_first_use).all() and on_first_use.std() > 0
    assert on_first_use.view(np.uint32).tobytes() == background.view(np.uint32).tobytes()
    assert on_first_use.view(np.uint32).tobytes() == prepared.view(np.uint32).tobytes()
    # A denoise never runs the executor's input-pack kernel: only prepare=True compiles it.
    assert (pack_on_first_use, pack_in_background, pack_prepared) == (False, False, True)
    assert network


def test_prepare_takes_true_false_or_background(tiny_models, gpu):
    with pytest.raises(InvalidArgumentError, match="prepare must be True, False or"):
        WgpuExecutor(tiny_models["tiny_base_ic3"], device=gpu, prepare="later")


def test_compile_threads_come_from_the_setting_or_the_cpu_count(monkeypatch):
    monkeypatch.delenv(COMPILE_THREADS_ENV, raising=False)
    assert 1 <= compile_threads() <= MAX_COMPILE_THREADS
    monkeypatch.setenv(COMPILE_THREADS_ENV, "3")
    assert compile_threads() == 3
    for bad in ("0", "-2", "many"):
        monkeypatch.setenv(COMPILE_THREADS_ENV, bad)
        with pytest.raises(InvalidArgumentError, match=f"{COMPILE_THREADS_ENV}='{bad}'"):
            compile_threads()


def test_types_parsed_in_one_pass_are_the_objects_cffi_makes(gpu):
    from oidn_gpu.backends.wgpu import ffi_types

    ffi = ffi_types.wgpu_ffi()
    ffi_types.parse_ahead()
    for cdecl in ffi_types.FIRST_IMAGE_TYPES:
        stored, is_function = ffi._parsed_types[cdecl]
        with ffi._lock:  # cffi's own path for one type (`FFI._typeof_locked`)
            model = ffi._parser.parse_type(cdecl)
            assert bool(model.is_raw_function) == is_function
            if is_function:
                model = model.as_function_pointer()
            assert ffi._get_cached_btype(model) is stored, cdecl


@pytest.mark.slow
def test_a_first_image_names_no_c_type_left_to_parse():
    """In a fresh process every C type a first denoise names was parsed in the one pass
    (`ffi_types.FIRST_IMAGE_TYPES` lists what wgpu-py 0.32 names)."""
    script = textwrap.dedent(
        """
        import numpy as np
        import oidn_gpu
        from oidn_gpu.backends.wgpu import device, ffi_types
        device.enumerate_adapters()
        ffi = ffi_types.wgpu_ffi()
        before = set(ffi._parsed_types)
        rng = np.random.default_rng(0)
        images = [rng.random((24, 40, 3), dtype=np.float32) for _ in range(3)]
        with oidn_gpu.Denoiser(hdr=True, backend="wgpu") as den:
            den.denoise(*images)
            den.denoise(images[0].astype(np.float16), *images[1:])
        print(sorted(set(ffi._parsed_types) - before))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", (
        "types parsed one by one (add them to FIRST_IMAGE_TYPES): " + done.stdout
    )
