"""Compiled Triton kernels launched through the CUDA driver, without importing Triton.

A frame's kernels are compiled ahead: shipped with the package (`shipped_kernels`) or in
Triton's disk cache from an earlier process. Each kernel list line names the cache entry
of one compiled kernel and the specialization Triton compiled it for (Triton's own
in-process cache key: each argument's type and whether it is a multiple of 16, or a
constexpr's value; the warps and stages). Importing Triton, decorating the kernel modules'
functions and loading the kernels through Triton cost a fresh process's first frame about
0.2 s (docs/benchmarks.md). `DriverLaunches.serve` instead reads the entries' compiled
code (cubin) and metadata, loads them with the CUDA driver (`cuda_driver`) and keeps them
by specialization; a launch through a `KernelNamespace`'s kernels computes its
specialization as Triton does and, where a loaded kernel has it, launches it with the
arguments Triton's launcher passes (Triton 3.6: the non-constexpr arguments, then the
global and profile scratch pointers, null for kernels that use none; kernels compiled by
other Triton versions are left to Triton); any other launch goes to the Triton kernel
itself, as before. The same compiled code runs either way, so the images are the same
bits.

``OIDN_GPU_CUDA_DRIVER_LAUNCH=off`` leaves every launch to Triton.
"""

from __future__ import annotations

import ast
import ctypes
import functools
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from oidn_gpu.backends.cuda import cuda_driver, kernel_specs
from oidn_gpu.errors import InvalidArgumentError

_LOG = logging.getLogger(__name__)

DRIVER_LAUNCH_ENV_VAR = "OIDN_GPU_CUDA_DRIVER_LAUNCH"

# Triton's launch defaults for NVIDIA GPUs (triton/backends/nvidia/compiler.py, CUDAOptions)
DEFAULT_WARPS = 4
DEFAULT_STAGES = 3
# Triton 3.6 specializes an integer argument on whether it is a multiple of 16 and a
# pointer on whether it is 16-byte aligned ("D", else ""; None for an argument its
# ``do_not_specialize`` names), and types integers by their range: the kernel lists'
# keys (native_specialize_impl of triton/_C, called from triton/runtime/jit.py).
DIVISOR = 16
I32_RANGE = (-(2**31), 2**31 - 1)
U64_FROM = 2**63
# The metadata of a kernel this launcher runs: no scratch buffers, clusters, cooperative
# or programmatic launches (those need Triton's launcher).
PLAIN_LAUNCH = {
    "num_ctas": 1,
    "launch_pdl": False,
    "launch_cooperative_grid": False,
    "global_scratch_size": 0,
    "profile_scratch_size": 0,
}
ARGUMENT_TYPES = {"i32": ctypes.c_int32, "i64": ctypes.c_int64, "u64": ctypes.c_uint64}
ARGUMENT_TYPES["fp32"] = ctypes.c_float
# The pointers Triton's launcher passes after a kernel's arguments, by the Triton version
# (major.minor) that compiled it: 3.6's launcher (triton/backends/nvidia/driver.py,
# make_launcher) passes global_scratch and profile_scratch. Kernels of other versions are
# left to Triton.
SCRATCH_POINTERS = {"3.6": 2}


def enabled(value: str | None = None) -> bool:
    """Whether launches go through the driver: ``OIDN_GPU_CUDA_DRIVER_LAUNCH`` (on unless
    ``off``/``0``)."""
    value = os.environ.get(DRIVER_LAUNCH_ENV_VAR, "on") if value is None else value
    if value not in ("on", "off", "1", "0", ""):
        raise InvalidArgumentError(
            f"{DRIVER_LAUNCH_ENV_VAR}={value!r} is unknown; expected on or off"
        )
    return value not in ("off", "0")


@dataclass(frozen=True)
class Signature:
    """A kernel's parameters: names in order, Triton's types (``"constexpr"``, ``"i32"``,
    ``"*fp16"``...) and those Triton does not specialize (``do_not_specialize``)."""

    names: tuple[str, ...]
    types: tuple[str, ...]
    unspecialized: frozenset[str] = frozenset()


