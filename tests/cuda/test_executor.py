"""The CUDA executor's kernels against the reference backend (fp32 NumPy).

Every conv kind of the Triton path (plain, conv+pool, decoder with upsampled and
skip sources, the final layer) runs inside small U-Nets on random inputs; the
tile options (M, N and K tiles, several K chunks, masked channel tails) are
forced per test. Through Triton's interpreter without a GPU, on the GPU when
there is one.
"""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.backends.base import NetworkExecutor
from oidn_gpu.backends.cuda import layout
from oidn_gpu.backends.cuda import triton_kernels as tk
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.tuning import TileConfig, candidates
from oidn_gpu.backends.reference import ReferenceExecutor
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError, MissingDependencyError
from oidn_gpu.graph.passes import optimize
from oidn_gpu.model.unet import load_model
from tests.cuda.conftest import rel_l2
from tests.models import random_model
from tests.unit.test_reference_backend import tiny_unet

FP16_REL_L2 = 2e-3
BF16_REL_L2 = 1.5e-2  # 8-bit mantissa activations


def _check(executor: CudaExecutor, model, x: np.ndarray, bound: float) -> float:
    expected = ReferenceExecutor(model).run(x)
    actual = executor.run(x)
    assert actual.shape == expected.shape and actual.dtype == np.float32
    assert np.isfinite(actual).all()
    err = rel_l2(actual, expected)
    assert err <= bound, err
    return err


@pytest.mark.parametrize(
    ("channels", "size"),
    [
        ((9, 16, 24, 32), (16, 32)),  # input of 9 (padded to 16), K tails of 24
        ((6, 32, 48, 40), (32, 16)),  # skip of 6, 48 = one 32-chunk + masked tail
        ((3, 20, 36, 64), (16, 48)),  # N not a multiple of 16
    ],
)
def test_tiny_unet_matches_reference(channels, size, rng, device):
    graph = tiny_unet(*channels)
    model = random_model(graph, rng)
    x = rng.random((channels[0], *size), dtype=np.float32)
    with CudaExecutor(model, device=device, tune=False, engine="triton") as executor:
        assert isinstance(executor, NetworkExecutor)
        _check(executor, model, x, FP16_REL_L2)


@pytest.mark.parametrize(
    "tile",
    [
        TileConfig(64, 32, 16, 4, 2),  # one tap per K step everywhere
        TileConfig(64, 16, 64, 4, 3),  # several N programs; 4 taps of 16 / 2 of 32 per step
        TileConfig(32, 64, 32, 2, 2),  # 2 taps of 16 per K step
        TileConfig(32, 64, 128, 4, 2),  # 8 taps of 16 / 4 taps of 32 per step, masked tail
    ],
)
def test_forced_tiles_match_reference(tile, rng, device):
    graph = tiny_unet(9, 24, 40, 48)
    model = random_model(graph, rng)
    x = rng.random((9, 16, 16), dtype=np.float32)
    executor = CudaExecutor(model, device=device, tune=False, engine="triton")
    prep = executor.prepare(16, 16)
    for launch in executor.launches:
        prep.configs[launch.name] = tile
    _check(executor, model, x, FP16_REL_L2)


def test_two_taps_of_64_channels_per_k_step(rng, device):
    graph = tiny_unet(9, 64, 40, 64)  # 64-channel sources, K steps of 128
    model = random_model(graph, rng)
    x = rng.random((9, 16, 16), dtype=np.float32)
    executor = CudaExecutor(model, device=device, tune=False, engine="triton")
    prep = executor.prepare(16, 16)
    for launch in executor.launches:
        prep.configs[launch.name] = TileConfig(32, 64, 128, 4, 2)
    _check(executor, model, x, FP16_REL_L2)


@pytest.mark.cuda_device  # Triton's interpreter mis-stores bfloat16 (NumPy has no bf16)
def test_bf16(rng, device):
    graph = tiny_unet(9, 16, 24, 32)
    model = random_model(graph, rng)
    x = rng.random((9, 16, 16), dtype=np.float32)
    with CudaExecutor(
        model, device=device, precision="bf16", tune=False, engine="triton"
    ) as executor:
        _check(executor, model, x, BF16_REL_L2)


def test_official_weights_match_reference(weights_dir, rng, device):
    model = load_model(weights_dir / "rt_hdr_alb_nrm_small.tza")
    x = rng.random((9, 32, 32), dtype=np.float32)
    with CudaExecutor(model, device=device, tune=False, engine="triton") as executor:
        _check(executor, model, x, FP16_REL_L2)


def test_cudnn_path_matches_reference(rng, device):
    graph = tiny_unet(9, 16, 24, 32)
    model = random_model(graph, rng)
    x = rng.random((9, 16, 32), dtype=np.float32)
    with CudaExecutor(model, device=device, engine="cudnn") as executor:
        assert executor.engine == "cudnn" and executor.fallback is None
        assert "cudnn" in executor.info().device
        _check(executor, model, x, FP16_REL_L2)


