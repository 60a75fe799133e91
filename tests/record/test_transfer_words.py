"""Programs recorded with each hdr/transfer word replay to the image oidn-webgpu defines.

oidn-webgpu (``native/program.ts``, ``recordDenoise``) reads the transfer word as
``word === 1 ? 'log' : 'pu'`` and applies it only with hdr; an LDR denoise clamps the
color to [0, 1] and applies no curve. oidn-gpu's words 2 (linear), 3 (sRGB) and 4 (PU)
name their curve in either mode. Each replay (lavapipe, fp32) is compared with the
reference backend run with the curve the seeds define, and must be farther from every
other curve's image: the test tells the curves apart.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from oidn_gpu.backends.base import DenoiseImages
from oidn_gpu.backends.host_runner import HostTileRunner
from oidn_gpu.backends.plan import DenoiseOptions, plan_denoise
from oidn_gpu.backends.reference.executor import ReferenceExecutor
from oidn_gpu.image.transfer import Transfer
from oidn_gpu.model.unet import load_model
from oidn_gpu.record import make_config
from oidn_gpu.record.api import record_denoise
from oidn_gpu.record.replay import Replayer
from tests.compare import rel_l2

pytestmark = pytest.mark.gpu

H = W = 16
TOLERANCE = 1e-5  # fp32: summation order and the GPU's pow/log/exp only
# (hdr word, transfer word) -> the curve of the seeds' definition (ours for 2..4)
EXPECTED = {
    (0, 0): Transfer.LINEAR,
    (0, 1): Transfer.LINEAR,
    (0, 2): Transfer.LINEAR,
    (0, 3): Transfer.SRGB,
    (0, 4): Transfer.PU,
    (0, 6): Transfer.LINEAR,
    (1, 0): Transfer.PU,
    (1, 1): Transfer.LOG,
    (1, 2): Transfer.LINEAR,
    (1, 3): Transfer.SRGB,
    (1, 4): Transfer.PU,
    (1, 6): Transfer.PU,
}


def _config(hdr: int, transfer: int) -> bytes:
    data = bytearray(make_config(W, H, precision="fp32", denoise=True, hdr=True))
    struct.pack_into("<2I", data, len(data) - 16, hdr, transfer)
    return bytes(data)


def _color(hdr: bool) -> np.ndarray:
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    base = np.stack([np.sin(xx / 3) * 0.4 + 0.5, np.cos(yy / 4) * 0.4 + 0.5, xx / W], -1)
    color = np.clip(base + rng.normal(0, 0.1, base.shape), 0, 1).astype(np.float32)
    return color * np.float32(3.0) if hdr else color


@pytest.fixture(scope="module")
def references(tiny_tza):
    model = load_model(tiny_tza["tiny_base_ic3"])
    out = {}
    with ReferenceExecutor(model) as executor:
        runner = HostTileRunner(executor)
        for hdr in (False, True):
            for transfer in Transfer:
                options = DenoiseOptions(hdr=hdr, transfer=transfer, whole_image=True)
                plan = plan_denoise(model, H, W, options)
                out[hdr, transfer] = runner.run(DenoiseImages(_color(hdr)), plan)
    return out


@pytest.mark.parametrize(("hdr", "word"), sorted(EXPECTED))
def test_replay_gives_the_image_of_the_seeds_curve(gpu, tiny_tza, references, hdr, word):
    color = _color(hdr == 1)
    rgba = np.dstack([color, np.ones((H, W), np.float32)])
    with Replayer(record_denoise(tiny_tza["tiny_base_ic3"], _config(hdr, word)), gpu) as r:
        out = r.run([rgba])[:, :, :3]
    expected = EXPECTED[hdr, word]
    distances = {t: rel_l2(out, references[hdr == 1, t]) for t in Transfer}
    assert distances[expected] < TOLERANCE, distances
    assert all(d > 100 * TOLERANCE for t, d in distances.items() if t is not expected), distances
