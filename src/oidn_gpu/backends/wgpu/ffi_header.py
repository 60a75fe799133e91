"""wgpu-native's C header parsed ahead and shipped: importing wgpu-py's backend parses nothing.

Importing ``wgpu.backends.wgpu_native`` hands wgpu-native's whole header (about 900
declarations) to cffi's ``FFI.cdef``, which parses it with pycparser: about 0.1 s of pure
Python on a 2.6 GHz Xeon core, paid by every process on the path of its first wgpu image.
What the parse leaves in cffi's parser (its declarations, constants and counters: model
objects, no parse tree) pickles to about 170 KB and loads in under 2 ms. So that state
ships, for the header of the wgpu-py release the ``wgpu`` extra pins and one cffi version,
in ``backends/wgpu/shipped/cffi-VERSION-DIGEST.pickle`` (DIGEST: the start of the header's
SHA-256), and `import_wgpu_native` imports wgpu-py's backend with cffi's parse of exactly
that header replaced by the shipped state. The same file holds the parsed form of the C
types a first image names (`IMPORT_TYPES` and `FIRST_IMAGE_TYPES`, each of
which cffi would otherwise parse with every typedef of the header: about 10 ms a type),
pickled together with the declarations so that they share their structs; the parser
answers those types from it (`shipped_types`).

This reaches into cffi's parser (``Parser._internal_parse``, ``Parser.parse_type`` and
the attributes they set, of cffi 1.x and 2.x). Without a shipped state for this header and
cffi version, or when the backend was imported already, nothing changes: cffi parses as
before. The state is made by ``python -m oidn_gpu.backends.wgpu.ffi_header`` (for the
installed wgpu-py and cffi) and ``tests/gpu/test_ffi_header.py`` checks that it equals a
parse made now.
"""

from __future__ import annotations

import hashlib
import importlib
import pickle
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

SHIPPED_DIR = Path(__file__).resolve().parent / "shipped"
HEADER_NAME = "combined_header.h"  # the header wgpu-py's `_ffi` module hands to cdef
BACKEND_MODULE = "wgpu.backends.wgpu_native"
# The parser's attributes that its parse leaves and that are kept: all but the options of
# the call (set around it) and the weak map from parse-tree nodes (gone with the tree).
_TRANSIENT = ("_options", "_structnode2type")
# The C types wgpu-py names while its backend is imported (its log callback, its strings).
IMPORT_TYPES = ("void(WGPULogLevel, WGPUStringView, void *)", "WGPUStringView *")
_SHIPPED_TYPES = "_oidn_gpu_shipped_types"  # the parser's attribute holding them

# The C types a first denoise names, in the order wgpu-py 0.32 names them (instance,
# adapter, device, buffers, shader modules and pipelines, commands, bind groups, mapping).
FIRST_IMAGE_TYPES = (
    "WGPUInstanceExtras *",
    "WGPUInstanceDescriptor *",
    "WGPUChainedStruct *",
    "WGPUChainedStruct * ",
    "WGPURequestAdapterOptions *",
    "void(WGPURequestAdapterStatus, WGPUAdapter, WGPUStringView, void *, void *)",
    "WGPURequestAdapterCallbackInfo *",
    "WGPUAdapterInfo *",
    "WGPUNativeLimits *",
    "WGPULimits *",
    "char []",
    "WGPUQueueDescriptor *",
    "WGPUDeviceExtras *",
    "void(WGPUDevice const *, WGPUDeviceLostReason, WGPUStringView, void *, void *)",
    "WGPUDeviceLostCallbackInfo *",
    "void(WGPUDevice const *, WGPUErrorType, WGPUStringView, void *, void *)",
    "WGPUUncapturedErrorCallbackInfo *",
    "WGPUFeatureName[]",
    "WGPUDeviceDescriptor *",
    "void(WGPURequestDeviceStatus, WGPUDevice, WGPUStringView, void *, void *)",
    "WGPURequestDeviceCallbackInfo *",
    "WGPUBufferDescriptor *",
    "intptr_t",
    "uintptr_t",
    "WGPUShaderSourceWGSL *",
    "WGPUShaderModuleDescriptor *",
    "WGPUComputeState *",
    "WGPUComputePipelineDescriptor *",
    "WGPUCommandEncoderDescriptor *",
    "WGPUCommandBufferDescriptor *",
    "WGPUCommandBuffer[]",
    "WGPUBindGroupEntry *",
    "WGPUBindGroupEntry[]",
    "WGPUBindGroupDescriptor *",
    "WGPUComputePassDescriptor *",
    "WGPUPassTimestampWrites *",
    "WGPUQuerySetDescriptor *",
    "uint32_t []",
    "uint8_t []",
    "uint8_t *",
    "void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)",
    "WGPUBufferMapCallbackInfo *",
    "void(WGPUQueueWorkDoneStatus, WGPUStringView, void *, void *)",
    "WGPUQueueWorkDoneCallbackInfo *",
)
_lock = threading.Lock()


