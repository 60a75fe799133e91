"""The Triton input pass builds each pixel's 16 network channels with joins and
interleaves (`io_kernels._channels16`): the same bits as setting the channels one
select at a time, for 1-3 images, HDR (PU), LDR (sRGB), signed and linear modes, NaN, Inf
and out-of-range values, fp16 and 4-channel inputs, and a tile whose rectangle sits inside
a padded buffer. Through Triton's interpreter without a GPU (tiny sizes)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oidn_gpu.backends.cuda.images import describe
from oidn_gpu.backends.cuda.input_pass import input_pass
from oidn_gpu.image import process
from oidn_gpu.image.tiling import Tile

HEIGHT, WIDTH = 9, 13  # the buffer; the images' rectangle is 7 x 10 inside it


def _images(rng, count, device):
    color = rng.random((HEIGHT, WIDTH, 4)) * 8 - 1
    color[0, 0, 0], color[1, 2, 1], color[2, 3, 2] = np.nan, np.inf, -np.inf
    albedo = rng.random((HEIGHT, WIDTH, 3)) * 1.4 - 0.2
    albedo[3, 4, 0] = np.nan
    normal = rng.random((HEIGHT, WIDTH, 3)) * 2.6 - 1.3
    arrays = [color, albedo, normal][:count]
    tensors = [torch.from_numpy(a).float().to(device) for a in arrays]
    tensors[0] = tensors[0][:, :, :3]  # a 3-channel view of 4-channel pixels
    if count > 1:
        tensors[1] = tensors[1].half()
    return [describe(t, n) for t, n in zip(tensors, ("main", "albedo", "normal"), strict=False)]


def _input_pass(images, mode, device, join):
    out = torch.full((HEIGHT, WIDTH, 16), 7.0, dtype=torch.float16, device=device)
    scale = torch.tensor([0.8], dtype=torch.float32, device=device)
    # the tile's read rectangle (7 x 10 from image row 1, column 2) at buffer (2, 1)
    tile = Tile(0, 1, 2, 7, 10, 2, 1, 0, 0, 7, 10, 2, 1)
    input_pass(images, tile, mode, scale, out, block=32, join=join)
    return out.cpu()


@pytest.mark.parametrize(
    ("count", "mode"),
    [
        (3, process.mode_for("RT", hdr=True)),  # PU
        (2, process.mode_for("RT", hdr=False, srgb=False)),  # LDR: sRGB
        (1, process.mode_for("RT", hdr=False, srgb=True)),  # linear
        (1, process.mode_for("RT", hdr=False, directional=True)),  # signed
    ],
)
def test_joined_channels_are_the_selected_channels_bits(count, mode, rng, device):
    images = _images(rng, count, device)
    joined = _input_pass(images, mode, device, True)
    selected = _input_pass(images, mode, device, False)
    assert torch.isfinite(joined.float()).all()
    assert torch.equal(joined.view(torch.int16), selected.view(torch.int16))
    # the channels past the images' are zero, outside the rectangle every channel is
    assert not joined[..., 3 * count :].any()
    assert not joined[:2].any() and not joined[:, :1].any()
    assert joined[2:, 1:11, : 3 * count].any()
