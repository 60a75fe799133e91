"""One precision vocabulary, options checked once, executors built from the typed options."""

from __future__ import annotations

import pickle

import pytest

from oidn_gpu.backends import make_options
from oidn_gpu.backends.base import PRECISIONS, Precision, check_precision
from oidn_gpu.errors import InvalidArgumentError, one_of
from oidn_gpu.model import weights as builtin
from oidn_gpu.record import config


def test_every_precision_name_is_one_vocabulary() -> None:
    assert PRECISIONS == ("auto", "fp16", "bf16", "fp32")
    assert set(config.PRECISIONS) <= set(PRECISIONS)  # the recorder's word, in word order
    assert config.PRECISIONS == ("auto", "fp32", "fp16")
    options = make_options("wgpu", precision="fp16")
    assert options.precision is Precision.FP16 and options.precision == "fp16"
    assert f"{options.precision}" == "fp16" and repr(options.precision) == "'fp16'"
    assert pickle.loads(pickle.dumps(options)) == options


def test_check_precision_names_what_the_backend_takes() -> None:
    assert check_precision("auto", "plain", (Precision.FP32,)) is Precision.AUTO
    with pytest.raises(InvalidArgumentError, match=r"^unknown precision 'fp8'; expected 'auto' or"):
        check_precision("fp8", "plain", (Precision.FP32,))
    with pytest.raises(InvalidArgumentError, match="the plain backend computes in fp32 only"):
        check_precision("bf16", "plain", (Precision.FP32,))
    assert one_of(["a"]) == "'a'" and one_of("abc") == "'a', 'b' or 'c'"


def test_the_cuda_executor_is_built_from_the_typed_options() -> None:
    from oidn_gpu.backends.cuda.backend import CudaOptions
    from oidn_gpu.backends.cuda.executor import CudaExecutor

    model = builtin.load_builtin("rt_hdr_small")
    with pytest.raises(InvalidArgumentError, match="computes in fp16 or bf16; got precision"):
        CudaExecutor(model, precision="fp32")  # the options' check, the only one
    with pytest.raises(InvalidArgumentError, match="options= or the keywords"):
        CudaExecutor(model, options=CudaOptions(), engine="cudnn")


@pytest.mark.gpu
def test_the_wgpu_executor_is_built_from_the_typed_options() -> None:
    from oidn_gpu.backends.wgpu.backend import WgpuOptions
    from oidn_gpu.backends.wgpu.executor import WgpuExecutor

    model = builtin.load_builtin("rt_hdr_small")
    with pytest.raises(InvalidArgumentError, match=r"^unknown kernel 'bogus'"):
        WgpuExecutor(model, kernel="bogus")  # refused by the options, before any device
    with pytest.raises(InvalidArgumentError, match="options= or the keywords"):
        WgpuExecutor(model, options=WgpuOptions(), precision="fp32")
