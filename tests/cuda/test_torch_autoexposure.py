"""The torch engine's autoexposure bins: OIDN's bin averages, summed in a fixed order.

Bin ``b`` of an axis of ``n`` pixels in ``nb = ceil(n / 16)`` bins holds the pixels
``[b * n // nb, (b + 1) * n // nb)`` (OIDN core/autoexposure.h), so bins of one image can
differ in size; each bin's luminance is averaged over its own pixel count. The bins are
summed by one reduction (no atomics), so a GPU gives the same scale on every run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from oidn_gpu.backends.cuda import torch_ops


def _expected_bins(color: np.ndarray) -> np.ndarray:
    """Each bin's average luminance in float64 (the reference the float32 sums approach)."""
    rgb = np.clip(np.nan_to_num(color[..., :3].astype(np.float64), nan=0.0), 0.0, None)
    lum = 0.212671 * rgb[..., 0] + 0.715160 * rgb[..., 1] + 0.072169 * rgb[..., 2]
    height, width = lum.shape
    nb_h, nb_w = math.ceil(height / 16), math.ceil(width / 16)
    out = np.empty((nb_h, nb_w))
    for i in range(nb_h):
        for j in range(nb_w):
            rows = slice(i * height // nb_h, (i + 1) * height // nb_h)
            cols = slice(j * width // nb_w, (j + 1) * width // nb_w)
            out[i, j] = lum[rows, cols].mean()
    return out.reshape(-1)


@pytest.mark.parametrize("shape", [(1, 1), (16, 16), (17, 33), (37, 45), (300, 7), (5, 161)])
def test_bins_are_the_average_of_each_bins_own_pixels(shape, rng, device):
    color = (rng.random((*shape, 3)) * 8).astype(np.float32)
    color[0, 0] = np.nan  # counts as black, as OIDN's sanitizing does
    got = torch_ops.autoexposure_bins(torch.from_numpy(color).to(device)).cpu().numpy()
    np.testing.assert_allclose(got, _expected_bins(color), rtol=2e-6, atol=0)


def test_bins_of_a_strided_view_equal_those_of_a_copy(rng, device):
    """The same pixels as a 3-channel view of a 4-channel image and as a contiguous copy."""
    base = torch.from_numpy((rng.random((45, 70, 4)) * 4).astype(np.float32)).to(device)
    view = base[:, :, :3]
    first = torch_ops.autoexposure_bins(view)
    assert torch.equal(first, torch_ops.autoexposure_bins(view.contiguous()))
    assert torch.equal(first, torch_ops.autoexposure_bins(view))  # and on every run
