"""backends.base: the registry, `auto`, probes and typed backend options."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from oidn_gpu.backends import base
from oidn_gpu.backends.base import (
    Availability,
    BackendOptions,
    auto_order,
    get_backend,
    make_options,
    probe,
    resolve_backend,
)
from oidn_gpu.backends.reference.backend import ReferenceOptions
from oidn_gpu.backends.wgpu.backend import WgpuOptions
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.installation import collect, format_report
from oidn_gpu.kernels.gemm import GemmOptions


@dataclass(frozen=True)
class _BrokenOptions(BackendOptions):
    pass


class _BrokenBackend:
    """A registered backend whose probe fails, as a broken driver would."""

    name = "broken"
    priority = 1000
    description = "fails to probe"
    Options = _BrokenOptions

    def probe(self) -> Availability:
        raise OSError("driver exploded")

    def describe(self) -> tuple[str, ...]:
        raise OSError("driver exploded")


BROKEN = _BrokenBackend()


@pytest.fixture
def broken_registered(monkeypatch):
    monkeypatch.setitem(base.REGISTRY, "broken", f"{__name__}:BROKEN")
    monkeypatch.delenv(base.BACKEND_ENV_VAR, raising=False)
    yield
    base._loaded.pop("broken", None)
    base._probe.cache_clear()


def test_auto_tries_backends_by_priority_and_skips_what_cannot_run(broken_registered) -> None:
    assert auto_order()[0] == "broken"
    availability = probe("broken")
    assert not availability.available and "driver exploded" in availability.note
    assert resolve_backend("auto") in ("wgpu", "oidn", "reference")
    report = format_report(collect())
    assert "broken       unavailable (probing failed (OSError: driver exploded))" in report


def test_the_environment_overrides_auto_and_is_checked(monkeypatch) -> None:
    monkeypatch.setenv(base.BACKEND_ENV_VAR, "reference")
    assert resolve_backend("auto") == "reference"
    assert resolve_backend("wgpu") == "wgpu"  # an explicit name wins
    monkeypatch.setenv(base.BACKEND_ENV_VAR, "cpu")
    with pytest.raises(InvalidArgumentError, match="OIDN_GPU_BACKEND='cpu' is not a backend"):
        resolve_backend("auto")


def test_a_device_makes_auto_pick_the_backend_of_its_kind(monkeypatch) -> None:
    import torch  # the cuda extra is part of the dev extras

    monkeypatch.setenv(base.BACKEND_ENV_VAR, "reference")
    assert resolve_backend("auto", {"device": torch.device("cpu")}) == "cuda"
    assert resolve_backend("auto", {"device": object()}) == "wgpu"
    assert resolve_backend("auto", {"device": None}) == "reference"


def test_cuda_options_without_torch_work() -> None:
    assert make_options("cuda").compute_precision == "fp16"
    assert make_options("cuda", precision="bf16", engine="cudnn", device=0).engine == "cudnn"
    with pytest.raises(
        InvalidArgumentError, match=r"computes in fp16 or bf16; got precision 'fp32'"
    ):
        make_options("cuda", precision="fp32")
    with pytest.raises(InvalidArgumentError, match=r"^unknown engine 'tensorrt'"):
        make_options("cuda", engine="tensorrt")
    with pytest.raises(InvalidArgumentError, match=r"^device must be a torch.device"):
        make_options("cuda", device=1.5)
    with pytest.raises(
        InvalidArgumentError, match=r"computes in fp16 or fp32; got precision 'bf16'"
    ):
        make_options("wgpu", precision="bf16")


def test_unknown_backends_list_the_registered_ones() -> None:
    with pytest.raises(InvalidArgumentError, match=r"unknown backend 'cpu'; expected 'auto', "):
        get_backend("cpu")


def test_options_are_typed_and_validated() -> None:
    options = make_options("wgpu", precision="fp32", gemm={"rows_per_thread": 4})
    assert isinstance(options, WgpuOptions) and isinstance(options.gemm, GemmOptions)
    assert make_options("wgpu", options, kernel="direct").kernel == "direct"
    assert make_options("reference", kernel="auto", gemm=None) == ReferenceOptions()
    with pytest.raises(InvalidArgumentError, match="do not fit the reference backend"):
        make_options("reference", options)
    with pytest.raises(InvalidArgumentError, match=r"^unknown precision 'fp8'"):
        make_options("reference", precision="fp8")
    with pytest.raises(InvalidArgumentError, match=r"computes in fp32 only; got precision 'fp16'"):
        make_options("reference", precision="fp16")
    message = r"the reference backend \(chosen by backend='auto'\) computes in fp32 only"
    with pytest.raises(InvalidArgumentError, match=message):
        make_options("reference", requested="auto", precision="fp16")
    with pytest.raises(InvalidArgumentError, match=r"^gemm=\{'rows_per_thread': 4\} is an option"):
        make_options("reference", gemm={"rows_per_thread": 4})
    with pytest.raises(InvalidArgumentError, match=r"^device must be a wgpu.GPUDevice, got int"):
        WgpuOptions(device=3)
