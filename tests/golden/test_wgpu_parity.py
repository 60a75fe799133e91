"""The wgpu backend end to end (GPU input pass, network, output pass) against Intel OIDN 2.5.1.

Runs on lavapipe in CI (small crops: it is a CPU rasterizer) and on real GPUs.
fp32 keeps the 1e-5 relative-L2 contract. fp16 stores activations in half (as
OIDN's GPU devices do, oidn-semantics.md section 7), so it is compared with the
looser fp16 budget and must stay finite.
"""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from tests import datasets
from tests.compare import assert_close
from tests.golden.test_oidn_parity import hdr_image, ldr_image
from tests.oracle import oidn_denoise

pytestmark = [pytest.mark.oracle, pytest.mark.gpu]

# fp16 end to end: half activations through 16 layers, every product summed in f32 (the
# default accumulation); the budget of the numerical contract for fp16 paths is 2e-3 relative
# L2. On the 96 x 112 scene crops (real renders, the default weights) it measures 0.66e-3 to
# 0.98e-3 relative L2 in image space on lavapipe (tests/golden/test_fp16_accuracy.py).
FP16_SCENE_TOL = 2e-3

# 48 x 64 px of each scene crop in tests/data/scenes (rows 232:280, columns 200:264 of the
# scene): lavapipe is a CPU rasterizer.
CROP = (slice(32, 80), slice(50, 114))


def _crop(scene: str, window: tuple[slice, slice] = CROP) -> list[np.ndarray]:
    images = datasets.scene_crop(scene)
    return [np.ascontiguousarray(images[k][window]) for k in ("color_4spp", "albedo", "normal")]


@pytest.mark.parametrize("scene", datasets.SCENES)
def test_wgpu_fp32_scene_crop_matches_oidn(scene: str) -> None:
    color, albedo, normal = _crop(scene)
    theirs = oidn_denoise(color, albedo, normal, hdr=True)
    with oidn_gpu.Denoiser(hdr=True, backend="wgpu", precision="fp32") as den:
        ours = den.denoise(color, albedo, normal)
        info = den.info()
    assert info is not None and info.backend == "wgpu" and info.precision == "fp32"
    assert info.kernel_fallbacks == {}
    assert_close(ours, theirs, rel_l2_tol=1e-5, label=f"wgpu fp32 {scene}")


def test_gemm_options_that_cannot_run_still_match_oidn() -> None:
    """Forced GEMM options over the register budget: the filter warns, reports the layers
    that fell back to the direct conv, and the image is still OIDN's."""
    color = _crop("textured_checker", (slice(32, 64), slice(50, 98)))[0]
    theirs = oidn_denoise(color, hdr=True)
    spilled = {
        "tile_policy": "fixed",
        "address_mode": "base-offset",
        "rows_per_thread": 8,
        "workgroup_size": (4, 16),
        "cols_per_thread": 4,
        "k_tile": 16,
    }
    with oidn_gpu.Denoiser(hdr=True, backend="wgpu", precision="fp32", gemm=spilled) as den:
        with pytest.warns(RuntimeWarning, match="registers per invocation"):
            ours = den.denoise(color)
        info = den.info()
    assert info is not None and info.kernel_fallbacks
    assert all("registers" in reason for reason in info.kernel_fallbacks.values())
    assert_close(ours, theirs, rel_l2_tol=1e-5, label="wgpu fp32 over-budget GEMM options")


@pytest.mark.parametrize("scene", datasets.SCENES)
def test_wgpu_fp16_scene_crop_is_close_to_oidn(scene: str) -> None:
    color, albedo, normal = _crop(scene)
    theirs = oidn_denoise(color, albedo, normal, hdr=True)
    with oidn_gpu.Denoiser(hdr=True, backend="wgpu", precision="fp16") as den:
        ours = den.denoise(color, albedo, normal)
        info = den.info()
    assert info is not None and info.backend == "wgpu" and info.precision == "fp16"
    assert np.isfinite(ours).all()
    assert_close(ours, theirs, rel_l2_tol=FP16_SCENE_TOL, label=f"wgpu fp16 {scene}")


# The GEMM variants swept for large GPUs (docs/benchmarks.md): paired shared loads and
# register prefetch keep every product and its place in the sum, so they give the default
# options' bits; the image stays as close to OIDN as the default's.
FAST_GEMM = {
    "tile_policy": "balanced",
    "shared_load": "pair",
    "shared_layout": "padded",
    "prefetch": "registers",
}


def test_wgpu_fp16_gemm_variants_give_the_default_image_on_every_scene() -> None:
    default = oidn_gpu.Denoiser(hdr=True, backend="wgpu", precision="fp16")
    fast = oidn_gpu.Denoiser(hdr=True, backend="wgpu", precision="fp16", gemm=FAST_GEMM)
    with default, fast:
        for scene in datasets.SCENES:
            color, albedo, normal = _crop(scene, (slice(32, 64), slice(50, 98)))
            theirs = oidn_denoise(color, albedo, normal, hdr=True)
            ours = default.denoise(color, albedo, normal)
            np.testing.assert_array_equal(fast.denoise(color, albedo, normal), ours, scene)
            assert_close(ours, theirs, rel_l2_tol=FP16_SCENE_TOL, label=f"wgpu fp16 {scene}")
        assert fast.info() is not None and fast.info().kernel_fallbacks == {}


@pytest.mark.parametrize(
    ("label", "options"),
    [
        ("ldr", {}),
        ("ldr srgb 1-channel", {"srgb": True, "channels": 1}),
        ("lightmap", {"filter_type": "RTLightmap"}),
        ("normal only", {"normal_only": True}),
    ],
)
def test_wgpu_fp32_modes_match_oidn(label: str, options: dict, rng: np.random.Generator) -> None:
    options = dict(options)
    channels = options.pop("channels", 3)
    normal_only = options.pop("normal_only", False)
    if options.get("filter_type") == "RTLightmap":
        img = hdr_image(rng, 24, 40)
    else:
        img = ldr_image(rng, 24, 40)[:, :, :channels]
    if normal_only:
        img = img * 2 - 1
        theirs = oidn_denoise(None, None, img, quality="fast")
        ours = oidn_gpu.denoise(normal=img, quality="fast", backend="wgpu", precision="fp32")
    else:
        theirs = oidn_denoise(img, quality="fast", **options)
        ours = oidn_gpu.denoise(img, quality="fast", backend="wgpu", precision="fp32", **options)
    assert_close(ours, theirs, rel_l2_tol=1e-5, label=f"wgpu fp32 {label}")
