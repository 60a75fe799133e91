"""Device arrays in, the caller's type out: the images of a denoise that stays on the GPU.

The device counterpart of `image.arrays`: `as_device_call` wraps what a caller
passes, without a copy, as torch tensors, when every image (and the output) is
a torch tensor or a CUDA array of another library:

- torch tensors (any device: the filter decides whether its backend takes them);
- objects with ``__dlpack__`` whose ``__dlpack_device__`` is CUDA (CuPy, JAX on a
  GPU, ...), wrapped by `torch.from_dlpack`; answered through their Array API
  namespace's (or module's) ``from_dlpack`` when it has one, else as a torch tensor;
- objects with ``__cuda_array_interface__`` (Numba, ...), wrapped by
  `torch.as_tensor`; answered as torch tensors.

The conversions are those of the NumPy path, done on the device with the same
arithmetic, so the images are the same bits: float16 and float32 are used as
they are; float64 and bfloat16 are converted to float32 where the filter copies
them (round to nearest even, as NumPy's ``astype``); uint8 and uint16 are looked
up in a table made by `arrays.normalize`; on the way out `DeviceRestore` rounds
and clips integers as `arrays.Restore.pixels` does.

torch is imported only when an image is a torch tensor or a CUDA array.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError
from oidn_gpu.image import arrays

# DLPack device types (dlpack.h, DLDeviceType): the CUDA ones a GPU denoise can read.
DLPACK_CUDA = 2
DLPACK_CUDA_MANAGED = 13
_CUDA_DLPACK_DEVICES = (DLPACK_CUDA, DLPACK_CUDA_MANAGED)

_tables: dict[tuple[Any, int, bool], Any] = {}
_tables_lock = threading.Lock()


def device_kind(value: Any) -> str | None:
    """``"torch"`` for a torch tensor, ``"cuda"`` for another library's CUDA array, else
    None (NumPy arrays, host DLPack arrays, PIL images...); never imports torch."""
    if arrays._is_torch(value):
        return "torch"
    if isinstance(value, np.ndarray):
        return None
    if hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        try:
            kind = int(value.__dlpack_device__()[0])
        except Exception:  # an object that cannot say where it lives is not a device array
            return None
        return "cuda" if kind in _CUDA_DLPACK_DEVICES else None
    if hasattr(value, "__cuda_array_interface__"):
        return "cuda"
    return None


def cuda_device(value: Any) -> Any:
    """The torch CUDA device a torch tensor or CUDA array lives on, else None."""
    kind = device_kind(value)
    if kind == "torch":
        return value.device if value.device.type == "cuda" else None
    if kind is None:
        return None
    import torch

    if hasattr(value, "__dlpack_device__"):
        return torch.device("cuda", int(value.__dlpack_device__()[1]))
    return as_tensor(value).device


def as_tensor(value: Any) -> Any:
    """``value`` as a torch tensor sharing its memory (detached; DLPack, else the CUDA
    array interface)."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach()
    if hasattr(value, "__dlpack__"):
        return torch.from_dlpack(value)
    return torch.as_tensor(value, device="cuda")


def _answer(value: Any) -> Callable[[Any], Any] | None:
    """How to give a torch result back in the type of ``value``: its namespace's (or
    module's) ``from_dlpack``; None: a torch tensor."""
    if arrays._is_torch(value) or not hasattr(value, "__dlpack__"):
        return None
    if hasattr(value, "__array_namespace__"):
        try:
            namespace = value.__array_namespace__()
        except Exception:
            namespace = None
        if hasattr(namespace, "from_dlpack"):
            return namespace.from_dlpack
    module = sys.modules.get(type(value).__module__.split(".", 1)[0])
    return getattr(module, "from_dlpack", None)


