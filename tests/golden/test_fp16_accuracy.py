"""wgpu fp16 within 2e-3 relative L2 of Intel OIDN 2.5.1 CPU on every scene crop.

The crops of tests/data/scenes (96 x 112 px of the four Mitsuba scenes, and 112 x 128 px of
the caustics frame of scripts/render_caustics.py: a glass sphere's caustic under a small light
of radiance 4000, fireflies in the thousands) run end to end through `oidn_gpu.Denoiser`
(hdr, albedo and normal, autoexposure on the GPU) on the test adapter (lavapipe in CI). The
fp16 kernels keep f16 storage and f16 weights and sum every product in f32 by default
(``accumulation="f32"``); ``accumulation="f16-partials"`` keeps the faster kernels that sum 32
products per f16 partial, about twice as far from OIDN (bench/fp16_accumulation.py, and
docs/benchmarks.md, "fp16 accumulation"). Large GPUs run the decoder convs in the parity form
and sum in f16 chains of 16 products, the first and final layers in f32
(`gemm.LARGE_GPU_OPTIONS`): its arithmetic runs here through the same options.
"""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from tests import datasets
from tests.compare import assert_close
from tests.oracle import oidn_denoise

pytestmark = [pytest.mark.oracle, pytest.mark.gpu]

SCENES = (*datasets.SCENES, "caustics")
FP16_TOL = 2e-3


def _images(scene: str) -> list[np.ndarray]:
    images = datasets.scene_crop(scene)
    return [np.ascontiguousarray(images[k]) for k in ("color_4spp", "albedo", "normal")]


def _rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a64 - b64) / np.linalg.norm(b64))


@pytest.fixture(scope="module")
def fp16_denoiser():
    with oidn_gpu.Denoiser(hdr=True, backend="wgpu", precision="fp16") as denoiser:
        yield denoiser


@pytest.mark.parametrize("scene", SCENES)
def test_wgpu_fp16_is_within_2e3_of_oidn_on_every_scene_crop(scene: str, fp16_denoiser) -> None:
    color, albedo, normal = _images(scene)
    theirs = oidn_denoise(color, albedo, normal, hdr=True)
    ours = fp16_denoiser.denoise(color, albedo, normal)
    info = fp16_denoiser.info()
    assert info is not None and info.precision == "fp16" and info.kernel_fallbacks == {}
    assert np.isfinite(ours).all()
    assert_close(ours, theirs, rel_l2_tol=FP16_TOL, label=f"wgpu fp16 {scene}")


def test_f16_partials_are_the_faster_kernels_and_farther_from_oidn(fp16_denoiser) -> None:
    color, albedo, normal = _images("cornell_glossy")
    theirs = oidn_denoise(color, albedo, normal, hdr=True)
    accurate = fp16_denoiser.denoise(color, albedo, normal)
    with oidn_gpu.Denoiser(
        hdr=True, backend="wgpu", precision="fp16", accumulation="f16-partials"
    ) as fast:
        partials = fast.denoise(color, albedo, normal)
    assert np.isfinite(partials).all()
    # measured on lavapipe: 2.56e-3 against 0.98e-3 with the f32 sums
    assert _rel_l2(partials, theirs) > 1.5 * _rel_l2(accurate, theirs)
    assert_close(partials, theirs, rel_l2_tol=4e-3, label="wgpu fp16 f16-partials")


def test_the_large_gpu_default_sums_the_final_layer_in_f32() -> None:
    """The large-GPU fp16 options on the test adapter: the decoder parity form, f16 chains of
    8 products, the first and final layers in f32: another image than the partials alone,
    closer to OIDN (docs/benchmarks.md, "fp16 accumulation: the decoder parity form")."""
    from oidn_gpu.kernels.gemm import LARGE_GPU_OPTIONS
    from oidn_gpu.kernels.spec import Precision

    large = LARGE_GPU_OPTIONS[Precision.FP16]
    assert large.accumulation.value == "f16-chains"
    assert large.decoder_form.value == "parity"
    assert large.final_accumulation is not None and large.final_accumulation.value == "f32"
    assert large.input_accumulation is not None and large.input_accumulation.value == "f32"
    color, albedo, normal = _images("cornell_glossy")
    theirs = oidn_denoise(color, albedo, normal, hdr=True)
    outputs = {}
    for name, gemm in (("large", large), ("partials", {"accumulation": "f16-partials"})):
        with oidn_gpu.Denoiser(hdr=True, backend="wgpu", precision="fp16", gemm=gemm) as d:
            outputs[name] = d.denoise(color, albedo, normal)
    assert not np.array_equal(outputs["large"], outputs["partials"])
    # measured on lavapipe: 1.45e-3, and 2.56e-3 with the partials alone
    assert _rel_l2(outputs["large"], theirs) <= 0.8 * _rel_l2(outputs["partials"], theirs)
    assert_close(outputs["large"], theirs, rel_l2_tol=2e-3, label="wgpu fp16 large-GPU default")
