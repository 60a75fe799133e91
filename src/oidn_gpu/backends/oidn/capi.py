"""Intel OIDN's C API, from the library the ``pyoidn`` package ships, through cffi.

``pyoidn`` 2.5.1.0 bundles Intel OIDN 2.5.1 (``pyoidn/oidn/lib``) and wraps part of its
C API in Python. This backend declares the calls it uses itself and opens that same
library, without importing pyoidn's Python modules: their image setter takes only
C-contiguous arrays (not an RGBA image's RGB view, nor a crop), they have no progress
monitor, no data parameter (OIDN's ``weights``), no HIP device and no physical-device
queries, and importing them imports torch where it is installed (about 0.9 s), which
the probe of ``backend="auto"`` must not pay. The declarations are OIDN 2.5.1's
``include/OpenImageDenoise/oidn.h``, as the package's own ``pyoidn/capi.py`` copies them.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oidn_gpu.errors import (
    CancelledError,
    InvalidArgumentError,
    InvalidOperationError,
    MissingDependencyError,
    OIDNGPUError,
    OutOfMemoryError,
    UnsupportedDeviceError,
)

EXTRA = "oidn"  # pip install 'oidn-gpu[oidn]'
PACKAGE = "pyoidn"

DECLARATIONS = """
typedef struct OIDNDeviceImpl* OIDNDevice;
typedef struct OIDNFilterImpl* OIDNFilter;
typedef bool (*OIDNProgressMonitorFunction)(void* userPtr, double n);

int oidnGetNumPhysicalDevices();
int oidnGetPhysicalDeviceInt(int physicalDeviceID, const char* name);
const char* oidnGetPhysicalDeviceString(int physicalDeviceID, const char* name);

OIDNDevice oidnNewDevice(int type);
OIDNDevice oidnNewCUDADevice(const int* deviceIDs, const void** streams, int numPairs);
OIDNDevice oidnNewHIPDevice(const int* deviceIDs, const void** streams, int numPairs);
void oidnSetDeviceInt(OIDNDevice device, const char* name, int value);
int oidnGetDeviceInt(OIDNDevice device, const char* name);
void oidnCommitDevice(OIDNDevice device);
void oidnReleaseDevice(OIDNDevice device);
int oidnGetDeviceError(OIDNDevice device, const char** outMessage);

bool oidnGetDeviceBool(OIDNDevice device, const char* name);

typedef struct OIDNBufferImpl* OIDNBuffer;
OIDNBuffer oidnNewBufferWithStorage(OIDNDevice device, size_t byteSize, int storage);
void oidnReadBuffer(OIDNBuffer buffer, size_t byteOffset, size_t byteSize, void* dstHostPtr);
void oidnWriteBuffer(OIDNBuffer buffer, size_t byteOffset, size_t byteSize,
                     const void* srcHostPtr);
void oidnReleaseBuffer(OIDNBuffer buffer);

OIDNFilter oidnNewFilter(OIDNDevice device, const char* type);
void oidnSetFilterImage(OIDNFilter filter, const char* name, OIDNBuffer buffer, int format,
                        size_t width, size_t height, size_t byteOffset,
                        size_t pixelByteStride, size_t rowByteStride);
void oidnSetSharedFilterImage(OIDNFilter filter, const char* name, void* devPtr, int format,
                              size_t width, size_t height, size_t byteOffset,
                              size_t pixelByteStride, size_t rowByteStride);
void oidnUnsetFilterImage(OIDNFilter filter, const char* name);
void oidnSetSharedFilterData(OIDNFilter filter, const char* name, void* hostPtr,
                             size_t byteSize);
void oidnSetFilterBool(OIDNFilter filter, const char* name, bool value);
void oidnSetFilterInt(OIDNFilter filter, const char* name, int value);
void oidnSetFilterFloat(OIDNFilter filter, const char* name, float value);
void oidnSetFilterProgressMonitorFunction(OIDNFilter filter, OIDNProgressMonitorFunction func,
                                          void* userPtr);