# A kernel module's decorators that name the arguments Triton must not specialize:
# ``@_jit("height", "width", ...)`` right above ``def name(`` (the kernel modules' `_jit`).
_UNSPECIALIZED = re.compile(r"^@_jit\(([^)]*)\)\s*\ndef (\w+)\(", re.MULTILINE)
_MODULE_FOLDER = Path(__file__).resolve().parent
_PACKAGE = "oidn_gpu.backends.cuda."


@functools.cache
def unspecialized(module: str) -> dict[str, frozenset[str]]:
    """Kernel name -> the arguments its ``_jit`` decorator keeps Triton from specializing,
    for a kernel module of this package (``module``: its qualified name), read from its
    source without importing it (a module this package does not have: none)."""
    if not module.startswith(_PACKAGE) or "." in module[len(_PACKAGE) :]:
        return {}
    try:
        source = (_MODULE_FOLDER / f"{module[len(_PACKAGE) :]}.py").read_text("utf-8")
    except OSError:
        return {}
    return {
        match.group(2): frozenset(ast.literal_eval(f"[{match.group(1)}]"))
        for match in _UNSPECIALIZED.finditer(source)
    }


def signature_of(spec: dict[str, Any]) -> Signature:
    """The `Signature` of a kernel list's specialization (Triton's specialization data)."""
    module, _, name = str(spec["name"]).rpartition(".")
    names = tuple(spec["signature"])
    kept = unspecialized(module).get(name, frozenset())
    return Signature(names, tuple(spec["signature"].values()), kept & frozenset(names))


@dataclass(frozen=True)
class Variant:
    """One compiled specialization of a kernel, as its cache entry holds it."""

    entry: str
    record: str  # its kernel list line
    qualified: str  # the kernel's function in this package
    symbol: str  # the kernel's name in the compiled code
    code: bytes  # the cubin
    num_warps: int
    shared: int  # dynamic shared memory bytes
    arguments: tuple[Any, ...]  # a ctypes type per argument passed (None: a pointer)
    scratch: int  # null pointers passed after the arguments


Key = tuple[tuple[tuple[str, Any], ...], int, int]  # specialization, warps, stages


def parse_key(spec: dict[str, Any]) -> Key:
    """The `Key` of a kernel list's specialization (``spec``: Triton's specialization data,
    whose ``key`` is Triton's in-process key text, ``str(specialization) +
    str(options passed)``; the warps and stages are those it was compiled with).

    Raises:
        ValueError: not such a text, or options this launcher does not pass.
    """
    text, options = str(spec["key"]), spec["options"]
    specialization = ast.literal_eval(text[: text.rindex("]{") + 1])
    if options.get("debug") or options.get("instrumentation_mode"):
        raise ValueError(f"debug or instrumented kernels need Triton's launcher ({options})")
    parts = tuple((str(kind), value) for kind, value in specialization)
    return parts, int(options["num_warps"]), int(options["num_stages"])


def _pointer_types() -> dict[Any, str]:
    import torch

    return {
        torch.float16: "*fp16",
        torch.bfloat16: "*bf16",
        torch.float32: "*fp32",
        torch.float64: "*fp64",
        torch.int8: "*i8",
        torch.uint8: "*u8",
        torch.int16: "*i16",
        torch.int32: "*i32",
        torch.int64: "*i64",
    }


_POINTERS: dict[Any, str] = {}


