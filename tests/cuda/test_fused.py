"""The fused network tail (last hidden conv + final conv + output pass in one kernel).

Against the per-layer kernels (``fused=False``, the oracle) and the reference backend, on
random weights and inputs, at sizes that are not multiples of the tail's tile, with tiles
forced so that programs walk several tiles, chunks and taps per K step. Through Triton's
interpreter without a GPU (tiny sizes), on the GPU when there is one.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pytest
import torch

from oidn_gpu.backends.cuda import fusion
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.fusion import FUSIONS, fused_tail
from oidn_gpu.backends.cuda.runner import CudaDenoiser
from oidn_gpu.backends.cuda.tuning import (
    DEFAULT_TAIL,
    TailConfig,
    TileConfig,
    Tuner,
    project_signature,
    tail_candidates,
)
from oidn_gpu.backends.reference import ReferenceExecutor
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.graph import ir
from oidn_gpu.image import process
from oidn_gpu.image.tiling import MIN_TILE_ALIGNMENT, plan_tiles
from oidn_gpu.model.unet import load_model
from tests.cuda.conftest import rel_l2
from tests.models import random_model
from tests.unit.test_reference_backend import tiny_unet

FP16_REL_L2 = 2e-3
FUSED_VS_LAYERS = 1e-3  # the same fp16 hidden values; only the final sums' order may differ
# `project` rounds the final conv's per-tap partial sums to fp16 once more; after the output
# pass's inverse PU transfer (which amplifies the bright end) ~1.4e-3 is seen through Triton's
# interpreter and 4.9e-3 on an H200, whose fp16 products and sums round where the interpreter
# keeps float32 (the random tiny network's outputs reach 5e6; the official weights measure
# 1.3e-4 on the H200 at full size: docs/benchmarks.md).
PROJECT_VS_LAYERS = 8e-3 if torch.cuda.is_available() else 3e-3


def tail_unet(ic: int = 9, c0: int = 16, c1: int = 24, mid: int = 20) -> ir.Graph:
    """One pool level and the OIDN decoder's full-resolution end: d1 -> d1b -> d0."""
    nodes = (
        ir.Conv("e0", "input", ic, c0),
        ir.Pool("pool1", "e0", c0),
        ir.Conv("m", "pool1", c0, c1, ir.Activation.NONE),
        ir.Upsample("up1", "m", c1),
        ir.Concat("concat1", ("up1", "input"), c1 + ic),
        ir.Conv("d1", "concat1", c1 + ic, c1),
        ir.Conv("d1b", "d1", c1, mid),
        ir.Conv("d0", "d1b", mid, 3, ir.Activation.NONE),
    )
    return ir.Graph("input", ic, nodes, "d0")


def _force(executor: CudaExecutor, height: int, width: int, tail: TailConfig) -> None:
    prep = executor.prepare(height, width)
    executor.set_tail_config(prep, tail)


@pytest.mark.parametrize(
    ("tail", "size", "channels"),
    [
        (DEFAULT_TAIL, (18, 34), (9, 16, 24, 20)),  # one tile wide, two tiles high
        (TailConfig(8, 8, 32, 16, 16, 4, 2, 1), (12, 14), (9, 16, 24, 20)),  # 2 chunks, loops
        (TailConfig(4, 16, 16, 64, 64, 4, 2, 1), (6, 16), (6, 16, 32, 32)),  # 2 taps per K
        (TailConfig(8, 16, 128, 128, 32, 4, 2, 2), (10, 36), (3, 16, 64, 64)),  # 2 taps of 64
    ],
)
def test_fused_tail_matches_layers_and_reference(tail, size, channels, rng, device):
    model = random_model(tail_unet(*channels), rng)
    x = rng.random((channels[0], *size), dtype=np.float32)
    expected = ReferenceExecutor(model).run(x)
    layers = CudaExecutor(model, device=device, tune=False, engine="triton", fused=False)
    fused = CudaExecutor(model, device=device, tune=False, engine="triton", fused="tail")
    assert layers.tail is None and fused.tail is not None
    assert [getattr(s, "name", None) for s in fused.steps][-1] == "d1b+d0"
    _force(fused, *size, tail)
    oracle, actual = layers.run(x), fused.run(x)
    assert np.isfinite(actual).all()
    assert rel_l2(actual, oracle) <= FUSED_VS_LAYERS
    assert rel_l2(actual, expected) <= FP16_REL_L2


