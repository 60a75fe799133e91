"""`oidn_gpu.backends.create_executor`: a backend's executor from keyword options."""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.backends import create_executor
from oidn_gpu.backends.reference import ReferenceExecutor
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.model import weights as builtin


def test_create_executor_runs_the_named_backend_with_its_options(rng) -> None:
    model = builtin.load_builtin("rt_hdr_small")
    x = rng.random((3, 16, 32), np.float32)
    with create_executor(model, backend="reference", threads=1) as executor:
        assert isinstance(executor, ReferenceExecutor)
        assert executor.info().backend == "reference" and executor.workers() == 1
        got = executor.run(x)
    with ReferenceExecutor(model, threads=1) as direct:
        np.testing.assert_array_equal(got, direct.run(x))


def test_create_executor_with_auto_honours_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("OIDN_GPU_BACKEND", "reference")
    with create_executor(builtin.load_builtin("rt_hdr_small")) as executor:
        assert executor.info().backend == "reference"


def test_create_executor_refuses_options_the_backend_lacks(monkeypatch) -> None:
    model = builtin.load_builtin("rt_hdr_small")
    with pytest.raises(InvalidArgumentError, match="the reference backend has no option 'warp'"):
        create_executor(model, backend="reference", warp=2)
    monkeypatch.setenv("OIDN_GPU_BACKEND", "reference")
    with pytest.raises(InvalidArgumentError, match=r"chosen by backend='auto'\) computes in fp32"):
        create_executor(model, precision="fp16")
