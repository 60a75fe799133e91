"""HDR color whose +Inf pixels drive autoexposure to 0: same black image as OIDN, and a
warning that says why (the Python API; the CLI test names the frame)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.errors import NonFiniteInputWarning
from tests import oracle


def _color(seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).random((16, 16, 3), np.float32) * np.float32(4)


def test_infinite_pixels_warn_and_match_oidn() -> None:
    color = _color()
    color[2, 5, 0] = np.inf
    color[9, 1, :] = np.inf
    color[9, 2, :] = np.nan  # NaN alone is sanitized to 0 and does not zero the scale
    with pytest.warns(NonFiniteInputWarning, match=r"autoexposure is 0 because 3 pixels"):
        out = oidn_gpu.denoise(color, hdr=True, backend="reference")
    expected = oracle.oidn_denoise(color, hdr=True)
    np.testing.assert_array_equal(out, expected)
    assert not out.any()


def test_no_warning_for_finite_images_or_an_explicit_scale() -> None:
    color = _color()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonFiniteInputWarning)
        oidn_gpu.denoise(color, hdr=True, backend="reference")
        color[0, 0, 0] = np.nan  # sanitized; autoexposure stays positive
        oidn_gpu.denoise(color, hdr=True, backend="reference")
        color[0, 0, 0] = np.inf
        oidn_gpu.denoise(color, hdr=True, input_scale=0.5, backend="reference")
