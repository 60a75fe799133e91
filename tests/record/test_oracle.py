"""Replayed whole denoises against Intel OIDN 2.5.1 (through pyoidn), on lavapipe.

Tolerances are the backend's contract (architecture.md): fp32 relative L2 under
1e-5 (summation order and the GPU's pow/log/exp only), fp16 under 2e-3 (fp16
storage of weights and activations). The images are smooth signals plus noise,
like renders; official small weights keep the network realistic while lavapipe
stays fast at 48x40. HDR replays take OIDN's autoexposure, computed on the host
and written into the program's frame buffer, and are compared with OIDN's own
autoexposure; LDR programs keep their recorded scale 1.
"""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.image.autoexposure import autoexposure
from oidn_gpu.record import make_config
from oidn_gpu.record.api import record_denoise
from oidn_gpu.record.replay import Replayer
from tests.compare import assert_close
from tests.oracle import oidn_denoise

pytestmark = [pytest.mark.gpu, pytest.mark.oracle]

FP32_REL_L2 = 1e-5
FP16_REL_L2 = 2e-3
H, W = 48, 40


def _scene(
    rng: np.random.Generator, scale: float, h: int = H, w: int = W
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    albedo = np.stack(
        [np.sin(xx / 5) * 0.4 + 0.5, np.cos(yy / 7) * 0.4 + 0.5, (xx + yy) / (h + w)], -1
    ).astype(np.float32)
    normal = np.stack([np.sin(xx / 9), np.cos(yy / 11), np.full_like(xx, 0.5)], -1)
    normal = (normal / np.linalg.norm(normal, axis=-1, keepdims=True)).astype(np.float32)
    noise = rng.normal(0, 0.1, albedo.shape).astype(np.float32)
    color = (np.clip(albedo + noise, 0, None) * np.float32(scale)).astype(np.float32)
    return color, albedo, normal


def _rgba(image: np.ndarray) -> np.ndarray:
    return np.dstack([image, np.ones(image.shape[:2], np.float32)]).astype(np.float32)


CASES = {
    # name: (weights, hdr, images, precision, tile edge, tolerance)
    "hdr-fp32": ("rt_hdr_small", True, 1, "fp32", 0, FP32_REL_L2),
    "hdr-alb-nrm-fp32": ("rt_hdr_alb_nrm_small", True, 3, "fp32", 0, FP32_REL_L2),
    "ldr-fp16": ("rt_ldr_small", False, 1, "fp16", 0, FP16_REL_L2),
    "ldr-alb-nrm-fp16": ("rt_ldr_alb_nrm_small", False, 3, "fp16", 0, FP16_REL_L2),
    # 230 rows at a 208 px tile edge: 3 tiles, whose overlap (96 px) covers the receptive field
    "hdr-tiled-fp32": ("rt_hdr_small", True, 1, "fp32", 208, FP32_REL_L2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_replayed_denoise_matches_intel_oidn(gpu, rng, case):
    from oidn_gpu.model.weights import weights_path

    name, hdr, count, precision, edge, tolerance = CASES[case]
    if precision == "fp16" and not gpu.capabilities.has_f16:
        pytest.fail("the device has no shader-f16; the fp16 tests need it (lavapipe has it)")
    tza = weights_path(name).read_bytes()
    h, w = (230, W) if edge else (H, W)
    color, albedo, normal = _scene(rng, 4.0 if hdr else 1.0, h, w)
    images = [color, albedo, normal][:count]
    config = make_config(
        w, h, precision=precision, device=gpu, denoise=True, hdr=hdr, max_tile_edge=edge
    )
    with Replayer(record_denoise(tza, config), gpu) as replayer:
        assert replayer.program.meta.tiles == (3 if edge else 1)
        scale = autoexposure(color) if hdr else None  # OIDN's default for HDR color
        out = replayer.run([_rgba(x) for x in images], input_scale=scale)
    reference = oidn_denoise(*images, hdr=hdr, weights=tza)
    assert_close(out[:, :, :3].copy(), reference, rel_l2_tol=tolerance, label=case)