@pytest.mark.parametrize(
    ("size", "channels", "tile", "z_fp32"),
    [
        ((14, 22), (9, 16, 24, 32), TileConfig(64, 32, 32, 4, 2), True),
        ((10, 18), (6, 16, 64, 64), TileConfig(32, 64, 128, 4, 2), False),  # 2 taps of 64
        ((6, 34), (3, 16, 32, 16), TileConfig(64, 16, 16, 4, 2), True),  # 16 hidden channels
    ],
)
def test_projected_tail_matches_layers_and_reference(
    size, channels, tile, z_fp32, rng, device, monkeypatch
):
    monkeypatch.setattr(fusion, "TAIL_Z_FP32", z_fp32)
    model = random_model(tail_unet(*channels), rng)
    x = rng.random((channels[0], *size), dtype=np.float32)
    expected = ReferenceExecutor(model).run(x)
    layers = CudaExecutor(model, device=device, tune=False, engine="triton", fused=False)
    fused = CudaExecutor(model, device=device, tune=False, engine="triton")
    assert fused.fusion == "project" and fused.tail is not None
    fused.prepare(*size).configs[project_signature(fused.tail.hidden)] = tile
    oracle, actual = layers.run(x), fused.run(x)
    assert np.isfinite(actual).all()
    assert rel_l2(actual, oracle) <= FUSED_VS_LAYERS
    assert rel_l2(actual, expected) <= FP16_REL_L2


@pytest.mark.parametrize("fused", ["project", "tail"])
def test_fused_tail_through_the_output_pass_and_tiles(fused, rng, device):
    model = random_model(tail_unet(), rng)
    color = (rng.random((12, 20, 3)) ** 3 * 6).astype(np.float32)
    albedo = rng.random((12, 20, 3)).astype(np.float32)
    normal = (rng.random((12, 20, 3)) * 2 - 1).astype(np.float32)
    mode = process.mode_for("RT", hdr=True, input_scale=0.5)
    plan = plan_tiles(12, 20, overlap=0, alignment=MIN_TILE_ALIGNMENT, max_tile_px=None)
    outs = []
    for option in (False, fused):
        executor = CudaExecutor(model, device=device, tune=False, engine="triton", fused=option)
        if option == "tail":
            _force(executor, plan.tile_h, plan.tile_w, TailConfig(8, 16, 64, 32, 32, 4, 2, 1))
        with CudaDenoiser(executor) as denoiser:
            outs.append(
                denoiser.denoise(color, albedo, normal, mode=mode, plan=plan, out_channels=1)
            )
    assert outs[1].shape == (12, 20, 1) and np.isfinite(outs[1]).all()
    bound = PROJECT_VS_LAYERS if fused == "project" else FUSED_VS_LAYERS
    assert rel_l2(outs[1], outs[0]) <= bound


def test_fused_tail_bf16(rng, device):
    model = random_model(tail_unet(), rng)
    x = rng.random((9, 16, 30), dtype=np.float32)
    layers = CudaExecutor(
        model, device=device, tune=False, engine="triton", precision="bf16", fused=False
    )
    default = CudaExecutor(model, device=device, tune=False, engine="triton", precision="bf16")
    assert default.fusion == "off"  # no faster bf16 tail of the same accuracy
    for option in FUSIONS[:2]:
        fused = CudaExecutor(
            model, device=device, tune=False, engine="triton", precision="bf16", fused=option
        )
        if option == "project":  # bf16 partial sums would add 8x fp16's rounding
            assert fused.prepare(16, 30).scratch.dtype == torch.float32
        assert rel_l2(fused.run(x), layers.run(x)) <= 8 * FUSED_VS_LAYERS


