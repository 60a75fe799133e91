"""The wgpu denoise with autoexposure on the GPU, against Intel OIDN 2.5.1 and the host scale.

An HDR `Denoiser` without ``input_scale`` on the wgpu backend computes the scale
from the uploaded colour on the GPU (`kernels.autoexposure`); the image must
still match OIDN's CPU device (relative L2 <= 1e-5 in fp32) and the scale it
reports must be the host's within the GPU tolerance
(tests/autoexposure_tolerance.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.errors import NonFiniteInputWarning
from oidn_gpu.image import autoexposure as host_autoexposure
from tests import datasets
from tests.autoexposure_tolerance import autoexposure_tolerance
from tests.compare import assert_close
from tests.oracle import oidn_denoise

pytestmark = [pytest.mark.gpu, pytest.mark.oracle]

PARITY = 1e-5  # fp32 output against OIDN's CPU device, relative L2


def test_gpu_autoexposure_denoise_matches_oidn_on_a_scene_crop() -> None:
    crop = datasets.scene_crop("cornell_glossy", ("color_4spp", "albedo", "normal"))
    color = crop["color_4spp"][:64, :80] * np.float32(30.0)  # a bright frame
    albedo, normal = crop["albedo"][:64, :80], crop["normal"][:64, :80]
    theirs = oidn_denoise(color, albedo, normal, hdr=True)
    with oidn_gpu.Denoiser(hdr=True, backend="wgpu", precision="fp32") as den:
        ours = den.denoise(color, albedo, normal)
        scale = den.info().input_scale
    host = host_autoexposure.autoexposure(color)
    assert abs(scale - host) <= autoexposure_tolerance(host) * host, (scale, host)
    assert_close(ours, theirs, rel_l2_tol=PARITY, label="wgpu fp32, GPU autoexposure")


def test_gpu_autoexposure_follows_each_frame_and_a_fixed_scale_after_it() -> None:
    rng = np.random.default_rng(4)
    dim = (rng.random((40, 48, 3)) * 0.01).astype(np.float32)
    bright = (rng.random((40, 48, 3)) * 500).astype(np.float32)
    with (
        oidn_gpu.Denoiser(hdr=True, backend="wgpu", precision="fp32", quality="fast") as den,
        oidn_gpu.Denoiser(
            hdr=True, backend="wgpu", precision="fp32", quality="fast", input_scale=0.5
        ) as fixed,
    ):
        for image in (dim, bright, dim):
            out = den.denoise(image)
            host = host_autoexposure.autoexposure(image)
            scale = den.info().input_scale
            assert abs(scale - host) <= autoexposure_tolerance(host) * host
            assert_close(
                out,
                oidn_denoise(image, hdr=True, quality="fast"),
                rel_l2_tol=PARITY,
                label="wgpu fp32 fast",
            )
        out = fixed.denoise(bright)
        assert fixed.info().input_scale == 0.5
        theirs = oidn_denoise(bright, hdr=True, quality="fast", input_scale=0.5)
        assert_close(out, theirs, rel_l2_tol=PARITY, label="fixed scale")


def test_an_infinite_pixel_blackens_the_output_with_a_warning_as_on_the_host() -> None:
    color = np.ones((32, 32, 3), np.float32)
    color[2, 3] = np.inf
    color[2, 4] = np.inf
    with oidn_gpu.Denoiser(hdr=True, backend="wgpu", precision="fp32", quality="fast") as den:
        with pytest.warns(NonFiniteInputWarning, match="autoexposure is 0"):
            out = den.denoise(color)
        assert den.info().input_scale == 0.0
    assert not np.any(out)