def specialize(value: Any) -> tuple[str, Any] | None:
    """Triton's specialization of one non-constexpr argument, or None where this launcher
    does not pass such an argument (a bool, a NumPy scalar, a tensor off the GPU...)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if I32_RANGE[0] <= value <= I32_RANGE[1]:
            kind = "i32"
        else:
            kind = "u64" if value >= U64_FROM else "i64"
        return kind, "D" if value % DIVISOR == 0 else ""
    if isinstance(value, float):
        return "fp32", None
    if not _POINTERS:
        _POINTERS.update(_pointer_types())
    kind = _POINTERS.get(getattr(value, "dtype", None))
    if kind is None or not getattr(value, "is_cuda", False):
        return None
    return kind, "D" if value.data_ptr() % DIVISOR == 0 else ""


def bind(
    signature: Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Key, list[Any]] | None:
    """The `Key` of a launch ``kernel[grid](*args, **kwargs)`` and the values it passes
    (the non-constexpr arguments in order); None where an argument is missing (a default
    this launcher does not know), unknown, or not one it passes."""
    names = signature.names
    if len(args) > len(names):
        return None
    values = dict(zip(names, args, strict=False))  # the rest passed by name
    warps, stages = DEFAULT_WARPS, DEFAULT_STAGES
    for name, value in kwargs.items():
        if name == "num_warps":
            warps = value
        elif name == "num_stages":
            stages = value
        elif name in values or name not in names:
            return None
        else:
            values[name] = value
    if len(values) != len(names):
        return None
    parts = []
    passed = []
    for name, kind in zip(names, signature.types, strict=True):
        value = values[name]
        if kind == "constexpr":
            parts.append(("constexpr", value))
            continue
        part = specialize(value)
        if part is None:
            return None
        parts.append((part[0], None) if name in signature.unspecialized else part)
        passed.append(value)
    return (tuple(parts), warps, stages), passed


def pack_arguments(variant: Variant, key_args: list[Any]) -> Any:
    """The ctypes array of pointers to the launch's argument values (``key_args``: the
    non-constexpr values in order), then the null scratch pointers; the values are kept
    alive by the array's ``_keep``."""
    holders: list[Any] = []
    for value, kind in zip(key_args, variant.arguments, strict=True):
        holders.append(ctypes.c_uint64(value.data_ptr()) if kind is None else kind(value))
    holders += [ctypes.c_uint64(0) for _ in range(variant.scratch)]
    params = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
    params._keep = holders  # type: ignore[attr-defined]
    return params


def grid_of(grid: Any) -> tuple[int, int, int] | None:
    """A launch grid of 1 to 3 ints as three; None for any other (a callable grid)."""
    if not isinstance(grid, tuple) or not 1 <= len(grid) <= 3:
        return None
    if not all(isinstance(g, int) and not isinstance(g, bool) for g in grid):
        return None
    return (*grid, 1, 1)[:3]  # type: ignore[return-value]


def _variant(
    record: str, qualified: str, signature: Signature, files: dict[str, bytes], short: str
) -> Variant:
    """The `Variant` of a kernel list line ``record`` (its cache entry's ``files`` by name).

    Raises:
        ValueError: the entry lacks its code or metadata, or needs Triton's launcher.
    """
    entry = str(json.loads(record)["entry"])
    if f"{short}.json" not in files or f"{short}.cubin" not in files:
        raise ValueError(f"entry {entry} lacks {short}'s compiled code or metadata")
    metadata = json.loads(files[f"{short}.json"])
    version = ".".join(str(metadata.get("triton_version", "")).split(".")[:2])
    if version not in SCRATCH_POINTERS:
        raise ValueError(f"kernels of Triton {version or 'unknown'} need Triton's launcher")
    for field, plain in PLAIN_LAUNCH.items():
        if metadata.get(field, plain) != plain:
            raise ValueError(f"{field}={metadata.get(field)!r} needs Triton's launcher")
    if metadata.get("tensordesc_meta"):
        raise ValueError("tensor descriptors need Triton's launcher")
    arguments = []
    for kind in signature.types:
        if kind == "constexpr":
            continue
        if kind.startswith("*"):
            arguments.append(None)
        elif kind in ARGUMENT_TYPES:
            arguments.append(ARGUMENT_TYPES[kind])
        else:
            raise ValueError(f"an argument of type {kind} needs Triton's launcher")
    return Variant(
        entry=entry,
        record=record,
        qualified=qualified,
        symbol=str(metadata["name"]),
        code=files[f"{short}.cubin"],
        num_warps=int(metadata["num_warps"]),
        shared=int(metadata["shared"]),
        arguments=tuple(arguments),
        scratch=SCRATCH_POINTERS[version],
    )


