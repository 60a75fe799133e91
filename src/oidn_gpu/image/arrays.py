"""Any array type in, the caller's type out: the images a denoise call is given.

The filter computes on NumPy float16/float32 ``HxWxC`` arrays. `as_image` turns
what a caller passes into one (a view where possible) and returns a `Restore`
that turns the float result back into the caller's type, shape and dtype:

- NumPy arrays; torch tensors (CPU, and CUDA copied through the host and back
  to the same device when the backend does not take them where they are: see
  `image.tensors`; bfloat16 computed in float32); PIL images (modes ``L``,
  ``RGB``, ``RGBA``, ``I;16``, ``F``); objects with ``__dlpack__``
  (`numpy.from_dlpack`) or ``__array__`` (`numpy.asarray`). Those last two come
  back through their Array API namespace (``__array_namespace__``) when they have
  one, else as NumPy arrays.
- float16 and float32 are used as they are; float64 is computed in float32 and
  returned as float64; uint8 and uint16 are normalized LDR values (``v / 255``,
  ``v / 65535``; for the normal, which spans [-1, 1], ``2 v / max - 1``), rounded
  and clipped back on the way out.
- An ``HxW`` image comes back ``HxW``.

torch and PIL are imported only when the caller's object is one of theirs
(recognized by its module), never to check.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError

# Used as they are; the filter's own dtypes.
NATIVE_DTYPES = (np.dtype(np.float16), np.dtype(np.float32))
# Computed in float32 and converted back.
WIDE_DTYPES = (np.dtype(np.float64),)
# Normalized LDR integers: dtype -> the value that means 1.0.
INTEGER_MAX = {np.dtype(np.uint8): 255, np.dtype(np.uint16): 65535}
SUPPORTED = "float16, float32, float64, uint8 or uint16"
# PIL modes taken, and the NumPy layout each gives (np.asarray of the image).
PIL_MODES = ("L", "RGB", "RGBA", "I;16", "F")


def _module_root(value: Any) -> str:
    return type(value).__module__.split(".", 1)[0]


def _is_torch(value: Any) -> bool:
    return _module_root(value) == "torch" and hasattr(value, "detach")


def _is_pil(value: Any) -> bool:
    return _module_root(value) == "PIL" and hasattr(value, "getbands")


@dataclass(frozen=True)
class Restore:
    """Turns a float result ``HxWxC`` into the caller's type, shape and dtype.

    Attributes:
        kind: ``"numpy"``, ``"torch"``, ``"pil"`` or ``"namespace"`` (Array API).
        shape: the caller's shape (``HxW`` or ``HxWxC``).
        dtype: the caller's pixel dtype as NumPy sees it (float32 for bfloat16).
        integer_max: 255 or 65535 for normalized integers, else None.
        signed: integers encode [-1, 1] (the normal) instead of [0, 1].
        torch_dtype, device: the torch tensor's dtype and device.
        pil_mode: the PIL image's mode.
        namespace: the Array API namespace of the caller's array.
    """

    kind: str
    shape: tuple[int, ...]
    dtype: np.dtype
    integer_max: int | None = None
    signed: bool = False
    torch_dtype: Any = None
    device: Any = None
    pil_mode: str | None = None
    namespace: Any = None

    @property
    def normalized(self) -> bool:
        """The caller's pixels are LDR integers."""
        return self.integer_max is not None

    def pixels(self, result: np.ndarray) -> np.ndarray:
        """``result`` as a NumPy array of the caller's shape and (NumPy) dtype."""
        result = np.asarray(result).reshape(self.shape)
        if self.integer_max is None:
            return result.astype(self.dtype, copy=False)
        scaled = np.nan_to_num(result.astype(np.float32, copy=False), nan=0.0)
        if self.signed:
            scaled = (scaled + np.float32(1)) * np.float32(0.5)
        top = self.integer_max
        return np.clip(np.rint(scaled * np.float32(top)), 0, top).astype(self.dtype)

    def __call__(self, result: np.ndarray) -> Any:
        """A new object of the caller's type holding ``result``."""
        pixels = self.pixels(result)
        if self.kind == "torch":
            import torch

            tensor = torch.from_numpy(np.ascontiguousarray(pixels))
            return tensor.to(device=self.device, dtype=self.torch_dtype)
        if self.kind == "pil":
            from PIL import Image

            return Image.fromarray(np.ascontiguousarray(pixels))
        if self.kind == "namespace":
            return self.namespace.asarray(pixels)
        return pixels

    def write(self, result: np.ndarray, target: Any) -> Any:
        """Copy ``result`` into the caller's output object ``target`` and return it."""
        pixels = self.pixels(result)
        if self.kind == "torch":
            import torch

            target.copy_(torch.from_numpy(np.ascontiguousarray(pixels)))
        elif self.kind == "pil":
            from PIL import Image

            target.paste(Image.fromarray(np.ascontiguousarray(pixels)))
        else:
            target[...] = pixels
        return target


