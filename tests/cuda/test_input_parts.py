"""The input pass in two parts: the aux images' channels, then the main image's.

With autoexposure, one tile and aux images, `CudaDenoiser` writes the network input's
aux channels on a second stream while the autoexposure runs (they need no input scale),
then the main image's three channels once the scale is known. The two parts together
must be the one-part pass bit for bit, padding and unused channels included; the whole
denoise must be the same image with the parts beside the autoexposure as without.
Through Triton's interpreter (the kernel) and on the GPU (the second stream).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.images import describe
from oidn_gpu.backends.cuda.runner import INPUT_BLOCK, CudaDenoiser
from oidn_gpu.backends.cuda.triton_kernels import PU, SRGB, input_pass_kernel
from oidn_gpu.image import process
from oidn_gpu.model.unet import load_model
from tests.cuda.test_repeated_calls import TINY_AOV


def _pass(images, out, part, *, transfer, hdr, snorm, rect, scale):
    height, width, channels = out.shape
    main = images[0]
    alb = images[1] if len(images) > 1 else main
    nrm = images[2] if len(images) > 2 else main
    in_y, in_x, in_h, in_w, buf_y, buf_x = rect
    input_pass_kernel[(-(-height * width // INPUT_BLOCK),)](
        *(v for i in (main, alb, nrm) for v in (i.tensor, i.offset, i.pixel_stride,
                                                  i.row_stride, i.channels)),
        scale, out, height, width, channels, in_y, in_x, in_h, in_w, buf_y, buf_x,
        IMAGES=len(images), TRANSFER=transfer, HDR=hdr, SNORM=snorm, BLOCK=INPUT_BLOCK,
        CHANNELS=channels, PART=part,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("count", "transfer", "hdr", "snorm", "size", "rect"),
    [
        (3, PU, True, False, (12, 20), (0, 0, 12, 20, 0, 0)),
        (2, SRGB, False, False, (16, 24), (1, 2, 9, 17, 3, 4)),  # padded tile, offsets
        (3, SRGB, False, True, (9, 13), (0, 0, 9, 13, 0, 0)),  # snorm; not multiples of 128
    ],
)
def test_two_parts_are_the_one_part_pass(count, transfer, hdr, snorm, size, rect, rng, device):
    height, width = size
    arrays = [rng.random((height + 3, width + 5, 4)) * 3 - 0.5 for _ in range(count)]
    arrays[0][1, 2, 0] = np.nan  # sanitized in both forms
    images = [describe(torch.from_numpy(a).float().to(device)[:, :, :3], f"image{i}")
              for i, a in enumerate(arrays)]  # fmt: skip
    scale = torch.tensor([0.37], dtype=torch.float32, device=device)
    options = dict(transfer=transfer, hdr=hdr, snorm=snorm, rect=rect, scale=scale)
    whole = torch.full((height, width, 16), 7.0, dtype=torch.float16, device=device)
    _pass(images, whole, 0, **options)
    parts = torch.full((height, width, 16), 7.0, dtype=torch.float16, device=device)
    _pass(images, parts, 1, **options)
    aux_only = parts.clone()
    _pass(images, parts, 2, **options)
    np.testing.assert_array_equal(parts.cpu().numpy(), whole.cpu().numpy())
    assert (aux_only[..., :3] == 7.0).all()  # part 1 leaves the main image's channels
    assert (parts[..., 3 * count :] == 0).all()  # unused channels are zeros in every form


@pytest.mark.cuda_device
def test_a_denoise_with_the_aux_pass_beside_the_autoexposure_is_the_same_image(rng, device):
    ex = CudaExecutor(load_model(TINY_AOV), device=device, tune=False, engine="triton")
    images = [torch.from_numpy(rng.random((40, 56, 3)) * s).float().to(device)
              for s in (8.0, 1.0, 1.0)]  # fmt: skip
    mode = process.mode_for("RT", hdr=True)
    got = {}
    for beside in (False, True):
        with CudaDenoiser(ex) as den:
            den.aux_beside = beside
            frames = [den.denoise_tensors(*images, mode=mode, autoexposure=True).cpu()
                      for _ in range(3)]  # eager, then captured, then replayed  # fmt: skip
            got[beside] = frames
    for frame in got[True] + got[False][1:]:
        np.testing.assert_array_equal(frame.numpy(), got[False][0].numpy())
    ex.close()