class Found(NamedTuple):
    """A launch's loaded variant and the values it passes (`DriverLaunches.find`)."""

    variant: Variant
    passed: list[Any]


@dataclass
class _Kernel:
    """What is known of one kernel (by its qualified name): its parameters and variants."""

    signature: Signature
    variants: dict[tuple[int, Key], Variant]  # by device (ordinal) and specialization


class DriverLaunches:
    """The kernels loaded through the driver (``driver``: a `cuda_driver.CudaDriver`, or
    a stand-in with its ``load``/``launch``/``make_current``) and their launches."""

    def __init__(self, driver: Callable[[], Any]) -> None:
        self._driver = driver
        self._kernels: dict[str, _Kernel] = {}
        self._loaded: dict[tuple[int, str], tuple[int, int]] = {}  # (device, entry) -> fn
        self._lock = threading.Lock()
        # kernel -> [launches through the driver, launches handed to Triton]
        self.counts: dict[str, list[int]] = {}

    def count(self, qualified: str, *, through_driver: bool) -> None:
        """Count a launch of kernel ``qualified`` (`counts`); the first one handed to
        Triton is logged."""
        counts = self.counts.setdefault(qualified, [0, 0])
        counts[0 if through_driver else 1] += 1
        if not through_driver and counts[1] == 1:
            _LOG.info("cuda: a launch of %s has no kernel loaded by the driver", qualified)

    def knows(self, qualified: str) -> bool:
        return qualified in self._kernels

    def serving(self) -> bool:
        """Whether any kernel is loaded through the driver in this process."""
        return bool(self._kernels)

    def serve(
        self, records: Iterable[str], files: Callable[[str], dict[str, bytes] | None], device: int
    ) -> int:
        """Load every kernel of ``records`` (kernel list lines) onto ``device`` (its
        ordinal) from its entry's files (``files(entry)``: by file name, None when
        missing); returns how many. Nothing is kept unless all of them load.

        Raises:
            ValueError: a record without its entry, compiled code or metadata, or a
                kernel that needs Triton's launcher.
        """
        found: list[tuple[str, Signature, Key, Variant]] = []
        for record in records:
            data = json.loads(record)
            spec = json.loads(data["spec"])
            entry, qualified = data.get("entry"), str(spec["name"])
            entry_files = files(str(entry)) if entry else None
            if entry_files is None:
                raise ValueError(f"no compiled code for {qualified} (entry {entry})")
            signature = signature_of(spec)
            key = parse_key(spec)
            short = qualified.rsplit(".", 1)[-1][:150]  # Triton's file names (compiler.py)
            found.append(
                (
                    qualified,
                    signature,
                    key,
                    _variant(record, qualified, signature, entry_files, short),
                )
            )
        with self._lock:
            for *_, variant in found:
                self._function(device, variant)
            for qualified, signature, key, variant in found:
                known = self._kernels.setdefault(qualified, _Kernel(signature, {}))
                if known.signature == signature:
                    known.variants[(device, key)] = variant
        return len(found)

    def _function(self, device: int, variant: Variant) -> tuple[int, int]:
        """``(function handle, registers)`` of ``variant`` on ``device``, loaded on first
        use (under the lock)."""
        loaded = self._loaded.get((device, variant.entry))
        if loaded is None:
            loaded = self._driver().load(variant.code, variant.symbol, variant.shared, device)
            self._loaded[(device, variant.entry)] = loaded
        return loaded

    def find(
        self, qualified: str, device: int, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Found | None:
        """The variant of kernel ``qualified`` loaded on ``device`` that this launch's
        arguments select, with the values they pass."""
        kernel = self._kernels.get(qualified)
        bound = bind(kernel.signature, args, kwargs) if kernel is not None else None
        if kernel is None or bound is None:
            return None
        variant = kernel.variants.get((device, bound[0]))
        return None if variant is None else Found(variant, bound[1])

    def launch(self, found: Found, grid: tuple[int, int, int], device: int, stream: int) -> None:
        """Launch a `find` result on ``stream`` of ``device`` (nothing for an empty grid, as
        Triton)."""
        variant = found.variant
        if grid[0] * grid[1] * grid[2] == 0:
            return
        params = pack_arguments(variant, found.passed)
        with self._lock:
            function, _ = self._function(device, variant)
        driver = self._driver()
        driver.make_current(device)
        driver.launch(function, grid, 32 * variant.num_warps, variant.shared, stream, params)
        self.count(variant.qualified, through_driver=True)
        kernel_specs.note_launched(variant.record)  # where a background compile records

    def device_properties(self, device: int) -> dict[str, int]:
        """What `row_conv.resident_programs` reads of a GPU, named as Triton's
        ``get_device_properties`` names them."""
        driver = self._driver()
        return {
            "max_shared_mem": driver.device_attribute(
                cuda_driver.DEVICE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device
            ),
            "max_num_regs": driver.device_attribute(
                cuda_driver.DEVICE_MAX_REGISTERS_PER_BLOCK, device
            ),
            "multiprocessor_count": driver.device_attribute(
                cuda_driver.DEVICE_MULTIPROCESSOR_COUNT, device
            ),
        }

    def registers(self, found: Found, device: int) -> tuple[int, int]:
        """``(registers per thread, dynamic shared memory bytes)`` of a `find` result."""
        variant = found.variant
        with self._lock:
            _, registers = self._function(device, variant)
        return registers, variant.shared


class DriverKernel:
    """A kernel of a kernel module as the frame code launches it, ``kernel[grid](*args,
    **kwargs)``: through the driver where `DriverLaunches` has the launch's variant, else
    through the Triton kernel (``triton_kernel()``, which imports Triton)."""

    def __init__(
        self, launches: DriverLaunches, qualified: str, triton_kernel: Callable[[], Any]
    ) -> None:
        self.launches = launches
        self.qualified = qualified
        self._triton_kernel = triton_kernel

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return functools.partial(self._run, grid)

    def _run(self, grid: Any, *args: Any, **kwargs: Any) -> None:
        import torch

        dims = grid_of(grid)
        device = torch.cuda.current_device()  # Triton's too: the current device's kernels
        found = self.find(device, args, kwargs) if dims is not None else None
        if found is None or dims is None:
            self.launches.count(self.qualified, through_driver=False)
            self._triton_kernel()[grid](*args, **kwargs)
            return
        stream = torch.cuda.current_stream(device).cuda_stream
        self.launches.launch(found, dims, device, stream)

    def find(self, device: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The variant loaded on ``device`` that these arguments launch (None: the Triton
        kernel runs them)."""
        return self.launches.find(self.qualified, device, args, kwargs)

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        """Triton's ``warmup`` (compile or load without a launch) of the Triton kernel."""
        return self._triton_kernel().warmup(*args, grid=grid, **kwargs)


class KernelNamespace:
    """A kernel module's face for the frame code: its kernels that `DriverLaunches` knows
    as `DriverKernel`s, anything else from the module itself (``module()``, imported on
    first use)."""

    def __init__(self, launches: DriverLaunches, name: str, module: Callable[[], Any]) -> None:
        self._launches = launches
        self._name = name  # the module's qualified name
        self._module = module
        self._kernels: dict[str, DriverKernel] = {}

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        kernel = self._kernels.get(attribute)
        if kernel is not None:
            return kernel
        qualified = f"{self._name}.{attribute}"
        if not self._launches.knows(qualified):
            return getattr(self._module(), attribute)
        kernel = DriverKernel(self._launches, qualified, lambda: getattr(self._module(), attribute))
        self._kernels[attribute] = kernel
        return kernel


LAUNCHES = DriverLaunches(cuda_driver.driver)  # the process's kernels loaded through the driver
