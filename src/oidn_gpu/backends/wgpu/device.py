"""Adapter and device creation, and `WgpuDevice`: the `GpuDevice` interface on wgpu.

`WgpuDevice` is the only object through which the wgpu backend talks to a GPU
(the interface, `backends.gpu_device.GpuDevice`, lists what it offers); the
recorder's `RecordingDevice` implements the same interface, so executors and
the denoise pipeline run unchanged against either. Its command encoders
(`WgpuCommandEncoder`) keep consecutive dispatches in one compute pass.

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
import ctypes
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from oidn_gpu.backends.gpu_device import (
    FEATURE_F16,
    FEATURE_SUBGROUP,
    FEATURE_TIMESTAMP,
    KERNEL_FEATURE_TO_DEVICE,
    OPTIONAL_FEATURES,
    STORAGE_USAGE,
    AdapterInfo,
    BufferUsage,
    Capabilities,
    GpuDevice,
    PassTimestamps,
    buffer_byte_size,
    padded_bytes,
    queue_lock_of,
)
from oidn_gpu.backends.wgpu import ffi_types
from oidn_gpu.errors import (
    InvalidArgumentError,
    InvalidOperationError,
    OutOfMemoryError,
    ShaderCompileError,
    UnsupportedDeviceError,
    require,
)
from oidn_gpu.image.host_copy import parallel_copyto

wgpu = require("wgpu", "wgpu")

FENCE_TIMEOUT_S = 60  # wait_idle's bound on a fence callback once the queue is idle

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


def shader_checks_forced() -> bool:
    """True when ``OIDN_GPU_SHADER_CHECKS=1`` asks for runtime checks on every kernel."""
    return os.environ.get(SHADER_CHECKS_ENV, "").strip().lower() in ("1", "true", "yes", "on")


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


class WgpuCommandEncoder:
    """A wgpu command encoder behind the `CommandEncoder` interface.

    Consecutive dispatches share one compute pass (WebGPU orders the dispatches of a
    pass, so this changes nothing but the pass count); a copy, a dispatch with
    timestamps, or `finish` ends it.
    """

    def __init__(self, encoder: Any) -> None:
        self._encoder = encoder
        self._pass: Any = None

    def dispatch(
        self,
        pipeline: Any,
        bind_group: Any,
        groups: Sequence[int],
        *,
        label: str = "",
        timestamps: PassTimestamps | None = None,
    ) -> None:
        if timestamps is not None:
            self._end_pass()
            compute = self._begin(label, timestamps)
        else:
            if self._pass is None:
                self._pass = self._begin(label, None)
            compute = self._pass
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, bind_group)
        compute.dispatch_workgroups(*(int(g) for g in groups))
        if timestamps is not None:
            compute.end()

    def write_timestamps(self, timestamps: PassTimestamps, *, label: str = "") -> None:
        self._end_pass()
        self._begin(label, timestamps).end()

    def copy_buffer(
        self,
        source: Any,
        source_offset: int,
        destination: Any,
        destination_offset: int,
        byte_size: int,
    ) -> None:
        self._end_pass()
        self._encoder.copy_buffer_to_buffer(
            source, source_offset, destination, destination_offset, byte_size
        )

    def resolve_timestamps(self, query_set: Any, count: int, destination: Any) -> None:
        self._end_pass()
        self._encoder.resolve_query_set(query_set, 0, count, destination, 0)

    def finish(self) -> Any:
        self._end_pass()
        return self._encoder.finish()

    def _begin(self, label: str, timestamps: PassTimestamps | None) -> Any:
        writes = None
        if timestamps is not None:
            writes = {"query_set": timestamps.query_set}
            if timestamps.begin_index is not None:
                writes["beginning_of_pass_write_index"] = timestamps.begin_index
            if timestamps.end_index is not None:
                writes["end_of_pass_write_index"] = timestamps.end_index
        return self._encoder.begin_compute_pass(label=label, timestamp_writes=writes)

    def _end_pass(self) -> None:
        if self._pass is not None:
            self._pass.end()
            self._pass = None


class WgpuDevice:
    """A wgpu device, its capabilities, and the `GpuDevice` interface on it.

    Create one with `open_device`. Several executors may share one `WgpuDevice`
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
        self._open_fences: list[Fence] = []  # fences not seen signalled yet (wait_idle)
        # Write mappings requested without waiting: buffer id -> (buffer, its promise).
        self._map_requests: dict[int, tuple[Any, Any]] = {}

    @property
    def handle(self) -> Any:
        """The wgpu device (the pipeline cache hangs off it)."""
        return self.device

    @property
    def queue_lock(self) -> Any:
        """Reentrant lock of the underlying wgpu device, shared by every `WgpuDevice` of it.

        A whole denoise (uploads, submissions, readback) holds it, so denoisers in
        several threads sharing one device take turns on its queue.
        """
        return queue_lock_of(self.device)

    # -- resources -------------------------------------------------------------------

    def create_buffer(self, label: str, byte_size: int, usage: int = STORAGE_USAGE) -> Any:
        """A zero-initialized buffer of `buffer_byte_size` bytes."""
        size = buffer_byte_size(label, byte_size, self.capabilities.max_buffer_size, "the device")
        try:
            return self.device.create_buffer(label=label, size=size, usage=int(usage))
        except MemoryError as err:
            raise OutOfMemoryError(
                f"out of GPU memory allocating '{label}' ({size} bytes)"
            ) from err

    def create_buffer_with_data(self, label: str, data: np.ndarray | bytes, usage: int) -> Any:
        padded = padded_bytes(data)
        buffer_byte_size(label, len(padded), self.capabilities.max_buffer_size, "the device")
        return self.device.create_buffer_with_data(label=label, data=padded, usage=int(usage))

    def write_buffer(self, buffer: Any, byte_offset: int, data: np.ndarray | bytes) -> None:
        if isinstance(data, np.ndarray):
            raw = memoryview(np.ascontiguousarray(data)).cast("B")
        else:
            raw = data
        self.queue.write_buffer(buffer, byte_offset, raw)

    def read_buffer(self, buffer: Any, byte_offset: int = 0, byte_size: int | None = None) -> bytes:
        """Copy a buffer (which needs COPY_SRC) to the host; waits for the queue."""
        return bytes(self.queue.read_buffer(buffer, byte_offset, byte_size))

    def read_mapped(self, buffer: Any, out: np.ndarray) -> float:
        """Map a MAP_READ buffer and copy its first ``out.nbytes`` bytes into ``out``
        (one copy, from the mapped memory); the buffer is unmapped again for reuse.
        Returns the seconds waited for the mapping (the GPU's work)."""
        size = out.nbytes
        target = out.reshape(-1).view(np.uint8)
        return self.read_mapped_with(buffer, size, lambda src: parallel_copyto(target, src))

    def read_mapped_with(
        self, buffer: Any, byte_size: int, consume: Callable[[np.ndarray], None]
    ) -> float:
        """Map a MAP_READ buffer (waiting for the work writing it), call ``consume`` with a
        read-only uint8 view of its first ``byte_size`` bytes, then unmap it for reuse.

        The view is valid only during the call: keeping it (or an array viewing it)
        past ``consume`` raises `InvalidOperationError` (the buffer is unmapped all the
        same; the kept view must not be used). Returns the seconds waited for the
        mapping."""
        start = time.perf_counter()
        buffer.map_sync("READ", 0, buffer.size)
        waited = time.perf_counter() - start
        try:
            _lend_view(buffer.read_mapped(0, byte_size, copy=False), byte_size, consume)
        finally:
            buffer.unmap()
        return waited

    def create_upload_buffer(self, label: str, byte_size: int) -> Any:
        """A MAP_WRITE | COPY_SRC staging buffer, mapped for writing from the start.

        The host fills it with `write_mapped_with` and copies it to a STORAGE buffer
        with `CommandEncoder.copy_buffer`; unlike ``queue.write_buffer`` nothing is
        allocated per upload, and the memory stays resident across frames."""
        size = buffer_byte_size(label, byte_size, self.capabilities.max_buffer_size, "the device")
        usage = int(BufferUsage.MAP_WRITE | BufferUsage.COPY_SRC)
        try:
            return self.device.create_buffer(
                label=label, size=size, usage=usage, mapped_at_creation=True
            )
        except MemoryError as err:
            raise OutOfMemoryError(
                f"out of GPU memory allocating '{label}' ({size} bytes)"
            ) from err

    def map_for_write(self, buffer: Any, *, wait: bool = True) -> None:
        """Map an upload buffer for writing again (a no-op when it is mapped).

        With ``wait`` this returns once it is mapped (after the copies reading it);
        without, the mapping is only requested (it completes in the background once
        the GPU is done with the buffer) and the next `write_mapped_with` waits for it."""
        state = buffer.map_state
        if state == "mapped":
            return
        request = self._map_requests.pop(id(buffer), None)
        if state == "pending" and request is not None and request[0] is buffer:
            promise = request[1]
        else:
            promise = buffer.map_async("WRITE", 0, buffer.size)
        if wait:
            promise.sync_wait()
        else:
            self._map_requests[id(buffer)] = (buffer, promise)

    def write_mapped_with(
        self, buffer: Any, byte_size: int, fill: Callable[[np.ndarray], None]
    ) -> None:
        """Call ``fill`` with a writable uint8 view of the first ``byte_size`` bytes of an
        upload buffer (`create_upload_buffer`), mapping it first if needed, then unmap it
        so that a copy from it can be submitted.

        The view is valid only during the call: keeping it past ``fill`` raises
        `InvalidOperationError` (the buffer is unmapped all the same; the kept view must
        not be used)."""
        self.map_for_write(buffer)
        try:
            _lend_view(self.mapped_range(buffer, byte_size), byte_size, fill)
        finally:
            buffer.unmap()

    def mapped_range(self, buffer: Any, byte_size: int) -> memoryview:
        """The first ``byte_size`` bytes of a mapped upload buffer as a writable view, valid
        until the buffer is unmapped (the caller unmaps it, and must not use the view
        after that; any thread may write through it meanwhile)."""
        # wgpu-py's `write_mapped` copies from a finished host buffer on one thread; the
        # mapped range itself (for the threads of `parallel_copyto`) needs the native call.
        from wgpu.backends.wgpu_native import _api

        pointer = _api.libf.wgpuBufferGetMappedRange(buffer._internal, 0, byte_size)
        address = int(_api.ffi.cast("intptr_t", pointer))
        if address == 0:
            raise InvalidOperationError(
                f"the upload buffer '{buffer.label}' has no mapped range of {byte_size} bytes"
            )
        return memoryview((ctypes.c_uint8 * byte_size).from_address(address)).cast("B")

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

    def create_command_encoder(self, label: str) -> WgpuCommandEncoder:
        return WgpuCommandEncoder(self.device.create_command_encoder(label=label))

    def submit(self, command_buffers: Sequence[Any]) -> None:
        self.queue.submit(list(command_buffers))

    def fence(self) -> Fence:
        """A fence for all work submitted so far."""
        fence = Fence(self.device)
        self._open_fences = [f for f in self._open_fences if not f.is_done()]
        self._open_fences.append(fence)
        return fence

    def wait_idle(self) -> None:
        """Block until the queue has finished all submitted work and every fence made so far
        reports it (their callbacks run on the poll thread, possibly after the queue is idle,
        and not always in the order the fences were made)."""
        self.device._poll_wait()
        fences, self._open_fences = self._open_fences, []
        for fence in fences:
            if not fence.wait(FENCE_TIMEOUT_S):
                raise InvalidOperationError(
                    f"the GPU queue is idle but did not report its work done within "
                    f"{FENCE_TIMEOUT_S} s"
                )

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
        return f"WgpuDevice({self.capabilities.describe()!r})"


