"""The few CUDA driver calls that load and launch compiled kernels (`driver_launch`), through
ctypes on ``libcuda.so.1``, the driver library every CUDA process has loaded (torch's own).

Each call's result is checked: an error raises `CudaDriverError` naming the call and the
driver's error name. The constants are the CUDA driver API's (``cuda.h``, CUDA 12).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

# cuda.h: CUfunction_attribute, CUfunc_cache, CUdevice_attribute
FUNC_SHARED_SIZE_BYTES = 1  # CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES (static shared memory)
FUNC_NUM_REGS = 4  # CU_FUNC_ATTRIBUTE_NUM_REGS
FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
CACHE_PREFER_SHARED = 1  # CU_FUNC_CACHE_PREFER_SHARED
DEVICE_MAX_REGISTERS_PER_BLOCK = 12  # CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK
DEVICE_MULTIPROCESSOR_COUNT = 16  # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
DEVICE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97  # CU_DEVICE_ATTRIBUTE_..._PER_BLOCK_OPTIN

# Dynamic shared memory above 48 KB must be opted into per function (CUDA C programming
# guide, "Shared Memory"); Triton's loader does the same for its kernels.
DEFAULT_SHARED_LIMIT = 49152

LIBRARY = "libcuda.so.1"


class CudaDriverError(RuntimeError):
    """A CUDA driver call failed (its name and the driver's error name in the message)."""


class CudaDriver:
    """The driver library, opened on first use; one per process (`driver`)."""

    def __init__(self, library: str = LIBRARY) -> None:
        self._lib = ctypes.CDLL(library)
        self._primary: dict[int, int] = {}  # device ordinal -> its primary context

    def _check(self, name: str, result: int) -> None:
        if result == 0:
            return
        text = ctypes.c_char_p()
        self._lib.cuGetErrorName(result, ctypes.byref(text))
        error = text.value.decode() if text.value else f"CUresult {result}"
        raise CudaDriverError(f"{name} failed: {error}")

    def make_current(self, device: int) -> None:
        """Make ``device``'s primary context (the one torch uses) current on this thread,
        as a kernel's load and launch need."""
        current = ctypes.c_void_p()
        self._check("cuCtxGetCurrent", self._lib.cuCtxGetCurrent(ctypes.byref(current)))
        primary = self._primary.get(device)
        if primary is None:
            handle = ctypes.c_int()
            self._check("cuDeviceGet", self._lib.cuDeviceGet(ctypes.byref(handle), device))
            context = ctypes.c_void_p()
            self._check(
                "cuDevicePrimaryCtxRetain",
                self._lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle),
            )
            primary = self._primary[device] = int(context.value or 0)
        if (current.value or 0) != primary:
            self._check("cuCtxSetCurrent", self._lib.cuCtxSetCurrent(ctypes.c_void_p(primary)))

    def load(self, image: bytes, name: str, shared: int, device: int) -> tuple[int, int]:
        """Load a compiled module (``image``: a cubin) into ``device``'s primary context;
        ``(function handle, registers per thread)`` of its kernel ``name``, opted into
        ``shared`` bytes of dynamic shared memory where that is above the default."""
        self.make_current(device)
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        self._check("cuModuleLoadData", self._lib.cuModuleLoadData(ctypes.byref(module), image))
        self._check(
            "cuModuleGetFunction",
            self._lib.cuModuleGetFunction(ctypes.byref(function), module, name.encode()),
        )
        if shared > DEFAULT_SHARED_LIMIT:
            optin = self.device_attribute(DEVICE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device)
            static = self.function_attribute(int(function.value or 0), FUNC_SHARED_SIZE_BYTES)
            self._check(
                "cuFuncSetCacheConfig",
                self._lib.cuFuncSetCacheConfig(function, CACHE_PREFER_SHARED),
            )
            self._check(
                "cuFuncSetAttribute",
                self._lib.cuFuncSetAttribute(
                    function, FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - static
                ),
            )
        handle = int(function.value or 0)
        return handle, self.function_attribute(handle, FUNC_NUM_REGS)

    def function_attribute(self, function: int, attribute: int) -> int:
        value = ctypes.c_int()
        self._check(
            "cuFuncGetAttribute",
            self._lib.cuFuncGetAttribute(ctypes.byref(value), attribute, ctypes.c_void_p(function)),
        )
        return int(value.value)

    def device_attribute(self, attribute: int, device: int) -> int:
        value = ctypes.c_int()
        self._check(
            "cuDeviceGetAttribute",
            self._lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, device),
        )
        return int(value.value)

    def launch(
        self,
        function: int,
        grid: tuple[int, int, int],
        threads: int,
        shared: int,
        stream: int,
        params: Any,
    ) -> None:
        """``cuLaunchKernel`` of ``function`` on ``stream`` (``params``: a ctypes array of
        pointers to the arguments' values, in the kernel's order)."""
        self._check(
            "cuLaunchKernel",
            self._lib.cuLaunchKernel(
                ctypes.c_void_p(function),
                grid[0],
                grid[1],
                grid[2],
                threads,
                1,
                1,
                shared,
                ctypes.c_void_p(stream),
                params,
                None,
            ),
        )


_DRIVER: CudaDriver | None = None
_DRIVER_LOCK = threading.Lock()


def driver() -> CudaDriver:
    """The process's `CudaDriver` (opened on first use)."""
    global _DRIVER
    with _DRIVER_LOCK:
        if _DRIVER is None:
            _DRIVER = CudaDriver()
        return _DRIVER
