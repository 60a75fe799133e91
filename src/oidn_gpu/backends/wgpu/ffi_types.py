"""wgpu-py's C types parsed in one pass, ahead of the first image.

wgpu-py fills wgpu-native's structs through cffi (``ffi.new("WGPUBufferDescriptor *")``),
and cffi parses a C type the first time it is named. Every such parse hands pycparser a
typedef for each of wgpu's ~900 declarations along with the one type: about 10 ms a type
on a 2.6 GHz Xeon core. A process's first image names about 40 types (opening the device,
compiling, binding, submitting, mapping), so it spends 0.4-0.5 s parsing C declarations.
`parse_ahead` parses those types in one pass (one pycparser run, about 20 ms) and stores
each where cffi looks first, so none is parsed again; where the header's parse shipped
(`ffi_header`), those types shipped with it and none is parsed at all.

This reaches into cffi's parser (the private ``_lock``, ``_parser``, ``_parsed_types`` and
``_get_cached_btype`` of cffi 1.x and 2.x, used as ``FFI._typeof_locked`` uses them).
Where they are missing or the batch does not parse, nothing is stored and each type is
parsed on first use, as without this module. A type stored here is the very object cffi
would make (`tests/gpu/test_ffi_types.py`).
"""

from __future__ import annotations

from typing import Any

from oidn_gpu.backends.wgpu import ffi_header

# The C types a first denoise names (wgpu-py 0.32; they ship parsed with the header).
FIRST_IMAGE_TYPES = ffi_header.FIRST_IMAGE_TYPES


def wgpu_ffi() -> Any:
    """wgpu-py's cffi ``FFI`` object (of its wgpu-native backend, imported with its header's
    shipped parse where there is one: `ffi_header`)."""
    ffi_header.import_wgpu_native()
    from wgpu.backends.wgpu_native import ffi

    return ffi


def parse_ahead(ffi: Any = None, types: tuple[str, ...] = FIRST_IMAGE_TYPES) -> int:
    """Parse ``types`` (C type names as wgpu-py spells them) in one pass into ``ffi``'s
    cache of parsed types (default: wgpu-py's); returns how many were stored (0 when all
    were there already, or when cffi's internals are not as expected)."""
    ffi = wgpu_ffi() if ffi is None else ffi
    try:
        with ffi._lock:
            missing = [cdecl for cdecl in dict.fromkeys(types) if cdecl not in ffi._parsed_types]
            if not missing:
                return 0
            shipped = ffi_header.shipped_types(ffi._parser)
            for cdecl in missing:
                if cdecl in shipped:  # parsed ahead and shipped: no parse
                    ffi._typeof_locked(cdecl)
            rest = [cdecl for cdecl in missing if cdecl not in shipped]
            ffi._parsed_types.update(_parse_types(ffi, rest) if rest else {})
            return len(missing)
    except Exception:  # cffi's internals differ, or a name is unknown: parse on first use
        return 0


def _parse_types(ffi: Any, types: list[str]) -> dict[str, tuple[Any, bool]]:
    """``{type: (cffi's type object, whether it names a function)}`` from one parse of a
    declaration taking every type as a parameter (as ``FFI._typeof_locked`` makes each
    from the declaration taking it alone)."""
    parser = ffi._parser
    ast = parser._parse("void __dummy(\n" + ",\n".join(types) + "\n);")[0]
    params = ast.ext[-1].type.args.params
    if len(params) != len(types):
        raise ValueError(f"{len(types)} types gave {len(params)} parameters")
    parsed = {}
    for cdecl, param in zip(types, params, strict=True):
        model = parser._get_type_and_quals(param.type)[0]
        is_function = bool(model.is_raw_function)
        if is_function:
            model = model.as_function_pointer()
        parsed[cdecl] = (ffi._get_cached_btype(model), is_function)
    return parsed