def test_cudnn_fallback_without_triton(monkeypatch, rng, device):
    monkeypatch.setattr(tk, "UNAVAILABLE", "triton is not importable (ImportError: test)")
    model = random_model(tiny_unet(9, 16, 24, 32), rng)
    with CudaExecutor(model, device=device) as executor:
        assert executor.engine == "cudnn"
        assert "fallback: triton is not importable" in executor.info().device
        assert executor.info().kernels["e0"] == "cudnn-conv2d+maxpool"
        _check(executor, model, rng.random((9, 16, 16), dtype=np.float32), FP16_REL_L2)
    with pytest.raises(MissingDependencyError, match="engine 'triton' is unavailable"):
        CudaExecutor(model, device=device, engine="triton")


def test_launches_of_the_official_network(weights_dir):
    model = load_model(weights_dir / "rt_hdr_alb_nrm.tza")
    launches = layout.launches(optimize(model.graph, channel_align=1))
    by_name = {launch.name: launch for launch in launches}
    assert len(launches) == len(model.convs)
    assert [n for n, launch in by_name.items() if launch.pool] == [
        "enc_conv1",
        "enc_conv2",
        "enc_conv3",
        "enc_conv4",
    ]
    dec1a = by_name["dec_conv1a"]
    assert [(s.channels, s.upsample) for s in dec1a.sources] == [(64, True), (9, False)]
    assert dec1a.sources[1].stored == 16 and dec1a.parity
    assert dec1a.b_base == 16 * 64 and dec1a.weight_rows == 16 * 64 + 9 * 64
    assert not any(launch.parity for launch in launches if launch.name.startswith("enc"))
    assert launches[-1].final and launches[-1].out_channels == 3
    for launch in launches:
        if not launch.final:
            assert launch.out_stored % layout.CHANNEL_ALIGN == 0
        assert candidates(launch)[0].block_n >= min(launch.out_channels, 16)


def test_packed_weights_place_every_tap(rng):
    graph = tiny_unet(9, 16, 24, 32)
    model = random_model(graph, rng)
    launch = next(lc for lc in layout.launches(optimize(graph, channel_align=1)) if lc.name == "d0")
    weight, bias = layout.pack_weights(launch, model.convs["d0"])
    w = model.convs["d0"].weight  # [O, I, 3, 3], sources: upsampled d1 (24) then input (9)
    assert launch.parity and weight.shape == (16 * 64 + 9 * 64, 128)
    # source B (the input), tap (kh, kw) = (1, 2), channel 4
    np.testing.assert_array_equal(weight[16 * 64 + 5 * 64 + 4, :3], w[:, 24 + 4, 1, 2])
    # source A, output parity (py, px) = (0, 1), 2x2 tap (1, 1): kernel rows 1, 2 x column 2
    summed = w[:, 5, 1, 2] + w[:, 5, 2, 2]
    np.testing.assert_allclose(weight[(4 * 1 + 3) * 64 + 5, :3], summed, rtol=1e-6)
    # parity (1, 0), tap (0, 0): kernel rows 0, 1 x column 0
    summed = w[:, 7, 0, 0] + w[:, 7, 1, 0]
    np.testing.assert_allclose(weight[(4 * 2 + 0) * 64 + 7, :3], summed, rtol=1e-6)
    assert not weight[: 16 * 64].reshape(16, 64, 128)[:, 24:].any()
    assert not weight[16 * 64 :].reshape(9, 64, 128)[:, 9:].any() and not weight[:, 3:].any()
    np.testing.assert_array_equal(bias[:3], model.convs["d0"].bias)
    assert not bias[3:].any()


def test_bad_input_and_options(rng, device):
    model = random_model(tiny_unet(9, 16, 24, 32), rng)
    with pytest.raises(InvalidArgumentError, match="precision 'fp8'"):
        CudaExecutor(model, device=device, precision="fp8")
    with pytest.raises(InvalidArgumentError, match="engine 'opencl'"):
        CudaExecutor(model, device=device, engine="opencl")
    executor = CudaExecutor(model, device=device, tune=False, engine="triton")
    with pytest.raises(InvalidArgumentError, match=r"expected \(9, H, W\)"):
        executor.run(np.zeros((3, 16, 16), np.float32))
    with pytest.raises(InvalidArgumentError, match="multiple of 4"):
        executor.run(np.zeros((9, 18, 16), np.float32))
    executor.close()
    with pytest.raises(InvalidOperationError, match="closed"):
        executor.run(np.zeros((9, 16, 16), np.float32))


def test_resources_and_info(rng, device):
    model = random_model(tiny_unet(9, 16, 24, 32), rng)
    executor = CudaExecutor(model, device=device, tune=False, shape_cache_size=1, engine="triton")
    executor.prewarm([(16, 16)])
    first = executor.resources()
    assert first.shapes == ((16, 16),) and first.byte_size > 0
    executor.prewarm([(32, 16)])
    assert executor.resources().shapes == ((32, 16),)
    info = executor.info()
    assert info.backend == "cuda" and info.precision == "fp16"
    assert info.kernels["e0"].startswith("triton-igemm+maxpool")
    assert info.kernels["d0"].startswith("upsample+concat+triton-igemm-2x2parity+output")
    executor.close()
    assert executor.resources().byte_size == 0
