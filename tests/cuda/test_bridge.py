"""The cuDNN bridge and size-independent kernels: no frame waits for the Triton compiler.

On the CPU the Triton engine runs through Triton's interpreter and the cuDNN engine
through torch's CPU convolutions, so the bridge's switching runs here as on a GPU;
the GPU tests check what a fresh process waits for (compiles per size, per frame).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from oidn_gpu.backends.cuda import bridge as pipeline_module
from oidn_gpu.backends.cuda import row_conv, tuning
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.runner import CudaDenoiser
from oidn_gpu.image import process
from oidn_gpu.model.unet import load_model
from tests.cuda.conftest import HAS_CUDA, rel_l2, run_script


@pytest.fixture(scope="module")
def small_model(weights_dir):
    return load_model(weights_dir / "rt_hdr_alb_nrm_small.tza")


def _images(rng, height, width):
    color = (rng.random((height, width, 3)) ** 3 * 4).astype(np.float32)
    albedo = rng.random((height, width, 3)).astype(np.float32)
    normal = (rng.random((height, width, 3)) * 2 - 1).astype(np.float32)
    return color, albedo, normal


MODE = process.mode_for("RT", hdr=True, input_scale=0.5)


@pytest.fixture(autouse=True)
def nothing_compiled(monkeypatch):
    """Each test starts as a fresh process: no kernel configuration compiled yet."""
    monkeypatch.setattr(pipeline_module, "_READY", set())


def test_bridge_serves_cudnn_until_triton_is_compiled(small_model, device, rng):
    images = _images(rng, 16, 24)
    plain_executor = CudaExecutor(small_model, device=device, tune=False, engine="triton")
    with CudaDenoiser(plain_executor) as plain:
        expected = plain.denoise(*images, mode=MODE)
    executor = CudaExecutor(small_model, device=device, tune=False, bridge=True)
    assert executor.bridge and executor.engine == "triton"
    with CudaDenoiser(executor) as den:
        first = den.denoise(*images, mode=MODE)
        assert executor.last_engine == "cudnn"
        assert "cudnn, while Triton compiles" in executor.info().device
        assert den.wait_compiled(timeout=600)
        second = den.denoise(*images, mode=MODE)
        assert executor.last_engine == "triton"
        assert "while Triton compiles" not in executor.info().device
        # a new size of a compiled configuration runs on Triton at once
        other = _images(rng, 32, 16)
        den.denoise(*other, mode=MODE)
        assert executor.last_engine == "triton" and not den._warming
    # another denoiser of the same network in this process: its kernels are compiled
    with CudaDenoiser(CudaExecutor(small_model, device=device, tune=False, bridge=True)) as den:
        den.denoise(*images, mode=MODE)
        assert den.executor.last_engine == "triton" and not den._warming
    # Triton after the bridge: the bits of an executor without one; cuDNN within fp16
    np.testing.assert_array_equal(second, expected)
    assert rel_l2(first, expected) < 1e-2


def test_bridge_stays_on_cudnn_when_triton_fails(small_model, device, rng, monkeypatch):
    class Broken:
        UNAVAILABLE = "triton is not importable (ImportError: no libtriton)"

    monkeypatch.setattr(pipeline_module, "kernels", lambda: Broken)
    executor = CudaExecutor(small_model, device=device, tune=False, bridge=True)
    with CudaDenoiser(executor) as den:
        images = _images(rng, 16, 16)
        den.denoise(*images, mode=MODE)
        assert den.wait_compiled(timeout=60)
        den.denoise(*images, mode=MODE)
        assert executor.last_engine == "cudnn" and executor.engine == "cudnn"
        assert "no libtriton" in executor.info().device


def test_no_bridge_unless_auto_on_a_gpu(small_model, device):
    assert not CudaExecutor(small_model, device=device, engine="triton").bridge
    assert not CudaExecutor(small_model, device=device, engine="cudnn").bridge
    # auto bridges on a GPU only (the interpreter compiles nothing), and never while tuning
    assert CudaExecutor(small_model, device=device).bridge == HAS_CUDA
    assert not CudaExecutor(small_model, device=device, tune=True).bridge


def test_tile_signatures_do_not_depend_on_the_image_size(small_model, device, monkeypatch):
    monkeypatch.setenv(row_conv.BALANCE_ENV_VAR, "off")  # rows per program fit the size
    executor = CudaExecutor(small_model, device=device, tune=False)
    small = executor.prepare(16, 32)
    large = executor.prepare(48, 64)
    for launch in executor.launches:
        assert executor.layer_signature(small, launch) == executor.layer_signature(large, launch)
        assert small.configs[launch.name] == large.configs[launch.name]


def test_shipped_tiles_cover_the_default_network_on_sm90(weights_dir, device):
    """Every layer of the default network has a shipped sm_90 tile; every shipped tile
    is a layer of it or of the fast network (no stale signatures)."""
    model = load_model(weights_dir / "rt_hdr_alb_nrm.tza")
    executor = CudaExecutor(model, device=device, tune=False)
    prep = executor.prepare(64, 64)
    keys = {executor.layer_signature(prep, launch) for launch in executor.launches}
    assert keys <= set(tuning.SHIPPED_TILES[(9, 0)])
    for launch in executor.launches:
        shipped = tuning.shipped_config((9, 0), executor.layer_signature(prep, launch))
        assert shipped is not None and shipped.block_n >= min(launch.out_stored, 16)
    fast = CudaExecutor(
        load_model(weights_dir / "rt_hdr_alb_nrm_small.tza"), device=device, tune=False
    )
    fast_prep = fast.prepare(64, 64)
    keys |= {fast.layer_signature(fast_prep, launch) for launch in fast.launches}
    assert set(tuning.SHIPPED_TILES[(9, 0)]) <= keys


def test_tuning_only_when_asked(monkeypatch, tmp_path):
    monkeypatch.delenv(tuning.TUNING_ENV_VAR, raising=False)
    assert not tuning.tuning_enabled()
    monkeypatch.setenv(tuning.TUNING_ENV_VAR, "on")
    assert tuning.tuning_enabled()
    monkeypatch.setenv(tuning.TUNING_ENV_VAR, str(tmp_path / "t.json"))
    assert tuning.tuning_enabled() and tuning._cache_path() == tmp_path / "t.json"
    monkeypatch.setenv(tuning.TUNING_ENV_VAR, "off")
    assert not tuning.tuning_enabled() and tuning._cache_path() is None


@pytest.mark.cuda_device
def test_a_new_image_size_compiles_nothing(rng):
    """After one frame on Triton, `Denoiser.denoise` at other sizes (odd ones too) reuses
    its kernels: nothing is added to Triton's compiled-kernel caches (the row kernel's
    rows per program, fitted to each size on a GPU, are a run-time argument)."""
    import oidn_gpu
    from oidn_gpu.backends.cuda import row_kernels
    from oidn_gpu.backends.cuda.triton_loader import io_kernels, kernels

    with oidn_gpu.Denoiser(hdr=True, backend="cuda", engine="triton") as den:
        den.denoise(*_images(rng, 64, 96))
        tk = kernels()
        jitted = (
            tk.conv3x3_kernel,
            io_kernels().input_pass_kernel,
            io_kernels().autoexposure_bins_kernel,
            row_kernels.conv_rows_kernel,
        )
        before = [sum(len(c[0]) for c in k.device_caches.values()) for k in jitted]
        # 720p: other rows per program than the small sizes' (`row_conv.balance`)
        for height, width in ((37, 53), (128, 80), (250, 99), (720, 1280)):
            den.denoise(*_images(rng, height, width))
        after = [sum(len(c[0]) for c in k.device_caches.values()) for k in jitted]
    assert after == before


def test_close_stops_a_running_compile(small_model, device, rng):
    executor = CudaExecutor(small_model, device=device, tune=False, bridge=True)
    den = CudaDenoiser(executor)
    den.denoise(*_images(rng, 16, 16), mode=MODE)
    threads = list(den._warming.values())
    assert threads and all(t.ident is not None for t in threads)  # started after the frame
    den.close()
    assert not any(t.is_alive() for t in threads)


@pytest.mark.cuda_device
def test_a_script_may_exit_while_triton_compiles(tmp_path):
    """One denoise, then exit at once: the compiler thread is stopped, the exit code is 0."""
    script = (
        "import numpy as np, oidn_gpu\n"
        "x = np.random.default_rng(0).random((256, 256, 3), dtype=np.float32)\n"
        "den = oidn_gpu.Denoiser(hdr=True, backend='cuda')\n"
        "den.denoise(x, x, x * 2 - 1)\n"
        "print(den.info().device)\n"
    )
    env = {**__import__("os").environ, "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    assert "cudnn, while Triton compiles" in run_script(script, env)


def test_the_compile_worker_runs_a_frame_in_a_child_process(small_model, device):
    """The job the bridge hands its child pickles, and the child runs it to the end."""
    from oidn_gpu.backends.cuda import compile_job
    from oidn_gpu.image.tiling import MIN_TILE_ALIGNMENT, plan_tiles

    images = (((16, 24, 4), "float32", 3), ((16, 24, 3), "float16", 3), ((16, 24), "float32", 1))
    job = compile_job.CompileJob(
        graph=small_model.graph,
        convs=dict(small_model.convs),
        spec=small_model.spec,
        precision="fp16",
        device_index=device.index,
        images=images,
        out_channels=3,
        mode=MODE,
        plan=plan_tiles(16, 24, overlap=0, alignment=MIN_TILE_ALIGNMENT),
        autoexposure=True,
    )
    child = compile_job.start(job)
    assert child.wait(timeout=300) == 0
    assert not Path(child.job_path).exists()  # the child read and removed its job file
    killed = compile_job.start(job)
    killed.kill()
    killed.wait(timeout=60)
    compile_job.discard(killed)
    assert not Path(killed.job_path).exists()
