"""Compiled kernels launched through the CUDA driver (`driver_launch`), without a GPU: the
shipped kernel lists' specializations found again from a launch's arguments (as Triton
computes them), the arguments packed as Triton's launcher passes them, and every other
launch handed to the Triton kernel."""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from oidn_gpu.backends.cuda import driver_launch, kernel_specs, shipped_kernels
from oidn_gpu.backends.cuda.kernel_specs import SHIPPED
from oidn_gpu.errors import InvalidArgumentError
from tests.cuda.conftest import run_script

SHIPPED_FOLDERS = sorted(p for p in SHIPPED.glob("triton-*/sm*") if p.is_dir())


def test_the_package_ships_compiled_kernels_for_these_tests():
    assert SHIPPED_FOLDERS, f"no triton-*/sm* folder in {SHIPPED}"


class FakeTensor:
    """What a launch reads of a CUDA tensor: dtype, device and address."""

    is_cuda = True

    def __init__(self, dtype: Any, address: int) -> None:
        self.dtype = dtype
        self.address = address

    def data_ptr(self) -> int:
        return self.address


class RecordingDriver:
    """A stand-in for `cuda_driver.CudaDriver` that records loads and launches."""

    def __init__(self) -> None:
        self.loads: list[tuple[str, int, int]] = []
        self.launches: list[tuple[Any, ...]] = []

    def load(self, code: bytes, symbol: str, shared: int, device: int) -> tuple[int, int]:
        self.loads.append((symbol, shared, device))
        return 1000 + len(self.loads), 96

    def make_current(self, device: int) -> None:
        pass

    def launch(self, function: int, grid: Any, threads: int, shared: int, stream: int, params: Any):
        values = [
            ctypes.cast(params[i], ctypes.POINTER(ctypes.c_uint64)).contents.value
            for i in range(len(params))
        ]
        self.launches.append((function, grid, threads, shared, stream, values, params))


def _records(folder: Path) -> list[str]:
    return [
        line
        for path in sorted(folder.glob("*.jsonl"))
        for line in path.read_text("utf-8").splitlines()
        if line.strip()
    ]


DTYPES = {"*fp16": torch.float16, "*fp32": torch.float32, "*i32": torch.int32}


def _arguments(spec: dict[str, Any], signature: driver_launch.Signature) -> tuple[list, dict]:
    """Positional arguments and constexpr keywords that select ``spec``'s specialization:
    an argument Triton specialized as a multiple of 16 gets one, any other not (an
    argument Triton never specializes gets a multiple of 16 all the same)."""
    key, warps, stages = driver_launch.parse_key(spec)
    args: list[Any] = []
    kwargs: dict[str, Any] = {"num_warps": warps, "num_stages": stages}
    for name, (kind, value) in zip(signature.names, key, strict=True):
        if kind == "constexpr":
            kwargs[name] = value
        elif kind.startswith("*"):
            args.append(FakeTensor(DTYPES[kind], 4096 if value == "D" else 4100))
        else:  # an argument Triton never specializes (None): a multiple of 16 all the same
            args.append(45 if value == "" else 48)
    return args, kwargs


@pytest.mark.parametrize("folder", SHIPPED_FOLDERS, ids=lambda p: f"{p.parent.name}-{p.name}")
def test_every_shipped_kernel_is_found_again_from_the_arguments_that_selected_it(folder):
    launches = driver_launch.DriverLaunches(RecordingDriver)
    records = _records(folder)
    version, capability = folder.parent.name.removeprefix("triton-"), int(folder.name[2:])
    files = shipped_kernels.entry_files(version, capability, shipped=SHIPPED)
    assert launches.serve(records, files, 0) == len(records)
    for record in records:
        data = json.loads(record)
        spec = json.loads(data["spec"])
        signature = driver_launch.signature_of(spec)
        args, kwargs = _arguments(spec, signature)
        found = launches.find(spec["name"], 0, tuple(args), kwargs)
        assert found is not None, spec["key"]
        assert found[0].entry == data["entry"]


