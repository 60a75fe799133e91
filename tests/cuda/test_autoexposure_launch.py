"""The one-launch autoexposure (`triton_kernels.autoexposure_kernel`) against the two launches.

Each program writes its bin and the last to finish computes the scale: the same
sums in the same order as `autoexposure_bins_kernel` then `autoexposure_scale_kernel`,
so the scale is the same float32 bit for bit, and within 1e-6 of the host's
(`image.autoexposure`). The counter it uses is back at 0 after every launch (a CUDA
graph replays it). Through Triton's interpreter here; in full on an NVIDIA GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oidn_gpu.backends.cuda.autoexposure import autoexposure, new_counter
from oidn_gpu.backends.cuda.images import describe
from oidn_gpu.image import autoexposure as host
from tests.cuda.conftest import HAS_CUDA

# (height, width, channels, dtype): partial bins at the edges, 1-3 channels, float16; on a
# GPU also sizes of more than 1024 bins (more than one pass of the lanes; the interpreter
# takes 20 s for one).
SHAPES = [(16, 16, 3, torch.float32), (37, 53, 3, torch.float32), (100, 21, 1, torch.float32),
          (33, 70, 2, torch.float16), (1, 1, 3, torch.float32)]
if HAS_CUDA:
    SHAPES += [(530, 520, 3, torch.float32), (720, 1280, 3, torch.float32),
               (1080, 1920, 3, torch.float32), (2160, 3840, 3, torch.float16)]


def _color(rng, height, width, channels, dtype, device):
    values = rng.random((height, width, channels)) ** 4 * 50
    values[0, 0, 0] = np.nan
    values[-1, -1, -1] = -3.0
    return torch.from_numpy(values).to(dtype).to(device)


def _scale(color, device, **options):
    scale = torch.zeros(1, dtype=torch.float32, device=device)
    autoexposure(describe(color, "color"), scale, "triton", **options)
    return scale


@pytest.mark.parametrize(("height", "width", "channels", "dtype"), SHAPES, ids=str)
def test_one_launch_is_the_two_launches_bit_for_bit(height, width, channels, dtype, rng, device):
    color = _color(rng, height, width, channels, dtype, device)
    counter = new_counter(device)
    one = _scale(color, device, counter=counter)
    two = _scale(color, device, steps=2)
    assert one.view(torch.int32).item() == two.view(torch.int32).item(), (one, two)
    assert counter.item() == 0
    again = _scale(color, device, counter=counter)  # the counter reused, as a graph does
    assert torch.equal(again, one) and counter.item() == 0
    expected = host.autoexposure(color.float().cpu().numpy())
    assert abs(one.item() - expected) <= 1e-6 * expected


def test_a_strided_view_and_black_image(rng, device):
    base = _color(rng, 24, 40, 4, torch.float32, device)
    view = base[::2, ::3, :3]
    assert torch.equal(_scale(view, device), _scale(view.contiguous(), device))
    assert _scale(view, device).item() == _scale(view, device, steps=2).item()
    black = torch.zeros((20, 30, 3), dtype=torch.float32, device=device)
    assert _scale(black, device).item() == 1.0 == host.autoexposure(black.cpu().numpy())
