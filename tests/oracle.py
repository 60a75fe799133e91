"""The Intel OIDN 2.5.1 oracle: run the real library (through pyoidn) on NumPy images.

Tests compare oidn-gpu against this. One OIDN CPU device is created lazily and
kept for the whole process (creating a device is slow and loads the weights
machinery). Every call builds a fresh filter, so calls are independent.

Images are H x W (one channel) or H x W x C with C in 1..3, float32 or float16;
the OIDN format (FLOAT, FLOAT2, FLOAT3, HALF, ...) follows from the dtype and C.
The output has the main input's channel count and dtype (float32 or float16).
"""

from __future__ import annotations

import math

import numpy as np

_FORMAT_FLOAT = 1  # OIDN_FORMAT_FLOAT (+1, +2 for FLOAT2, FLOAT3)
_FORMAT_HALF = 257  # OIDN_FORMAT_HALF (+1, +2 for HALF2, HALF3)
_QUALITY = {"default": 0, "fast": 4, "balanced": 5, "high": 6}  # OIDNQuality

_device = None  # the process-wide pyoidn.Device, created on first use
_data_api_declared = False  # whether oidnSetSharedFilterData was added to pyoidn's FFI


def oidn_device():
    """Return the process-wide committed OIDN CPU device, creating it on first use."""
    global _device
    if _device is None:
        import pyoidn

        device = pyoidn.Device(pyoidn.OIDN_DEVICE_TYPE_CPU)
        device.commit()
        _check(device)
        _device = device
    return _device


def _check(device) -> None:
    """Raise RuntimeError carrying OIDN's message if the device has a pending error."""
    message = device.get_error()
    if message is not None:
        raise RuntimeError(message)


def _as_image(img: np.ndarray, name: str) -> tuple[np.ndarray, int]:
    """Return a C-contiguous H x W x C copy and its OIDN format."""
    arr = np.asarray(img)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or not 1 <= arr.shape[2] <= 3:
        raise ValueError(f"{name} image has shape {arr.shape}; expected (H, W) or (H, W, 1..3)")
    if arr.dtype == np.float32:
        base = _FORMAT_FLOAT
    elif arr.dtype == np.float16:
        base = _FORMAT_HALF
    else:
        raise ValueError(f"{name} image has dtype {arr.dtype}; expected float32 or float16")
    return np.ascontiguousarray(arr), base + arr.shape[2] - 1


def oidn_denoise(
    color: np.ndarray | None,
    albedo: np.ndarray | None = None,
    normal: np.ndarray | None = None,
    *,
    filter_type: str = "RT",
    hdr: bool = False,
    srgb: bool = False,
    clean_aux: bool = False,
    quality: str = "high",
    input_scale: float | None = None,
    directional: bool = False,
    weights: bytes | None = None,
    max_memory_mb: int | None = None,
) -> np.ndarray:
    """Denoise with the real OIDN 2.5.1 CPU device and return the output image.

    Only the images that are not None are bound, so albedo-only and normal-only
    filtering work by passing ``color=None``. ``hdr``/``srgb``/``clean_aux`` are
    set only for the RT filter and ``directional`` only for RTLightmap (setting
    them on the other filter only makes OIDN warn). ``input_scale=None`` leaves
    ``inputScale`` unset (NaN: autoexposure when HDR).

    Returns:
        H x W x C array (C = the main input's channel count, dtype of the main
        input), or H x W when the main input was given as H x W.

    Raises:
        RuntimeError: with OIDN's verbatim message when OIDN reports an error.
        ValueError: for arrays that cannot be passed to OIDN at all.
    """
    import pyoidn

    if quality not in _QUALITY:
        raise ValueError(f"unknown quality {quality!r}; expected one of {sorted(_QUALITY)}")
    inputs = {"color": color, "albedo": albedo, "normal": normal}
    main = next((img for img in inputs.values() if img is not None), None)
    if main is None:
        raise ValueError("no input image given")
    main_arr = np.asarray(main)
    main_img, _ = _as_image(main_arr, "main")
    channels = main_img.shape[2]
    output = np.zeros((*main_img.shape[:2], channels), dtype=main_img.dtype)
    out_format = (_FORMAT_FLOAT if output.dtype == np.float32 else _FORMAT_HALF) + channels - 1

    device = oidn_device()
    keep_alive = [output]  # OIDN reads shared memory at execute time
    flt = pyoidn.Filter(device, filter_type)
    try:
        _check(device)
        for name, img in inputs.items():
            if img is None:
                continue
            arr, fmt = _as_image(img, name)
            keep_alive.append(arr)
            flt.set_image(name, arr, fmt)
        flt.set_image("output", output, out_format)
        if filter_type == "RT":
            flt.set_bool("hdr", hdr)
            flt.set_bool("srgb", srgb)
            flt.set_bool("cleanAux", clean_aux)
        elif filter_type == "RTLightmap":
            flt.set_bool("directional", directional)
        flt.set_int("quality", _QUALITY[quality])
        if input_scale is not None:
            flt.set_float("inputScale", float(input_scale))
        if max_memory_mb is not None:
            flt.set_int("maxMemoryMB", int(max_memory_mb))
        if weights is not None:
            _set_weights(flt, weights, keep_alive)
        _check(device)
        flt.commit()
        _check(device)
        flt.execute()
        _check(device)
    finally:
        flt.release()
    if main_arr.ndim == 2:
        return output[:, :, 0]
    return output


def _set_weights(flt, weights: bytes, keep_alive: list) -> None:
    """Bind a user TZA blob as the ``weights`` data parameter (shared, not copied)."""
    from pyoidn.capi import oidn_Capi, oidn_ffi

    global _data_api_declared
    if not _data_api_declared:
        # pyoidn's cdef lacks the data-parameter call; declare it on the same FFI
        oidn_ffi.cdef(
            "void oidnSetSharedFilterData(OIDNFilter filter, const char* name,"
            " void* hostPtr, size_t byteSize);"
        )
        _data_api_declared = True
    blob = np.frombuffer(bytes(weights), dtype=np.uint8).copy()
    keep_alive.append(blob)
    ptr = oidn_ffi.cast("void *", oidn_ffi.from_buffer(blob))
    oidn_Capi.oidnSetSharedFilterData(flt._filter, b"weights", ptr, blob.nbytes)


def float32_neighbors(value: float) -> tuple[float, float]:
    """Return the float32 values one ULP below and above ``value`` (as Python floats)."""
    v = np.float32(value)
    return (
        float(np.nextafter(v, np.float32(-math.inf))),
        float(np.nextafter(v, np.float32(math.inf))),
    )
