"""A network whose own values overflow float32 (weights far larger than trained ones):
NumPy's overflow warnings are silenced while the network runs (`quiet_overflow`, in each
thread that runs a band) and one warning of ours says what happened (`checked_output`)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from oidn_gpu.errors import NonFiniteOutputWarning

OVERFLOW_MESSAGE = (
    "the network's values overflow float32 (its weights are too large: Intel's trained "
    "weights stay below 20 in magnitude), so the output is black or NaN where they do; "
    "check the weights file"
)


def quiet_overflow() -> Any:
    """NumPy's error state for running the network (per thread): no overflow or
    invalid-value warnings; `checked_output` looks at the result once instead."""
    return np.errstate(over="ignore", invalid="ignore")


def checked_output(result: np.ndarray) -> np.ndarray:
    """``result`` (the network's output), with a `NonFiniteOutputWarning` when a value of
    it is not finite."""
    if not np.isfinite(result).all():
        warnings.warn(OVERFLOW_MESSAGE, NonFiniteOutputWarning, stacklevel=3)
    return result