def _unsupported(name: str, what: str) -> InvalidOperationError:
    return InvalidOperationError(f"unsupported {_role(name)} image format: {name} {what}")


def integer_hdr_error(name: str, dtype: np.dtype) -> InvalidOperationError:
    """The error for an integer (LDR) color given to an HDR denoise."""
    return _unsupported(
        name,
        f"has dtype {dtype}, which holds LDR values in [0, 1]; HDR denoising "
        "(hdr=True, RTLightmap) needs float16, float32 or float64",
    )


def _role(name: str) -> str:
    return "output" if name == "output" else "input"


def _torch_pixels(tensor: Any, name: str) -> tuple[np.ndarray, dict[str, Any]]:
    import torch

    info = {"kind": "torch", "torch_dtype": tensor.dtype, "device": tensor.device}
    host = tensor.detach()
    if host.device.type != "cpu":
        host = host.to("cpu")
    if host.dtype == torch.bfloat16:
        host = host.float()
    try:
        return host.numpy(), info
    except (TypeError, RuntimeError) as error:
        raise _unsupported(
            name, f"is a torch tensor of dtype {tensor.dtype}; expected {SUPPORTED}"
        ) from error


def _pil_pixels(image: Any, name: str) -> tuple[np.ndarray, dict[str, Any]]:
    if image.mode not in PIL_MODES:
        raise _unsupported(
            name,
            f"is a PIL image of mode '{image.mode}'; expected one of "
            f"{', '.join(PIL_MODES)} (convert it first, e.g. image.convert('RGB'))",
        )
    return np.asarray(image), {"kind": "pil", "pil_mode": image.mode}


def _generic_pixels(value: Any, name: str) -> tuple[np.ndarray, dict[str, Any]]:
    info: dict[str, Any] = {"kind": "numpy"}
    if hasattr(value, "__array_namespace__"):
        info = {"kind": "namespace", "namespace": value.__array_namespace__()}
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value), info
        except (TypeError, ValueError, RuntimeError, BufferError) as error:
            if not hasattr(value, "__array__"):
                raise _unsupported(
                    name,
                    f"is a {type(value).__name__} that NumPy cannot read through DLPack "
                    f"({error}); copy it to the host first",
                ) from error
    return np.asarray(value), info


def _to_numpy(value: Any, name: str) -> tuple[np.ndarray, dict[str, Any]]:
    """The caller's pixels as NumPy (a view where possible) and how to rebuild its type."""
    if isinstance(value, np.ndarray):
        return value, {"kind": "numpy"}
    if _is_torch(value):
        return _torch_pixels(value, name)
    if _is_pil(value):
        return _pil_pixels(value, name)
    if hasattr(value, "__dlpack__") or hasattr(value, "__array__"):
        return _generic_pixels(value, name)
    raise _unsupported(
        name,
        f"is a {type(value).__name__}; expected a NumPy array, a torch tensor, a PIL image "
        "or an array with __array__ or __dlpack__",
    )


def _check_dtype(pixels: np.ndarray, name: str, info: dict[str, Any]) -> None:
    dtype = pixels.dtype
    if dtype in NATIVE_DTYPES or dtype in WIDE_DTYPES or dtype in INTEGER_MAX:
        return
    shown = info.get("torch_dtype", dtype)
    raise _unsupported(name, f"has dtype {shown}; expected {SUPPORTED}")


