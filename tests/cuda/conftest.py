"""CUDA backend tests: on an NVIDIA GPU in full, elsewhere through Triton's interpreter.

Without a CUDA device, ``TRITON_INTERPRET=1`` is set before any kernel module is
imported, so the same Triton kernels run on CPU tensors (tiny shapes: the
interpreter is slow). Tests marked ``cuda_device`` need a real GPU (CUDA
graphs, the profiler, full-size shapes) and fail without one: CI without a GPU
deselects them (tests/conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture(scope="session")
def device() -> torch.device:
    return torch.device("cuda") if HAS_CUDA else torch.device("cpu")


def rel_l2(actual: np.ndarray, expected: np.ndarray) -> float:
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    return float(np.linalg.norm(actual - expected) / np.linalg.norm(expected))


class DlpackArray:
    """Another library's array, seen only through DLPack (and its Array API namespace,
    when one is given)."""

    def __init__(self, tensor: torch.Tensor, namespace: object = None) -> None:
        self._tensor = tensor
        self._namespace = namespace

    def __dlpack__(self, **kwargs):
        return self._tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._tensor.__dlpack_device__()

    def __array_namespace__(self):
        return self._namespace


def run_script(script: str, env: dict[str, str], *args: str, timeout: float = 300) -> str:
    """Run ``script`` in a fresh Python process with ``env``; its standard output (the test
    fails with the end of its standard error where it exits with an error)."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