def _numpy_dtype(tensor: Any, name: str) -> np.dtype:
    """The NumPy dtype the NumPy path computes ``tensor`` as (float32 for bfloat16)."""
    import torch

    dtype = {
        torch.float16: np.float16,
        torch.float32: np.float32,
        torch.float64: np.float64,
        torch.bfloat16: np.float32,
        torch.uint8: np.uint8,
        torch.uint16: np.uint16,
    }.get(tensor.dtype)
    if dtype is None:
        raise arrays._unsupported(name, f"has dtype {tensor.dtype}; expected {arrays.SUPPORTED}")
    return np.dtype(dtype)


@dataclass(frozen=True)
class DeviceRestore:
    """Turns a float32 ``HxWxC`` result tensor into the caller's type, shape and dtype.

    Attributes:
        shape: the caller's shape (``HxW`` or ``HxWxC``).
        dtype: the caller's torch dtype.
        integer_max: 255 or 65535 for normalized integers, else None.
        signed: integers encode [-1, 1] (the normal) instead of [0, 1].
        from_dlpack: the caller's library's ``from_dlpack``; None: answer torch tensors.
    """

    shape: tuple[int, ...]
    dtype: Any
    integer_max: int | None = None
    signed: bool = False
    from_dlpack: Callable[[Any], Any] | None = None

    def pixels(self, result: Any, *, owned: bool = False) -> Any:
        """``result`` in the caller's dtype: a new tensor (``owned``: ``result`` itself
        where it has that dtype already), the arithmetic of `arrays.Restore.pixels`."""
        import torch

        if self.integer_max is None:
            return result.to(self.dtype, copy=not owned)
        scaled = torch.nan_to_num(result.to(torch.float32), nan=0.0)
        if self.signed:
            scaled = (scaled + 1.0) * 0.5
        top = float(self.integer_max)
        return torch.clamp(torch.round(scaled * top), 0.0, top).to(self.dtype)

    def __call__(self, result: Any, *, owned: bool = False) -> Any:
        """A new object of the caller's type holding ``result`` (``owned``: a tensor
        nothing else holds, answered as it is where it has the caller's dtype)."""
        tensor = self.pixels(result, owned=owned).reshape(self.shape)
        return tensor if self.from_dlpack is None else self.from_dlpack(tensor)

    def write(self, result: Any, target: Any) -> None:
        """Copy ``result`` into ``target`` (a tensor of the caller's dtype, ``HxWxC``)."""
        target.copy_(result if self.integer_max is None else self.pixels(result))


def _restore(tensor: Any, value: Any, name: str, *, signed: bool) -> DeviceRestore:
    dtype = _numpy_dtype(tensor, name)
    return DeviceRestore(
        shape=tuple(tensor.shape),
        dtype=tensor.dtype,
        integer_max=arrays.INTEGER_MAX.get(dtype),
        signed=signed,
        from_dlpack=_answer(value),
    )


def _table(device: Any, integer_max: int, signed: bool) -> Any:
    """Every integer's float32 value (`arrays.normalize`) on ``device``, made once."""
    import torch

    key = (device, integer_max, signed)
    with _tables_lock:
        table = _tables.get(key)
        if table is None:
            dtype = np.uint8 if integer_max == 255 else np.uint16
            values = arrays.normalize(
                np.arange(integer_max + 1, dtype=dtype), integer_max, signed=signed
            )
            table = _tables[key] = torch.from_numpy(values).to(device)
    return table


def decode(tensor: Any, restore: DeviceRestore) -> Any:
    """The filter's view of an image: float tensors as they are, integers as float32
    (`arrays.normalize`, looked up in a table on the tensor's device)."""
    import torch

    if restore.integer_max is None:
        return tensor
    table = _table(tensor.device, restore.integer_max, restore.signed)
    index = tensor.to(torch.int32).reshape(-1)
    return torch.index_select(table, 0, index).reshape(tensor.shape)


