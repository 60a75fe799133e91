"""Programmatic dependent launch (`pdl`): where it is used, what the kernels compile to, and
(on a GPU of compute capability 9.0 or later) the same frame bits with and without it."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from oidn_gpu.backends.cuda import pdl
from oidn_gpu.backends.cuda.executor import CudaExecutor, interpreting
from oidn_gpu.backends.cuda.runner import CudaDenoiser
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import process
from oidn_gpu.model.unet import load_model

ON = {"PDL": True, "launch_pdl": True}


def test_launch_options_need_hopper_a_gpu_and_the_option(monkeypatch):
    monkeypatch.setattr(pdl, "triton_has_pdl", lambda: True)
    assert pdl.launch_options((9, 0), False, {}) == ON
    assert pdl.launch_options((10, 0), False, {pdl.PDL_ENV_VAR: "on"}) == ON
    assert pdl.launch_options((8, 9), False, {}) == {}  # Ada: no griddepcontrol
    assert pdl.launch_options((9, 0), True, {}) == {}  # Triton's interpreter
    assert pdl.launch_options(None, False, {}) == {}  # not a CUDA device
    assert pdl.launch_options((9, 0), False, {pdl.PDL_ENV_VAR: "off"}) == {}
    with pytest.raises(InvalidArgumentError, match="OIDN_GPU_CUDA_PDL='yes' is unknown"):
        pdl.launch_options((9, 0), False, {pdl.PDL_ENV_VAR: "yes"})
    monkeypatch.setattr(pdl, "triton_has_pdl", lambda: False)  # Triton before 3.4
    assert pdl.launch_options((9, 0), False, {}) == {}


@pytest.mark.parametrize(("version", "has"),
                         [("3.3.1", False), ("3.4.0", True), ("3.6.0+git1a2b", True),
                          ("4.0", True), ("2.3.1", False)])  # fmt: skip
def test_triton_version_gate(version, has, monkeypatch):
    monkeypatch.setattr(importlib.metadata, "version", lambda name: version)
    assert pdl.triton_has_pdl() is has


def test_executor_uses_pdl_only_where_launch_options_allow(rng, device, monkeypatch):
    from tests.cuda.test_fused import tail_unet
    from tests.models import random_model

    model = random_model(tail_unet(9, 16, 24, 32), rng)
    executor = CudaExecutor(model, device=device, tune=False, engine="triton")
    capability = executor._capability
    hopper = capability is not None and capability >= (9, 0) and not interpreting()
    assert executor.pdl == (ON if hopper and pdl.triton_has_pdl() else {})
    monkeypatch.setenv(pdl.PDL_ENV_VAR, "off")
    assert CudaExecutor(model, device=device, tune=False, engine="triton").pdl == {}


# Compiles one kernel for sm_90 (no GPU needed: Triton's compiler and ptxas) in a fresh
# process, so that the interpreter these tests set up elsewhere is not in the way.
_PROBE = textwrap.dedent("""
    import triton
    from triton.backends.compiler import GPUTarget
    from oidn_gpu.backends.cuda import triton_kernels as tk
    sig = {"bins_ptr": "*fp32", "count": "i32", "scale_ptr": "*fp32", "KEY": "constexpr",
           "EPS": "constexpr", "BLOCK": "constexpr", "PDL": "constexpr"}
    src = triton.compiler.ASTSource(fn=tk.autoexposure_scale_kernel, signature=sig,
        constexprs={"KEY": 0.18, "EPS": 1e-8, "BLOCK": 128, "PDL": True})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"launch_pdl": True})
    print(int(compiled.metadata.launch_pdl))
    print(compiled.asm["ptx"])
""")


def test_pdl_kernel_waits_before_any_global_access():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    flag, ptx = done.stdout.split("\n", 1)
    assert flag == "1"  # launched with the programmatic-serialization attribute
    wait = ptx.index("griddepcontrol.wait")
    dependents = ptx.index("griddepcontrol.launch_dependents")
    accesses = [ptx.index(op) for op in ("ld.global", "st.global") if op in ptx]
    assert accesses and wait < dependents < min(accesses)


@pytest.mark.cuda_device
@pytest.mark.parametrize("weights", ["rt_hdr_alb_nrm", "rt_hdr_alb_nrm_small"])
def test_frames_are_the_same_bits_with_and_without_pdl(weights, weights_dir, rng, monkeypatch):
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("programmatic dependent launch needs compute capability 9.0")
    model = load_model(weights_dir / f"{weights}.tza")
    height, width = 200, 328
    color = (rng.random((height, width, 3)) ** 3 * 6).astype(np.float32)
    albedo = rng.random((height, width, 3)).astype(np.float32)
    normal = (rng.random((height, width, 3)) * 2 - 1).astype(np.float32)
    mode = process.mode_for("RT", hdr=True)
    frames = {}
    for value in ("off", "on"):
        monkeypatch.setenv(pdl.PDL_ENV_VAR, value)
        executor = CudaExecutor(model, device="cuda", tune=False, engine="triton")
        assert bool(executor.pdl) == (value == "on")
        with CudaDenoiser(executor) as den:
            assert den.use_graphs
            frames[value] = [den.denoise(color, albedo, normal, mode=mode, autoexposure=True)
                              for _ in range(3)]
    for frame in frames["on"] + frames["off"][1:]:
        np.testing.assert_array_equal(frame, frames["off"][0])