def as_image(image: Any, name: str) -> tuple[np.ndarray, Restore]:
    """The pixels of ``image`` for the filter, and how to give a result back in its type.

    Args:
        image: a NumPy array, torch tensor, PIL image, or array with ``__dlpack__``
            or ``__array__``; ``HxW`` or ``HxWxC``.
        name: ``"color"``, ``"albedo"``, ``"normal"`` or ``"output"`` (for messages;
            integer normals encode [-1, 1]).

    Returns:
        ``(pixels, restore)``: ``pixels`` is float16/float32 (a view of a NumPy,
        CPU torch or DLPack float16/float32 input, else a float32 copy) of the
        caller's shape; ``restore`` rebuilds the caller's type from a result.

    Raises:
        InvalidOperationError: an unsupported type, dtype or PIL mode.
    """
    pixels, info = _to_numpy(image, name)
    _check_dtype(pixels, name, info)
    restore = Restore(
        shape=tuple(pixels.shape),
        dtype=pixels.dtype,
        integer_max=INTEGER_MAX.get(pixels.dtype),
        signed=name == "normal",
        **info,
    )
    if pixels.dtype in NATIVE_DTYPES:
        return pixels, restore
    if restore.integer_max is None:
        return pixels.astype(np.float32), restore
    return normalize(pixels, restore.integer_max, signed=restore.signed), restore


def normalize(pixels: np.ndarray, integer_max: int, *, signed: bool) -> np.ndarray:
    """LDR integers as float32: ``v / max``, or ``2 v / max - 1`` for ``signed`` (the normal).

    The one definition of the arithmetic: the device path (`image.tensors`) looks the
    same values up in a table made by this function.
    """
    values = pixels.astype(np.float32) / np.float32(integer_max)
    if signed:
        values = values * np.float32(2) - np.float32(1)
    return values


@dataclass(frozen=True)
class Call:
    """The images of one denoise call, as the filter takes them, and how to answer."""

    color: np.ndarray | None
    albedo: np.ndarray | None
    normal: np.ndarray | None
    output: np.ndarray | None
    restore: Restore | None
    target: Any = None

    def finish(self, result: np.ndarray) -> Any:
        """The filter's result (or its output array) in the caller's type."""
        if self.target is not None:
            if self.restore is None:  # the caller's own NumPy array, written by the filter
                return self.target
            return self.restore.write(result, self.target)
        if self.restore is None:
            return result
        return self.restore(result)


def _output(output: Any, *, signed: bool) -> tuple[np.ndarray | None, Restore | None]:
    """Where the filter writes: the caller's array itself when it can, else a scratch array."""
    if isinstance(output, np.ndarray) and output.dtype in NATIVE_DTYPES:
        return output, None
    if isinstance(output, np.ndarray) and not output.flags.writeable:
        raise InvalidArgumentError("output array is read-only; pass a writeable array")
    if not (isinstance(output, np.ndarray) or _is_torch(output) or _is_pil(output)):
        raise _unsupported(
            "output",
            f"is a {type(output).__name__}; expected a NumPy array, a torch tensor or a PIL image",
        )
    if _is_torch(output) and output.device.type == "cpu" and _torch_view_ok(output):
        view = output.detach().numpy()
        if view.dtype in NATIVE_DTYPES:
            return view, None
    pixels, restore = as_image(output, "output")
    return np.empty(pixels.shape, np.float32), replace(restore, signed=signed)


def _torch_view_ok(tensor: Any) -> bool:
    import torch

    return tensor.dtype in (torch.float16, torch.float32)


def as_call(color: Any, albedo: Any, normal: Any, output: Any, *, hdr: bool) -> Call:
    """Convert the images of a denoise call; the result follows ``output``, else the main image.

    The main image is the color, else the albedo, else the normal (as OIDN's filter).
    ``output`` of a NumPy float16/float32 array or CPU torch float16/float32 tensor is
    written in place; any other output type gets the result copied in after the filter
    finished, so a failed call leaves it untouched.

    Args:
        hdr: the color holds HDR values (``hdr=True`` or a lightmap): integer colors
            are refused.

    Raises:
        InvalidOperationError: an unsupported type, dtype or mode, or an integer color
            with ``hdr``.
    """
    converted: dict[str, np.ndarray | None] = {}
    main: Restore | None = None
    for name, image in (("color", color), ("albedo", albedo), ("normal", normal)):
        if image is None:
            converted[name] = None
            continue
        converted[name], restore = as_image(image, name)
        if main is None:
            main = restore
        if name == "color" and hdr and restore.normalized:
            raise integer_hdr_error(name, restore.dtype)
    if output is not None:
        scratch, restore = _output(output, signed=main is not None and main.signed)
        return Call(
            converted["color"],
            converted["albedo"],
            converted["normal"],
            scratch,
            restore,
            target=output,
        )
    return Call(converted["color"], converted["albedo"], converted["normal"], None, main)