def test_the_arguments_triton_does_not_specialize_are_those_of_the_kernel_decorators():
    import ast

    folder = Path(driver_launch.__file__).parent
    for module in ("triton_kernels", "io_kernels", "row_kernels", "fused_kernels"):
        tree = ast.parse((folder / f"{module}.py").read_text("utf-8"))
        decorated = {
            node.name: frozenset(a.value for a in d.args)
            for node in tree.body
            if isinstance(node, ast.FunctionDef)
            for d in node.decorator_list
            if isinstance(d, ast.Call) and getattr(d.func, "id", None) == "_jit"
        }
        assert decorated, module
        assert driver_launch.unspecialized(f"oidn_gpu.backends.cuda.{module}") == decorated


SIGNATURE = driver_launch.Signature(
    names=("src", "out", "height", "width", "scale", "BLOCK"),
    types=("*fp16", "*fp32", "i32", "i32", "fp32", "constexpr"),
    unspecialized=frozenset({"height"}),
)


def launch_key(signature: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The `Key` `driver_launch.bind` gives a launch, or None where it binds none."""
    bound = driver_launch.bind(signature, args, kwargs)
    return None if bound is None else bound[0]


def test_a_launch_key_follows_triton_s_specialization():
    src, out = FakeTensor(torch.float16, 256), FakeTensor(torch.float32, 264)
    key = launch_key(SIGNATURE, (src, out, 1088, 1920, 0.5), {"BLOCK": 64})
    assert key == (
        (
            ("*fp16", "D"),
            ("*fp32", ""),
            ("i32", None),
            ("i32", "D"),
            ("fp32", None),
            ("constexpr", 64),
        ),
        driver_launch.DEFAULT_WARPS,
        driver_launch.DEFAULT_STAGES,
    )
    big = launch_key(SIGNATURE, (src, out, 1, 2**40, 0.5), {"BLOCK": 64})
    assert big is not None and big[0][3] == ("i64", "D")
    wide = launch_key(SIGNATURE, (src, out, 1, 2**63 + 16, 0.5), {"BLOCK": 64})
    assert wide is not None and wide[0][3] == ("u64", "D")


@pytest.mark.parametrize(
    ("args", "kwargs", "why"),
    [
        ((1, 2), {}, "missing arguments (a default the launcher does not know)"),
        ((None, None, 1, 2, 0.5), {"BLOCK": 64}, "not tensors"),
        ((True, None, 1, 2, 0.5), {"BLOCK": 64}, "a bool"),
        ((), {"BLOCK": 64, "debug": True}, "an option the launcher does not pass"),
    ],
)
def test_a_launch_the_driver_does_not_pass_has_no_key(args, kwargs, why):
    assert launch_key(SIGNATURE, args, kwargs) is None, why


def test_a_tensor_off_the_gpu_has_no_key():
    cpu = torch.zeros(4, dtype=torch.float16)
    assert driver_launch.specialize(cpu) is None


def _served_launches() -> tuple[driver_launch.DriverLaunches, RecordingDriver, dict[str, Any]]:
    """A `DriverLaunches` serving the first shipped kernel list's kernels, and the spec of
    its row kernel."""
    driver = RecordingDriver()
    launches = driver_launch.DriverLaunches(lambda: driver)
    folder = SHIPPED_FOLDERS[0]
    version, capability = folder.parent.name.removeprefix("triton-"), int(folder.name[2:])
    records = _records(folder)
    launches.serve(records, shipped_kernels.entry_files(version, capability), 0)
    specs = [json.loads(json.loads(r)["spec"]) for r in records]
    spec = next(s for s in specs if s["name"].endswith(".conv_rows_kernel"))
    return launches, driver, spec


def test_a_launch_passes_the_arguments_then_two_null_scratch_pointers(monkeypatch):
    launches, driver, spec = _served_launches()
    signature = driver_launch.signature_of(spec)
    args, kwargs = _arguments(spec, signature)
    kernel = driver_launch.DriverKernel(launches, spec["name"], lambda: pytest.fail("Triton"))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(
        torch.cuda, "current_stream", lambda device: type("S", (), {"cuda_stream": 77})()
    )
    kernel[(3, 5)](*args, **kwargs)
    function, grid, threads, shared, stream, values, _ = driver.launches[-1]
    assert 1000 < function <= 1000 + len(driver.loads)  # a handle the driver loaded
    variant = launches.find(spec["name"], 0, tuple(args), kwargs)[0]
    assert grid == (3, 5, 1) and threads == 32 * kwargs["num_warps"] and stream == 77
    assert shared == variant.shared
    pointers = [a.data_ptr() for a in args if isinstance(a, FakeTensor)]
    ints = [a for a in args if isinstance(a, int)]
    assert values[: len(pointers)] == pointers  # the row kernel's pointers come first
    assert [v & 0xFFFFFFFF for v in values[len(pointers) : len(args)]] == ints
    assert values[len(args) :] == [0, 0]
    assert launches.counts[spec["name"]] == [1, 0]


@pytest.mark.parametrize("other", ["warps", "gpu"])
def test_a_launch_without_its_kernel_loaded_goes_to_the_triton_kernel(monkeypatch, other):
    launches, driver, spec = _served_launches()  # loaded on GPU 0
    signature = driver_launch.signature_of(spec)
    args, kwargs = _arguments(spec, signature)
    if other == "warps":
        kwargs["num_warps"] = 32  # never compiled so
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1 if other == "gpu" else 0)
    ran: list[Any] = []

    class TritonKernel:
        def __getitem__(self, grid):
            return lambda *a, **k: ran.append((grid, a, k))

    kernel = driver_launch.DriverKernel(launches, spec["name"], TritonKernel)
    kernel[(2,)](*args, **kwargs)
    assert ran == [((2,), tuple(args), kwargs)] and not driver.launches
    assert launches.counts[spec["name"]] == [0, 1]


def test_a_kernel_module_hands_out_its_other_names_from_the_module_itself():
    launches, _, spec = _served_launches()
    module_name, _, kernel_name = spec["name"].rpartition(".")
    module = type("M", (), {"UNAVAILABLE": None, "helper": 5})
    namespace = driver_launch.KernelNamespace(launches, module_name, lambda: module)
    assert isinstance(getattr(namespace, kernel_name), driver_launch.DriverKernel)
    assert namespace.helper == 5


def test_an_entry_that_needs_triton_s_launcher_is_refused():
    launches, _, spec = _served_launches()
    record = json.dumps({"entry": "E", "spec": json.dumps(spec)})
    short = spec["name"].rsplit(".", 1)[-1]
    metadata = {"name": short, "num_warps": 4, "shared": 0, "triton_version": "3.6.0"}

    def files(**more: Any) -> Any:
        data = json.dumps(metadata | more).encode()
        return lambda entry: {f"{short}.json": data, f"{short}.cubin": b"\0"}

    with pytest.raises(ValueError, match="launch_pdl"):
        launches.serve([record], files(launch_pdl=True), 0)
    with pytest.raises(ValueError, match="global_scratch_size"):
        launches.serve([record], files(global_scratch_size=64), 0)
    # another Triton's launcher may pass other arguments after the kernel's
    with pytest.raises(ValueError, match=r"Triton 3\.7 need Triton's launcher"):
        launches.serve([record], files(triton_version="3.7.0"), 0)
    with pytest.raises(ValueError, match="no compiled code"):
        launches.serve([record], lambda entry: None, 0)


def test_the_switch_reads_on_and_off_and_refuses_anything_else():
    assert driver_launch.enabled("on") and not driver_launch.enabled("off")
    with pytest.raises(InvalidArgumentError, match="OIDN_GPU_CUDA_DRIVER_LAUNCH='maybe'"):
        driver_launch.enabled("maybe")


def test_a_kernel_launched_through_the_driver_is_recorded_where_a_compile_records(monkeypatch):
    launches, _, spec = _served_launches()
    args, kwargs = _arguments(spec, driver_launch.signature_of(spec))
    kernel = driver_launch.DriverKernel(launches, spec["name"], lambda: pytest.fail("Triton"))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    stream = type("S", (), {"cuda_stream": 0})()
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: stream)
    with kernel_specs.recording() as texts:
        kernel[(1,)](*args, **kwargs)
    (record,) = texts
    assert json.loads(json.loads(record)["spec"])["key"] == spec["key"]
    kernel[(1,)](*args, **kwargs)  # not recording: nothing kept
    assert len(texts) == 1


_FRESH_PROCESS = """
import hashlib, json, sys
import numpy as np, torch
import oidn_gpu
from oidn_gpu.backends.cuda import driver_launch
rng = np.random.default_rng(5)
images = [rng.random((720, 1280, 3), dtype=np.float32) for _ in range(3)]
images[0] *= 4
images[2] = images[2] * 2 - 1
den = oidn_gpu.Denoiser(hdr=True, backend="cuda")
if sys.argv[1:] == ["compile"]:  # the kernels into the caches (Triton's launch)
    den.denoise(*images)
    den.wait_compiled()
first = den.denoise(*images)
triton_first = "triton" in sys.modules
second = den.denoise(*images)
print(json.dumps({
    "digests": [hashlib.sha256(a.tobytes()).hexdigest() for a in (first, second)],
    "triton_imported": triton_first,
    "handed_to_triton": sum(c[1] for c in driver_launch.LAUNCHES.counts.values()),
    "through_driver": sum(c[0] for c in driver_launch.LAUNCHES.counts.values()),
    "device": den.info().device,
}))
"""


@pytest.mark.cuda_device
def test_a_fresh_process_gives_the_same_image_with_the_kernels_launched_by_the_driver(tmp_path):
    """README: compiled kernels loaded and launched through the CUDA driver give Triton's
    own bits, and a first frame so never imports Triton. The kernels are compiled first
    (Triton's launch, on any GPU; on compute capability 9.0 they ship), then each process
    starts from a copy of those caches, as a farm node's after `oidn-gpu prepare`; a
    Triton whose launcher's arguments the driver launch does not know leaves every launch
    to Triton, with the same images."""
    import os
    import shutil

    def env_of(folder: Path, switch: str) -> dict[str, str]:
        return {
            **os.environ,
            "TRITON_CACHE_DIR": str(folder / "triton"),
            "OIDN_GPU_CACHE_DIR": str(folder / "oidn-gpu"),
            driver_launch.DRIVER_LAUNCH_ENV_VAR: switch,
        }

    compiled = tmp_path / "compiled"
    run_script(_FRESH_PROCESS, env_of(compiled, "off"), "compile", timeout=900)
    answers = {}
    for switch in ("on", "off"):
        shutil.copytree(compiled, tmp_path / switch)
        out = run_script(_FRESH_PROCESS, env_of(tmp_path / switch, switch))
        answers[switch] = json.loads(out.strip().splitlines()[-1])
    on, off = answers["on"], answers["off"]
    version = ".".join((kernel_specs.triton_version() or "").split(".")[:2])
    driven = version in driver_launch.SCRATCH_POINTERS
    assert on["digests"] == off["digests"]
    assert on["triton_imported"] is not driven and off["triton_imported"]
    assert (on["through_driver"] > 0) is driven and on["handed_to_triton"] == 0
    assert off["through_driver"] == 0
    assert "cudnn" not in on["device"] and "cudnn" not in off["device"]