void oidnCommitFilter(OIDNFilter filter);
void oidnExecuteFilter(OIDNFilter filter);
void oidnReleaseFilter(OIDNFilter filter);
"""

# OIDNError -> our error class (errors.py mirrors OIDN's codes).
ERROR_CLASSES: dict[int, type[OIDNGPUError]] = {
    2: InvalidArgumentError,
    3: InvalidOperationError,
    4: OutOfMemoryError,
    5: UnsupportedDeviceError,
    6: CancelledError,
}
ERROR_NONE = 0


@dataclass(frozen=True)
class Library:
    """The opened library: cffi's ``ffi`` and ``lib``, and where it came from."""

    ffi: Any
    lib: Any
    path: Path
    version: str


_lock = threading.Lock()


def library_path() -> Path:
    """The OIDN library inside the installed ``pyoidn`` package (not imported).

    Raises:
        MissingDependencyError: pyoidn is not installed, or holds no OIDN library.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise MissingDependencyError(
            f"the oidn backend needs Intel OIDN through the '{PACKAGE}' package, which is not "
            f"installed; install it with: pip install 'oidn-gpu[{EXTRA}]'"
        )
    root = Path(spec.origin).parent / "oidn"
    if os.name == "nt":
        path = root / "bin" / "OpenImageDenoise.dll"
    elif sys.platform == "darwin":
        path = root / "lib" / "libOpenImageDenoise.dylib"
    else:
        path = root / "lib" / "libOpenImageDenoise.so"
    if not path.is_file():
        raise MissingDependencyError(
            f"the '{PACKAGE}' package holds no Intel OIDN library at {path}; reinstall it "
            f"with: pip install --force-reinstall 'oidn-gpu[{EXTRA}]'"
        )
    return path


@functools.cache
def library() -> Library:
    """Intel OIDN's C API, opened once per process.

    Raises:
        MissingDependencyError: pyoidn (or cffi, which it needs) is not installed, or its
            library does not load.
    """
    path = library_path()
    with _lock:
        try:
            # cffi comes with pyoidn, this backend's optional dependency.
            import cffi
        except ImportError as err:
            raise MissingDependencyError(
                f"the oidn backend needs cffi; install it with: pip install 'oidn-gpu[{EXTRA}]'"
            ) from err
        ffi = cffi.FFI()
        ffi.cdef(DECLARATIONS)
        if os.name == "nt":  # OIDN's device modules sit beside it
            os.add_dll_directory(str(path.parent))
        try:
            lib = ffi.dlopen(str(path))
        except OSError as err:
            raise MissingDependencyError(
                f"Intel OIDN's library {path} does not load ({err}); reinstall it with: "
                f"pip install --force-reinstall 'oidn-gpu[{EXTRA}]'"
            ) from err
    return Library(ffi, lib, path, _package_version())


def _package_version() -> str:
    from importlib import metadata

    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:  # pragma: no cover - found above
        return "unknown"


def take_error(oidn: Library, device: Any) -> tuple[int, str]:
    """``(code, message)`` of the device's pending error, cleared (code 0: none); a NULL
    device reads the error of this thread (a device that failed to be created)."""
    message = oidn.ffi.new("const char**")
    code = int(oidn.lib.oidnGetDeviceError(device, message))
    text = oidn.ffi.string(message[0]).decode(errors="replace") if message[0] else ""
    return code, text


def check(oidn: Library, device: Any, what: str) -> None:
    """Raise the device's pending error as our error class with OIDN's message.

    Raises:
        OIDNGPUError: the subclass of OIDN's error code (`ERROR_CLASSES`).
    """
    code, message = take_error(oidn, device)
    if code != ERROR_NONE:
        cls = ERROR_CLASSES.get(code, OIDNGPUError)
        raise cls(message or f"Intel OIDN failed to {what} (error code {code})")
