"""Adapter and device creation, device capabilities, and the narrow device interface.

`GpuDevice` is the only object through which the wgpu backend talks to a GPU:
buffers, uploads, shader modules, pipelines, bind groups, command encoders,
submissions, fences, query sets and readback. Executors and the denoise
pipeline never call wgpu directly, so a recording device (which captures
everything a denoise submits into a replayable program, seed 004's
``RecordingDevice``) can later stand in with the same methods and no second
code path.

`open_device()` requests a high-performance Vulkan, Metal or D3D12 adapter (wgpu's
instance is created without its OpenGL backend) and a device with the
optional features the kernels can use (``shader-f16``, ``subgroup``,
``timestamp-query``) and the adapter's maximum of every limit the kernels and
the planner depend on; or it wraps a caller-owned ``wgpu.GPUDevice``.
`Capabilities` is a frozen snapshot of what that device offers.

wgpu is imported only inside this package; a missing wgpu raises
`MissingDependencyError` naming the extra to install.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu.errors import (
    InvalidArgumentError,
    OutOfMemoryError,
    ShaderCompileError,
    UnsupportedDeviceError,
    require,
)

wgpu = require("wgpu", "wgpu")

# The optional features the kernels can use, by their wgpu-native names.
FEATURE_F16 = "shader-f16"
FEATURE_SUBGROUP = "subgroup"
FEATURE_TIMESTAMP = "timestamp-query"
OPTIONAL_FEATURES = (FEATURE_F16, FEATURE_SUBGROUP, FEATURE_TIMESTAMP)

# WGSL `enable`/capability names used in Kernel.features -> device feature needed.
KERNEL_FEATURE_TO_DEVICE = {
    "f16": FEATURE_F16,
    "shader-f16": FEATURE_F16,
    "subgroups": FEATURE_SUBGROUP,
    "subgroup": FEATURE_SUBGROUP,
}

# Limits requested at the adapter's maximum (the defaults are far too small for
# 4K activations: 128 MiB storage bindings, 16 KiB workgroup memory).
MAX_LIMITS = (
    "max-buffer-size",
    "max-storage-buffer-binding-size",
    "max-compute-workgroup-storage-size",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-size-x",
    "max-compute-workgroup-size-y",
    "max-compute-workgroup-size-z",
    "max-compute-workgroups-per-dimension",
    "max-storage-buffers-per-shader-stage",
    "max-uniform-buffer-binding-size",
)

# Environment switch: "1" builds every kernel with wgpu's runtime checks even
# when the generator marks it trusted (for debugging and equality tests).
SHADER_CHECKS_ENV = "OIDN_GPU_SHADER_CHECKS"

# WGPUShaderRuntimeChecks_None in wgpu-native's wgpu.h.
_RUNTIME_CHECKS_NONE = 0

# The wgpu-native instance backends oidn-gpu runs on (wgpu-py's InstanceBackend flag
# names). OpenGL/GLES is left out: wgpu-hal's EGL start-up has aborted the whole
# process with a Rust panic on a machine whose only driver was OpenGL, so the GL
# backend must never even be initialized.
INSTANCE_BACKENDS = ("Vulkan", "Metal", "DX12")
# The same backends as adapters report them (adapter.info["backend_type"]).
ADAPTER_BACKENDS = frozenset({"Vulkan", "Metal", "D3D12"})
NO_ADAPTER_MESSAGE = (
    "no Vulkan, Metal or D3D12 adapter found (OpenGL adapters are not used); install "
    "your GPU's Vulkan driver, or Mesa's lavapipe for a CPU fallback "
    "(Debian/Ubuntu: apt install mesa-vulkan-drivers)"
)
_instance_lock = threading.Lock()
_instance_restricted = False

BufferUsage = wgpu.BufferUsage
STORAGE_USAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


def shader_checks_forced() -> bool:
    """True when ``OIDN_GPU_SHADER_CHECKS=1`` asks for runtime checks on every kernel."""
    return os.environ.get(SHADER_CHECKS_ENV, "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class AdapterInfo:
    """What the adapter says about itself."""

    vendor: str
    architecture: str
    device: str
    description: str
    adapter_type: str
    backend_type: str

    @property
    def is_cpu(self) -> bool:
        return self.adapter_type.lower() == "cpu"

    @property
    def is_discrete(self) -> bool:
        return "discrete" in self.adapter_type.lower()


@dataclass(frozen=True)
class Capabilities:
    """Features and limits of an open device, frozen at creation.

    Attributes:
        features: device feature names (wgpu-native spelling).
        limits: every device limit as ``(name, value)`` pairs, sorted by name.
        subgroup_min_size: smallest subgroup size the adapter reports (0 if unknown).
        subgroup_max_size: largest subgroup size the adapter reports (0 if unknown).
        adapter: the adapter's description.
    """

    features: frozenset[str]
    limits: tuple[tuple[str, int], ...]
    subgroup_min_size: int
    subgroup_max_size: int
    adapter: AdapterInfo

    def limit(self, name: str) -> int:
        """The value of limit ``name`` (wgpu spelling, e.g. ``max-buffer-size``)."""
        for key, value in self.limits:
            if key == name:
                return value
        raise KeyError(f"unknown device limit '{name}'")

    @property
    def has_f16(self) -> bool:
        return FEATURE_F16 in self.features

    @property
    def has_subgroups(self) -> bool:
        return FEATURE_SUBGROUP in self.features

    @property
    def has_timestamps(self) -> bool:
        return FEATURE_TIMESTAMP in self.features

    @property
    def max_storage_buffer_binding_size(self) -> int:
        return self.limit("max-storage-buffer-binding-size")

    @property
    def max_buffer_size(self) -> int:
        return self.limit("max-buffer-size")

    @property
    def max_compute_workgroup_storage_size(self) -> int:
        return self.limit("max-compute-workgroup-storage-size")

    @property
    def max_compute_invocations_per_workgroup(self) -> int:
        return self.limit("max-compute-invocations-per-workgroup")

    @property
    def max_compute_workgroup_size(self) -> tuple[int, int, int]:
        return (
            self.limit("max-compute-workgroup-size-x"),
            self.limit("max-compute-workgroup-size-y"),
            self.limit("max-compute-workgroup-size-z"),
        )

    @property
    def max_compute_workgroups_per_dimension(self) -> int:
        return self.limit("max-compute-workgroups-per-dimension")

    @property
    def max_storage_buffers_per_shader_stage(self) -> int:
        return self.limit("max-storage-buffers-per-shader-stage")

    def supports_kernel_features(self, features: Sequence[str]) -> bool:
        """Whether every WGSL feature a kernel declares is enabled on this device."""
        return all(KERNEL_FEATURE_TO_DEVICE.get(f, f) in self.features for f in features)

    def describe(self) -> str:
        a = self.adapter
        return f"{a.device} ({a.backend_type}, {a.adapter_type}; {a.description})".strip()


def _adapter_info(adapter: Any) -> tuple[AdapterInfo, int, int]:
    info = dict(adapter.info) if adapter is not None else {}

    def text(key: str) -> str:
        return str(info.get(key, "") or "")

    # wgpu-py 0.32 spells the subgroup sizes "stackgroup_*"; newer ones "subgroup_*".
    sub_min = int(info.get("subgroup_min_size", info.get("stackgroup_min_size", 0)) or 0)
    sub_max = int(info.get("subgroup_max_size", info.get("stackgroup_max_size", 0)) or 0)
    return (
        AdapterInfo(
            vendor=text("vendor"),
            architecture=text("architecture"),
            device=text("device"),
            description=text("description"),
            adapter_type=text("adapter_type"),
            backend_type=text("backend_type"),
        ),
        sub_min,
        sub_max,
    )


def capabilities_of(device: Any, adapter: Any = None) -> Capabilities:
    """Snapshot the features and limits of a wgpu device."""
    info, sub_min, sub_max = _adapter_info(adapter if adapter is not None else device.adapter)
    limits = tuple(sorted((str(k), int(v)) for k, v in dict(device.limits).items()))
    return Capabilities(
        features=frozenset(str(f) for f in device.features),
        limits=limits,
        subgroup_min_size=sub_min,
        subgroup_max_size=sub_max,
        adapter=info,
    )


class Fence:
    """Signals once all work submitted to the queue before its creation has finished.

    wgpu-py 0.32's ``on_submitted_work_done_async`` declares the wrong callback
    type for wgpu-native's ``WGPUQueueWorkDoneCallback``, so this calls
    ``wgpuQueueOnSubmittedWorkDone`` itself; the device's poll thread drives it.
    """

    def __init__(self, device: Any) -> None:
        from wgpu.backends.wgpu_native import _api

        self._event = threading.Event()
        self._failed = False
        ffi, lib, libf = _api.ffi, _api.lib, _api.libf

        @ffi.callback("void(WGPUQueueWorkDoneStatus, WGPUStringView, void *, void *)")
        def _done(status: int, _message: Any, _u1: Any, _u2: Any) -> None:
            self._failed = status != lib.WGPUQueueWorkDoneStatus_Success
            token.set_done()
            self._event.set()

        self._callback = _done  # keep alive until it fires
        info = _api.new_struct(
            "WGPUQueueWorkDoneCallbackInfo",
            mode=lib.WGPUCallbackMode_AllowProcessEvents,
            callback=_done,
        )
        token = device._poller.get_token()
        self._token = token
        libf.wgpuQueueOnSubmittedWorkDone(device.queue._internal, info)

    def is_done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout_s: float | None = None) -> bool:
        return self._event.wait(timeout_s)


class GpuDevice:
    """A wgpu device, its capabilities, and the narrow interface the backend uses.

    Create one with `open_device`. Several executors may share one `GpuDevice`
    (and its pipeline cache). ``owned`` is False for a caller-supplied device,
    which `close` then leaves alone.
    """

    def __init__(self, device: Any, adapter: Any = None, *, owned: bool = False) -> None:
        self.device = device
        self.adapter = adapter if adapter is not None else getattr(device, "adapter", None)
        self.queue = device.queue
        self.capabilities = capabilities_of(device, self.adapter)
        self.owned = owned
        self._timestamp_period_ns: float | None = None

    # -- resources -------------------------------------------------------------------

    def create_buffer(self, label: str, byte_size: int, usage: int = STORAGE_USAGE) -> Any:
        """A zero-initialized buffer of at least 4 bytes, size rounded up to 4."""
        byte_size = max(4, (int(byte_size) + 3) // 4 * 4)
        if byte_size > self.capabilities.max_buffer_size:
            raise OutOfMemoryError(
                f"buffer '{label}' needs {byte_size} bytes but the device allows at most "
                f"{self.capabilities.max_buffer_size}; use smaller tiles"
            )
        try:
            return self.device.create_buffer(label=label, size=byte_size, usage=usage)
        except MemoryError as err:
            raise OutOfMemoryError(
                f"out of GPU memory allocating '{label}' ({byte_size} bytes)"
            ) from err

    def create_buffer_with_data(self, label: str, data: np.ndarray | bytes, usage: int) -> Any:
        raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
        padded = raw + b"\0" * (-len(raw) % 4 or (4 if not raw else 0))
        return self.device.create_buffer_with_data(label=label, data=padded, usage=usage)

    def write_buffer(self, buffer: Any, byte_offset: int, data: np.ndarray | bytes) -> None:
        if isinstance(data, np.ndarray):
            raw = memoryview(np.ascontiguousarray(data)).cast("B")
        else:
            raw = data
        self.queue.write_buffer(buffer, byte_offset, raw)

    def read_buffer(self, buffer: Any, byte_offset: int = 0, byte_size: int | None = None) -> bytes:
        """Copy a buffer (which needs COPY_SRC) to the host; waits for the queue."""
        return bytes(self.queue.read_buffer(buffer, byte_offset, byte_size))

    def create_query_set(self, label: str, count: int) -> Any:
        return self.device.create_query_set(label=label, type="timestamp", count=count)

    # -- kernels ---------------------------------------------------------------------

    def create_shader_module(self, label: str, source: str, *, trusted: bool) -> Any:
        """Compile WGSL; ``trusted`` skips wgpu's runtime bounds checks and loop bounding.

        Raises:
            GPUValidationError (wgpu's) on a compile error; the pipeline cache turns it
            into a `ShaderCompileError`.
        """
        if not trusted:
            return self.device.create_shader_module(label=label, code=source)
        return _create_trusted_shader_module(self.device, label, source)

    def create_compute_pipeline(self, label: str, module: Any, entry_point: str) -> Any:
        return self.device.create_compute_pipeline(
            label=label, layout="auto", compute={"module": module, "entry_point": entry_point}
        )

    def create_bind_group(self, label: str, pipeline: Any, buffers: Sequence[Any]) -> Any:
        """Bind ``buffers`` in order to bindings 0..n-1 of group 0 (whole buffers)."""
        entries = [
            {"binding": index, "resource": {"buffer": buffer, "offset": 0, "size": buffer.size}}
            for index, buffer in enumerate(buffers)
        ]
        return self.device.create_bind_group(
            label=label, layout=pipeline.get_bind_group_layout(0), entries=entries
        )

    # -- commands --------------------------------------------------------------------

    def create_command_encoder(self, label: str) -> Any:
        return self.device.create_command_encoder(label=label)

    def submit(self, command_buffers: Sequence[Any]) -> None:
        self.queue.submit(list(command_buffers))

    def fence(self) -> Fence:
        """A fence for all work submitted so far."""
        return Fence(self.device)

    def wait_idle(self) -> None:
        """Block until the queue has finished all submitted work."""
        self.device._poll_wait()

    @property
    def timestamp_period_ns(self) -> float:
        """Nanoseconds per resolved timestamp tick."""
        if self._timestamp_period_ns is None:
            from wgpu.backends.wgpu_native import _api

            period = float(_api.libf.wgpuQueueGetTimestampPeriod(self.queue._internal))
            self._timestamp_period_ns = period if period > 0 else 1.0
        return self._timestamp_period_ns

    def close(self) -> None:
        """Destroy the device if this object created it."""
        if self.owned and self.device is not None:
            with contextlib.suppress(Exception):
                self.device.destroy()
        self.owned = False

    def __repr__(self) -> str:
        return f"GpuDevice({self.capabilities.describe()!r})"


def _create_trusted_shader_module(device: Any, label: str, source: str) -> Any:
    """``wgpuDeviceCreateShaderModuleTrusted`` with runtime checks off.

    Builds the same ``WGPUShaderModuleDescriptor`` chain as wgpu-py's
    ``create_shader_module`` and wraps the handle as its ``GPUShaderModule``.
    """
    from wgpu.backends.wgpu_native import _api

    ffi, lib, libf = _api.ffi, _api.lib, _api.libf
    source_struct = _api.new_struct_p("WGPUShaderSourceWGSL *", code=_api.to_c_string_view(source))
    source_struct[0].chain.next = ffi.NULL
    source_struct[0].chain.sType = lib.WGPUSType_ShaderSourceWGSL
    chain = ffi.cast("WGPUChainedStruct *", source_struct)
    descriptor = _api.new_struct_p(
        "WGPUShaderModuleDescriptor *", nextInChain=chain, label=_api.to_c_string_view(label)
    )
    handle = libf.wgpuDeviceCreateShaderModuleTrusted(
        device._internal, descriptor, _RUNTIME_CHECKS_NONE
    )
    if handle == ffi.NULL:
        raise ShaderCompileError(f"trusted shader module creation failed for '{label}'")
    return _api.GPUShaderModule(label, handle, device)


def _restrict_instance_backends() -> None:
    """Create wgpu's process-wide instance with only `INSTANCE_BACKENDS`, before any
    adapter is requested or enumerated. An instance the application created first is
    left as it is (its adapters are filtered by `_is_allowed` instead)."""
    global _instance_restricted
    with _instance_lock:
        if _instance_restricted:
            return
        from wgpu.backends.wgpu_native.extras import set_instance_extras

        # RuntimeError: the instance already exists
        with contextlib.suppress(RuntimeError), _native_stderr_silenced():
            set_instance_extras(backends=INSTANCE_BACKENDS)
        _instance_restricted = True


def _is_allowed(adapter: Any) -> bool:
    return str(dict(adapter.info).get("backend_type", "")) in ADAPTER_BACKENDS


def _request_adapter(power_preference: str) -> Any:
    _restrict_instance_backends()
    with _xdg_notice_silenced():
        try:
            adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
        except RuntimeError:  # wgpu-native reports "no adapter" as a failed request
            adapter = None
    if adapter is not None and not _is_allowed(adapter):
        # only where the application created wgpu's instance with OpenGL enabled
        allowed = enumerate_adapters()
        adapter = allowed[0] if allowed else None
    if adapter is None:
        raise UnsupportedDeviceError(NO_ADAPTER_MESSAGE)
    return adapter


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Silence C-level stderr (driver chatter such as Mesa's XDG_RUNTIME_DIR notice)."""
    try:
        saved = os.dup(2)
    except OSError:  # no usable stderr descriptor: nothing to silence
        yield
        return
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _xdg_runtime_dir_usable() -> bool:
    path = os.environ.get("XDG_RUNTIME_DIR")
    return bool(path) and os.path.isdir(path)


@contextlib.contextmanager
def _xdg_notice_silenced() -> Iterator[None]:
    """Silence native stderr while a device opens, but only where Mesa would print its
    "XDG_RUNTIME_DIR is invalid or not set" notice (a headless or CI shell): that notice
    reads as an error and is harmless to compute work. Elsewhere nothing is silenced."""
    if _xdg_runtime_dir_usable():
        yield
    else:
        with _native_stderr_silenced():
            yield


def enumerate_adapters() -> list[Any]:
    """Every Vulkan, Metal and D3D12 adapter of this machine (driver chatter while
    probing is silenced)."""
    _restrict_instance_backends()
    with _native_stderr_silenced():
        return [a for a in wgpu.gpu.enumerate_adapters_sync() if _is_allowed(a)]


def has_hardware_adapter() -> bool:
    """True when a WebGPU adapter exists that is not a CPU rasterizer (lavapipe, WARP).

    A probe for ``backend="auto"``: driver messages printed while enumerating
    adapters are silenced, since nothing is wrong when a machine has no GPU.
    """
    _restrict_instance_backends()
    with _native_stderr_silenced():
        try:
            adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        except RuntimeError:  # no adapter at all
            return False
    if adapter is None or not _is_allowed(adapter):
        return False
    info, _, _ = _adapter_info(adapter)
    return not info.is_cpu


def open_device(
    device: Any = None,
    *,
    power_preference: str = "high-performance",
    features: Sequence[str] | None = None,
) -> GpuDevice:
    """Open a GPU device for oidn-gpu, or wrap a caller-supplied one.

    Args:
        device: an existing ``wgpu.GPUDevice`` (or `GpuDevice`) to use as is; it is not
            destroyed by `GpuDevice.close`. None creates a new device.
        power_preference: ``"high-performance"`` or ``"low-power"``.
        features: optional features to request when available; default
            ``shader-f16``, ``subgroup`` and ``timestamp-query``.

    Returns:
        The `GpuDevice`.

    Raises:
        UnsupportedDeviceError: no Vulkan, Metal or D3D12 adapter exists (OpenGL
            adapters are never used).
        InvalidArgumentError: ``device`` is not a wgpu device.
    """
    if isinstance(device, GpuDevice):
        return device
    if device is not None:
        if not hasattr(device, "create_compute_pipeline") or not hasattr(device, "queue"):
            raise InvalidArgumentError(
                f"device must be a wgpu.GPUDevice, got {type(device).__name__}"
            )
        return GpuDevice(device, owned=False)
    if power_preference not in ("high-performance", "low-power"):
        raise InvalidArgumentError(
            f"unknown power preference '{power_preference}'; expected 'high-performance' "
            "or 'low-power'"
        )
    adapter = _request_adapter(power_preference)
    wanted = OPTIONAL_FEATURES if features is None else tuple(features)
    available = set(adapter.features)
    required_features = [f for f in wanted if f in available]
    adapter_limits = dict(adapter.limits)
    required_limits = {name: adapter_limits[name] for name in MAX_LIMITS if name in adapter_limits}
    with _xdg_notice_silenced():
        created = adapter.request_device_sync(
            label="oidn-gpu",
            required_features=required_features,
            required_limits=required_limits,
        )
    return GpuDevice(created, adapter, owned=True)