@dataclass(frozen=True)
class DeviceCall:
    """The images of one denoise call as torch tensors (undecoded), and how to answer.

    Attributes:
        color, albedo, normal: the caller's images as tensors sharing their memory.
        output: the caller's output as a tensor sharing its memory, or None.
        target: the caller's output object (returned as it is), or None.
        restore: how to answer: the output's dtype if given, else the main image's.
        images_restore: each given image's decoding (name -> `DeviceRestore`).
    """

    color: Any
    albedo: Any
    normal: Any
    output: Any
    target: Any
    restore: DeviceRestore
    images_restore: dict[str, DeviceRestore]

    def tensors(self) -> list[tuple[str, Any]]:
        """``(name, tensor)`` of every given image and the output."""
        named = (
            ("color", self.color),
            ("albedo", self.albedo),
            ("normal", self.normal),
            ("output", self.output),
        )
        return [(name, tensor) for name, tensor in named if tensor is not None]

    def decoded(self, name: str) -> Any:
        """Image ``name`` as the filter reads it (`decode`), or None when not given."""
        tensor = getattr(self, name)
        return None if tensor is None else decode(tensor, self.images_restore[name])

    def finish(self, result: Any, *, owned: bool = False) -> Any:
        """The float32 ``HxWxC`` result (alpha appended) in the caller's type, or written
        into its output. ``owned``: ``result`` is a tensor nothing else holds (not a
        runner's buffer), answered without a copy where the caller's dtype is float32."""
        if self.target is None:
            return self.restore(result, owned=owned)
        target = self.output if self.output.dim() == 3 else self.output.unsqueeze(2)
        self.restore.write(result, target)
        return self.target


def as_device_call(
    color: Any, albedo: Any, normal: Any, output: Any, *, hdr: bool
) -> DeviceCall | None:
    """Wrap the images of a denoise call as tensors, or None when one of them (or the
    output) is not a torch tensor or CUDA array (the call takes the NumPy path).

    Raises:
        InvalidOperationError: an unsupported dtype, or an integer color with ``hdr``
            (the messages of `arrays.as_call`).
    """
    named = [
        (n, v)
        for n, v in (("color", color), ("albedo", albedo), ("normal", normal))
        if v is not None
    ]
    values = [v for _, v in named] + ([output] if output is not None else [])
    if not named or any(device_kind(v) is None for v in values):
        return None
    if not _torch_importable():
        return None
    for name, value in [*named, *([("output", output)] if output is not None else [])]:
        _check_reachable(name, value)
    tensors: dict[str, Any] = {"color": None, "albedo": None, "normal": None}
    restores: dict[str, DeviceRestore] = {}
    for name, value in named:
        tensor = as_tensor(value)
        restore = _restore(tensor, value, name, signed=name == "normal")
        if name == "color" and hdr and restore.integer_max is not None:
            raise arrays.integer_hdr_error(name, _numpy_dtype(tensor, name))
        tensors[name], restores[name] = tensor, restore
    main = restores[named[0][0]]
    out_tensor = None
    restore = main
    if output is not None:
        out_tensor = as_tensor(output)
        restore = _restore(out_tensor, output, "output", signed=main.signed)
    return DeviceCall(
        tensors["color"],
        tensors["albedo"],
        tensors["normal"],
        out_tensor,
        output,
        restore,
        restores,
    )


def _check_reachable(name: str, value: Any) -> None:
    """Refuse, with our error, an image whose memory this process cannot read: a CUDA
    array or tensor where torch sees no CUDA GPU, or a torch tensor without data
    (the ``meta`` device) or on a device other than the CPU and CUDA.

    Raises:
        UnsupportedDeviceError: CUDA memory and no CUDA GPU here.
        InvalidArgumentError: a tensor on another device.
    """
    import torch

    kind = device_kind(value)
    device = value.device.type if kind == "torch" else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise UnsupportedDeviceError(
            f"the {name} image is a CUDA array ({type(value).__name__}), but this torch "
            f"({torch.__version__}) sees no CUDA GPU; pass a NumPy array or a CPU tensor, "
            "or run where CUDA is available"
        )
    if device not in ("cpu", "cuda"):
        raise InvalidArgumentError(
            f"the {name} image is a torch tensor on device '{value.device}'; expected a "
            "CPU or CUDA tensor, or a NumPy array"
        )


def _torch_importable() -> bool:
    """Whether torch can be imported (a CUDA array without torch takes the NumPy path)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True