def _lend_view(mapped: memoryview, byte_size: int, use: Callable[[np.ndarray], None]) -> None:
    """Call ``use`` with a uint8 array viewing ``mapped`` (a mapped range) and check that no
    reference to that array, or to an array derived from it, is left afterwards: such an
    array would read or write unmapped memory, so this is reported as an error at once."""
    view = np.frombuffer(mapped, np.uint8, byte_size)
    owner = view.base
    counts = (sys.getrefcount(view), sys.getrefcount(owner))
    use(view)
    if (sys.getrefcount(view), sys.getrefcount(owner)) != counts:
        raise InvalidOperationError("a view of a mapped GPU buffer outlived its mapping")


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
    """Parse a first image's C types in one pass (`ffi_types`), then create wgpu's instance
    with only `INSTANCE_BACKENDS` before any adapter is requested or enumerated (one the
    application created first is kept: its adapters are filtered by `_is_allowed`)."""
    global _instance_restricted
    with _instance_lock:
        if _instance_restricted:
            return
        ffi_types.parse_ahead()  # imports wgpu-py's backend first (`ffi_header`)
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


# File descriptor 2 is process-wide: one thread at a time may swap it out.
_stderr_lock = threading.RLock()


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Silence C-level stderr (driver chatter such as Mesa's XDG_RUNTIME_DIR notice)."""
    with _stderr_lock:  # else a second thread would save (and later restore) devnull
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
            destroyed by `WgpuDevice.close`. None creates a new device.
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
    if isinstance(device, (WgpuDevice, GpuDevice)):
        return device
    if device is not None:
        if not hasattr(device, "create_compute_pipeline") or not hasattr(device, "queue"):
            raise InvalidArgumentError(
                f"device must be a wgpu.GPUDevice, got {type(device).__name__}"
            )
        return WgpuDevice(device, owned=False)
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
    return WgpuDevice(created, adapter, owned=True)


__all__ = [
    "FEATURE_F16",
    "FEATURE_SUBGROUP",
    "FEATURE_TIMESTAMP",
    "KERNEL_FEATURE_TO_DEVICE",
    "OPTIONAL_FEATURES",
    "STORAGE_USAGE",
    "AdapterInfo",
    "BufferUsage",
    "Capabilities",
    "Fence",
    "GpuDevice",
    "WgpuCommandEncoder",
    "WgpuDevice",
    "capabilities_of",
    "enumerate_adapters",
    "has_hardware_adapter",
    "open_device",
    "shader_checks_forced",
]
