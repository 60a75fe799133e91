"""The Triton input pass builds each pixel's 16 network channels with joins and
interleaves (`triton_kernels._channels16`): the same bits as setting the channels one
select at a time, for 1-3 images, HDR (PU), LDR (sRGB), signed and linear modes, NaN, Inf
and out-of-range values, fp16 and 4-channel inputs, and a tile whose rectangle sits inside
a padded buffer. Through Triton's interpreter without a GPU (tiny sizes)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oidn_gpu.backends.cuda.executor import kernels, transfer_id
from oidn_gpu.backends.cuda.images import describe
from oidn_gpu.image import process

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
    main = images[0]
    alb = images[1] if len(images) > 1 else main
    nrm = images[2] if len(images) > 2 else main
    out = torch.full((HEIGHT, WIDTH, 16), 7.0, dtype=torch.float16, device=device)
    scale = torch.tensor([0.8], dtype=torch.float32, device=device)
    in_y, in_x, in_h, in_w, buf_y, buf_x = 1, 2, 7, 10, 2, 1  # the tile's rectangle
    kernels().input_pass_kernel[(-(-HEIGHT * WIDTH // 32),)](
        main.tensor, main.offset, main.pixel_stride, main.row_stride, main.channels,
        alb.tensor, alb.offset, alb.pixel_stride, alb.row_stride, alb.channels,
        nrm.tensor, nrm.offset, nrm.pixel_stride, nrm.row_stride, nrm.channels,
        scale, out, HEIGHT, WIDTH, 16, in_y, in_x, in_h, in_w, buf_y, buf_x,
        IMAGES=len(images), TRANSFER=transfer_id(mode.transfer), HDR=bool(mode.hdr),
        SNORM=bool(mode.snorm), BLOCK=32, CHANNELS=16, JOIN=join,
    )  # fmt: skip
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
