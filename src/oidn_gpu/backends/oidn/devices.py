"""Intel OIDN's devices: the ``device`` option, the physical devices OIDN sees, and one
committed device (`OidnDevice`).

``device`` names OIDN's device types as OIDN does: ``"cpu"``, ``"cuda"``, ``"hip"``,
``"sycl"``, or None / ``"auto"`` (OIDN's default device: the fastest it supports, a GPU
before the CPU); ``"cuda:N"`` and ``"hip:N"`` pick the N-th GPU of that API (OIDN's
``oidnNewCUDADevice``/``oidnNewHIPDevice``), and a ``torch.device`` of a CUDA GPU is read
as ``"cuda:N"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oidn_gpu.backends.oidn import capi
from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError, one_of

AUTO = "auto"
# OIDNDeviceType values (oidn.h) of the device types this backend opens.
DEVICE_TYPES = {AUTO: 0, "cpu": 1, "sycl": 2, "cuda": 3, "hip": 4}
TYPE_NAMES = {1: "cpu", 2: "sycl", 3: "cuda", 4: "hip", 5: "metal"}
GPU_KINDS = ("cuda", "hip", "sycl", "metal")
INDEXED_KINDS = ("cuda", "hip")  # "cuda:N", "hip:N"


def parse_device(value: Any) -> str | None:
    """The ``device`` option normalized: None (OIDN's default), ``"cpu"``, ``"cuda"``,
    ``"cuda:N"``, ``"hip"``, ``"hip:N"`` or ``"sycl"``.

    Raises:
        InvalidArgumentError: another value.
    """
    if value is None or value == AUTO:
        return None
    if type(value).__module__.split(".")[0] == "torch":  # a torch.device
        kind, index = str(getattr(value, "type", "")), getattr(value, "index", None)
        value = kind if index is None or kind == "cpu" else f"{kind}:{index}"
    if isinstance(value, str):
        kind, colon, index = value.partition(":")
        if kind in DEVICE_TYPES and kind != AUTO and not colon:
            return kind
        if kind in INDEXED_KINDS and index.isdigit():
            return f"{kind}:{int(index)}"
    raise InvalidArgumentError(
        f"unknown device {value!r}; expected {one_of((AUTO, *DEVICE_TYPES.keys() - {AUTO}))} "
        "(Intel OIDN's devices), 'cuda:N' or 'hip:N'"
    )


def device_kind(device: str | None) -> str:
    """``"auto"``, ``"cpu"``, ``"cuda"``, ``"hip"`` or ``"sycl"`` of a parsed device."""
    return AUTO if device is None else device.partition(":")[0]


def is_device_name(value: Any) -> bool:
    """Whether ``value`` names one of OIDN's devices (not ``"auto"``): the ``device`` of
    ``backend="auto"`` that asks for this backend."""
    if not isinstance(value, str) or value == AUTO:
        return False
    try:
        return parse_device(value) is not None
    except InvalidArgumentError:
        return False


@dataclass(frozen=True)
class PhysicalDevice:
    """One device OIDN found: its index, kind (`TYPE_NAMES`) and name."""

    index: int
    kind: str
    name: str


def physical_devices() -> tuple[PhysicalDevice, ...]:
    """The devices Intel OIDN supports on this machine, in OIDN's order (fastest first).

    Raises:
        MissingDependencyError: pyoidn is not installed.
    """
    oidn = capi.library()
    lib, ffi = oidn.lib, oidn.ffi
    found = []
    for index in range(int(lib.oidnGetNumPhysicalDevices())):
        kind = TYPE_NAMES.get(int(lib.oidnGetPhysicalDeviceInt(index, b"type")), "unknown")
        name = lib.oidnGetPhysicalDeviceString(index, b"name")
        found.append(PhysicalDevice(index, kind, ffi.string(name).decode() if name else "?"))
    capi.take_error(oidn, ffi.NULL)  # a query of a device type that is absent is no error
    return tuple(found)


class OidnDevice:
    """One committed Intel OIDN device (released by `release`).

    Args:
        device: a parsed ``device`` option (`parse_device`).
        threads: the CPU device's ``numThreads`` (None: OIDN's default, every core).

    Raises:
        UnsupportedDeviceError: OIDN cannot open that device here (OIDN's message).
        MissingDependencyError: pyoidn is not installed.
    """

    def __init__(self, device: str | None, threads: int | None = None) -> None:
        self.oidn = oidn = capi.library()
        lib, ffi = oidn.lib, oidn.ffi
        kind, _, index = (device or AUTO).partition(":")
        if index:
            new = lib.oidnNewCUDADevice if kind == "cuda" else lib.oidnNewHIPDevice
            handle = new(ffi.new("int[]", [int(index)]), ffi.new("void*[]", [ffi.NULL]), 1)
        else:
            handle = lib.oidnNewDevice(DEVICE_TYPES[kind])
        if handle == ffi.NULL:
            _, message = capi.take_error(oidn, ffi.NULL)
            raise UnsupportedDeviceError(
                f"Intel OIDN cannot open a {device or 'default'} device here: "
                f"{message or 'no such device'} ('oidn-gpu info' lists OIDN's devices)"
            )
        self.handle = handle
        try:
            self.kind = TYPE_NAMES.get(int(lib.oidnGetDeviceInt(handle, b"type")), "unknown")
            if threads is not None and self.kind == "cpu":
                lib.oidnSetDeviceInt(handle, b"numThreads", int(threads))
            lib.oidnCommitDevice(handle)
            capi.check(oidn, handle, "open the device")
        except BaseException:
            lib.oidnReleaseDevice(handle)
            raise
        self.index = int(index) if index else 0
        self.threads = int(lib.oidnGetDeviceInt(handle, b"numThreads")) if self.kind == "cpu" else 0
        self.name = _device_name(self.kind, self.index)

    @property
    def on_gpu(self) -> bool:
        return self.kind in GPU_KINDS

    def check(self, what: str) -> None:
        """Raise the device's pending error (`capi.check`)."""
        capi.check(self.oidn, self.handle, what)

    def release(self) -> None:
        """Release the device (idempotent)."""
        handle, self.handle = self.handle, None
        if handle is not None:
            self.oidn.lib.oidnReleaseDevice(handle)


def _device_name(kind: str, index: int) -> str:
    """The name of the ``index``-th physical device of ``kind`` (for `info`)."""
    try:
        of_kind = [d for d in physical_devices() if d.kind == kind]
    except Exception:  # a name for a report: never worth a failure
        return kind
    return of_kind[index].name if index < len(of_kind) else kind