def header_text() -> str:
    """The text of wgpu-py's header, as its `_ffi` module reads it."""
    from wgpu._coreutils import get_header_filename

    with open(get_header_filename(HEADER_NAME), encoding="utf-8") as f:
        return f.read()


def state_path(header: str) -> Path:
    """Where the shipped state of ``header`` under the installed cffi lies."""
    import cffi

    digest = hashlib.sha256(header.encode()).hexdigest()[:16]
    return SHIPPED_DIR / f"cffi-{cffi.__version__}-{digest}.pickle"


def parsed_state(header: str, types: tuple[str, ...] = ()) -> dict[str, Any]:
    """What cffi's parser holds after parsing ``header`` (a fresh parser, as ``cdef``
    parses it), without the transient attributes (``parser``), and the parsed form of
    ``types`` (``types``: each as ``Parser.parse_type`` gives it after that parse)."""
    from cffi.cparser import Parser

    parser = Parser()
    parser.parse(header)
    parsed = {cdecl: parser.parse_type(cdecl) for cdecl in dict.fromkeys(types)}
    kept = {k: v for k, v in vars(parser).items() if k not in _TRANSIENT}
    return {"parser": kept, "types": parsed}


def state_bytes(header: str, types: tuple[str, ...]) -> bytes:
    """The shipped file of ``header``'s parse and ``types`` (one pickle: the types share
    the declarations' objects)."""
    return pickle.dumps(parsed_state(header, types), protocol=4)


def shipped_types(parser: Any) -> dict[str, Any]:
    """The C types ``parser`` (wgpu-py's) answers from the shipped state (none when the
    header was parsed)."""
    return dict(getattr(parser, _SHIPPED_TYPES, {}))


def _shipped_state(header: str) -> dict[str, Any] | None:
    try:
        data = state_path(header).read_bytes()
    except OSError:
        return None
    # Our own package's file, made by `state_bytes`; never a file from elsewhere.
    return pickle.loads(data)


def import_wgpu_native() -> bool:
    """Import wgpu-py's wgpu-native backend, its header's parse taken from the shipped
    state when there is one for it; returns whether it was (False: already imported, no
    state shipped for this header and cffi, or cffi's parser not as expected)."""
    with _lock:
        if BACKEND_MODULE in sys.modules:
            return False
        try:
            from cffi.cparser import Parser

            header = header_text()
            state = _shipped_state(header)
        except Exception:  # no header, another cffi, an unreadable file: parse as before
            state = None
        if state is None:
            importlib.import_module(BACKEND_MODULE)
            return False
        return _import_with_state(Parser, header, state)


def _import_with_state(parser_class: Any, header: str, state: dict[str, Any]) -> bool:
    """Import the backend with ``Parser._internal_parse`` of ``header`` replaced by setting
    ``state`` (once; any other source is parsed as before)."""
    original = parser_class._internal_parse
    used = []

    def internal_parse(parser: Any, csource: str) -> None:
        fresh = not used and not parser._declarations and not parser._int_constants
        if fresh and csource == header:
            vars(parser).update(state["parser"])
            parser._structnode2type = weakref.WeakKeyDictionary()
            types = state["types"]
            setattr(parser, _SHIPPED_TYPES, types)
            parse_type = parser.parse_type  # the class's, bound
            parser.parse_type = lambda cdecl: types[cdecl] if cdecl in types else parse_type(cdecl)
            used.append(True)
            return
        original(parser, csource)

    parser_class._internal_parse = internal_parse
    try:
        importlib.import_module(BACKEND_MODULE)
    finally:
        parser_class._internal_parse = original
    return bool(used)


def main() -> int:
    """Write the state of the installed wgpu-py's header under the installed cffi."""
    header = header_text()
    path = state_path(header)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = state_bytes(header, IMPORT_TYPES + FIRST_IMAGE_TYPES)
    path.write_bytes(data)
    print(f"{path}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
