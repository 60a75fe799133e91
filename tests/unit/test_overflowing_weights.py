"""Weights that break the network are said in our words: non-finite values are a
`WeightsFormatError` naming the tensor; finite weights so large that the network's values
overflow float32 (a black output) give one `NonFiniteOutputWarning`, not NumPy's
overflow warnings."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.errors import NonFiniteOutputWarning, WeightsFormatError
from oidn_gpu.model import tza

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny_base_ic3.tza"


def _scaled_weights(tmp_path: Path, change) -> Path:
    tensors = {
        name: change(name, array.astype(np.float32)) for name, array in tza.read_tza(TINY).items()
    }
    path = tmp_path / "changed.tza"
    path.write_bytes(tza.write_tza(tensors))
    return path


def test_non_finite_weights_are_a_format_error_naming_the_tensor(tmp_path):
    def poison(name: str, array: np.ndarray) -> np.ndarray:
        if name == "enc_conv0.bias":
            array[:2] = [np.nan, np.inf]
        return array

    path = _scaled_weights(tmp_path, poison)
    with pytest.raises(
        WeightsFormatError,
        match=r"tensor 'enc_conv0.bias' has 2 values that "
        r"are not finite \(NaN or Inf\)",
    ):
        oidn_gpu.Denoiser(hdr=True, backend="reference", weights=path)


def test_overflowing_weights_warn_once_in_our_words(tmp_path):
    def huge(name: str, array: np.ndarray) -> np.ndarray:
        return array * np.float32(1e6) if name.endswith(".weight") else array

    path = _scaled_weights(tmp_path, huge)
    color = np.random.default_rng(0).uniform(0.0, 1.0, (40, 40, 3)).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with oidn_gpu.Denoiser(hdr=True, backend="reference", weights=path) as denoiser:
            denoiser.denoise(color)
    ours = [w for w in caught if issubclass(w.category, NonFiniteOutputWarning)]
    assert ours and "the network's values overflow float32" in str(ours[0].message)
    assert not [w for w in caught if "encountered in" in str(w.message)]  # NumPy's own


def test_trained_weights_give_no_overflow_warning(tmp_path):
    color = np.random.default_rng(1).uniform(0.0, 4.0, (40, 40, 3)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonFiniteOutputWarning)
        with oidn_gpu.Denoiser(hdr=True, backend="reference", weights=TINY) as denoiser:
            assert np.isfinite(denoiser.denoise(color)).all()
