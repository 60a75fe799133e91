"""A first wgpu image on this device (lavapipe, one of the devices whose default kernels
ship rendered): every kernel text comes from the shipped file, and the image has the
same bits as with every kernel rendered from the templates."""

from __future__ import annotations

import numpy as np

import oidn_gpu
from oidn_gpu.kernels import shipped_texts


def _first_image() -> np.ndarray:
    rng = np.random.default_rng(5)
    color = (rng.random((32, 40, 3), np.float32) ** 3 * 8).astype(np.float32)
    albedo = rng.random((32, 40, 3), np.float32)
    normal = rng.random((32, 40, 3), np.float32) * 2 - 1
    with oidn_gpu.Denoiser(hdr=True, backend="wgpu") as denoiser:
        return denoiser.denoise(color, albedo, normal)


def test_a_first_image_renders_nothing_and_gives_the_same_bits(gpu) -> None:
    with shipped_texts.capture() as rendered:
        from_templates = _first_image()
    before = shipped_texts.counts()
    shipped = _first_image()
    after = shipped_texts.counts()
    # the input and output passes, the autoexposure and every network kernel
    assert len(rendered) >= 18
    assert after["rendered"] == before["rendered"]
    assert after["shipped"] - before["shipped"] >= len(rendered)
    assert np.isfinite(shipped).all() and shipped.std() > 0
    assert shipped.view(np.uint32).tobytes() == from_templates.view(np.uint32).tobytes()
