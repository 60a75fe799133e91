"""The network executor protocol every backend implements (reference, wgpu, cuda).

An executor runs one network (the U-Net of a `ValidatedModel`) on packed
network inputs: ``[C_in, H, W]`` float32 with H and W multiples of the graph's
size alignment (16 for OIDN's U-Nets), giving ``[3, H, W]`` float32. Input
and output processing (transfer functions, tiling) happen outside it.

Lifetimes are explicit: shape-dependent state (plans, buffers) is built by
`prewarm` or on first use of a shape, and everything is released by `close`;
an executor is also a context manager through `ExecutorBase`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, runtime_checkable

import numpy as np

from oidn_gpu.errors import InvalidArgumentError


@dataclass(frozen=True)
class ExecutorInfo:
    """What an executor runs on and how.

    Attributes:
        backend: ``'reference'``, ``'wgpu'`` or ``'cuda'``.
        device: human-readable device name (CPU model, adapter name).
        precision: ``'fp32'`` or ``'fp16'`` (storage of activations).
        kernels: layer (value) name -> short description of the kernel that computes it.
    """

    backend: str
    device: str
    precision: str
    kernels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class ExecutorResources:
    """A snapshot of what an executor holds.

    Attributes:
        shapes: ``(H, W)`` sizes with a prepared plan, least recently used first.
        buffer_count: live buffers (host arrays or GPU buffers).
        byte_size: bytes held by those buffers, weights included.
    """

    shapes: tuple[tuple[int, int], ...]
    buffer_count: int
    byte_size: int


@runtime_checkable
class NetworkExecutor(Protocol):
    """Runs one network on packed inputs; see the module docstring."""

    def run(self, x: np.ndarray) -> np.ndarray:
        """Network output ``[3, H, W]`` float32 of the input ``[C_in, H, W]`` float32."""
        ...

    def prewarm(self, shapes: Iterable[tuple[int, int]]) -> None:
        """Prepare plans (and buffers) for input sizes ``(H, W)`` ahead of `run`."""
        ...

    def info(self) -> ExecutorInfo:
        """Backend, device, precision and the kernel chosen per layer."""
        ...

    def resources(self) -> ExecutorResources:
        """What the executor holds right now."""
        ...

    def close(self) -> None:
        """Release every buffer and plan; the executor is unusable afterwards."""
        ...


def check_network_input(x: np.ndarray, channels: int, alignment: int) -> np.ndarray:
    """Validate a network input at an executor boundary.

    Args:
        x: the candidate ``[C_in, H, W]`` array.
        channels: the network's input channel count.
        alignment: H and W must be positive multiples of it.

    Returns:
        ``x`` as a C-contiguous float32 array (no copy when it already is one).

    Raises:
        InvalidArgumentError: wrong type, rank, channel count, dtype kind or size.
    """
    if not isinstance(x, np.ndarray):
        raise InvalidArgumentError(f"network input is a {type(x).__name__}; expected a numpy array")
    if x.ndim != 3 or x.shape[0] != channels:
        raise InvalidArgumentError(
            f"network input has shape {x.shape}; expected ({channels}, H, W)"
        )
    if x.dtype.kind != "f":
        raise InvalidArgumentError(f"network input has dtype {x.dtype}; expected float32")
    height, width = x.shape[1:]
    if height <= 0 or width <= 0 or height % alignment or width % alignment:
        raise InvalidArgumentError(
            f"network input size {width}x{height} must be a positive multiple of {alignment} "
            "in both dimensions"
        )
    return np.ascontiguousarray(x, dtype=np.float32)


class ExecutorBase:
    """Optional mixin: context-manager support on top of ``close()``."""

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __enter__(self) -> ExecutorBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