def test_which_tails_fuse(weights_dir, rng, device):
    official = CudaExecutor(
        load_model(weights_dir / "rt_hdr_alb_nrm.tza"), device=device, tune=False, engine="triton"
    )
    assert official.tail is not None and official.tail.name == "dec_conv1b+dec_conv0"
    info = official.kernel_names()
    assert info["dec_conv0"] == info["dec_conv1b"] and "fused" in info["dec_conv0"]
    assert "fused" not in info["dec_conv1a"]
    # a final conv of an upsampled and concatenated value: not fusable
    model = random_model(tiny_unet(9, 16, 24, 32), rng)
    executor = CudaExecutor(model, device=device, tune=False, engine="triton")
    assert fused_tail(executor.launches) is None and executor.steps == executor.launches
    # a hidden conv wider than the fused kernel holds: not fused
    wide = random_model(tail_unet(mid=80), rng)
    assert CudaExecutor(wide, device=device, tune=False, engine="triton").tail is None


def test_fusion_option_and_environment(monkeypatch, rng, device):
    model = random_model(tail_unet(), rng)
    monkeypatch.setenv("OIDN_GPU_CUDA_FUSED", "off")
    assert CudaExecutor(model, device=device, tune=False, engine="triton").tail is None
    assert CudaExecutor(model, device=device, tune=False, engine="triton", fused=True).tail
    monkeypatch.setenv("OIDN_GPU_CUDA_FUSED", "tail")
    assert CudaExecutor(model, device=device, tune=False, engine="triton").fusion == "tail"
    monkeypatch.delenv("OIDN_GPU_CUDA_FUSED")
    assert CudaExecutor(model, device=device, tune=False, engine="triton").fusion == "project"
    with pytest.raises(InvalidArgumentError, match="fused 'halo' is unknown"):
        CudaExecutor(model, device=device, tune=False, engine="triton", fused="halo")


def test_tuning_cache_keeps_tail_tiles(tmp_path):
    path = tmp_path / "tuning.json"
    tuner = Tuner("gpu", path)
    tail = tail_candidates()[2]
    tile = TileConfig(64, 32, 16, 4, 2)
    assert tuner.choose("tail:x", (tail,), lambda config: 1.0) == tail
    assert tuner.choose("16->32@0", (tile,), lambda config: 1.0) == tile
    assert json.loads(path.read_text())["gpu"]["tail:x"] == asdict(tail)
    again = Tuner("gpu", path)
    assert again.cached("tail:x") == tail and again.cached("16->32@0") == tile


def test_prepared_shapes_are_kept(rng, device):
    model = random_model(tail_unet(), rng)
    for option in FUSIONS:
        executor = CudaExecutor(model, device=device, tune=False, engine="triton", fused=option)
        first = executor.prepare(16, 30)
        assert executor.prepare(16, 30) is first
        assert executor.resources().shapes == ((16, 30),)
        if option == "project":  # the partial sums live in the hidden value's memory
            hidden = first.views[executor.tail.hidden.value]
            assert first.scratch.untyped_storage().data_ptr() == (
                hidden.untyped_storage().data_ptr()
            )
            assert first.byte_size == sum(int(s.numel()) for s in first.slots)


def test_project_columns_hold_every_tap_once_taps_0_to_7_as_aligned_vectors():
    """`fusion.z_column`: the 27 (tap, channel) partial sums in 27 distinct columns of 32;
    taps 0-7 as 4-aligned runs of 3 (one vector load in `tap_sum_kernel`)."""
    columns = [fusion.z_column(t, o) for t in range(9) for o in range(3)]
    assert len(set(columns)) == 27 and all(0 <= c < 32 for c in columns)
    for t in range(8):
        assert [fusion.z_column(t, o) for o in range(3)] == [4 * t, 4 * t + 1, 4 * t + 2]
    assert {fusion.z_column(8, o) for o in range(3)} == {3, 7, 11}
