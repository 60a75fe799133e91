"""Result arrays in pinned host memory, reused once the caller lets go of them.

A NumPy result written into a fresh ``np.empty`` array costs, besides the device-to-host
transfer into a pinned buffer, a second copy out of it and the first touch of every page
of the new array (a 1920x1080 RGB float32 result is 25 MB: about 6,000 page faults a
call, whose cost depends on what the process allocated before). `PinnedResults` hands out
arrays that live in pinned memory instead: the device copies the result straight into
them, and an array comes back to the pool once the caller (and every view of it) has
dropped it, which a weak reference tells; its pages stay mapped. A caller that keeps its
results (a list of frames) gets fresh arrays once the pool's slots are all held.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

# Slots per pool: two let a loop ``out = denoiser.denoise(...)`` alternate between them
# (the previous result is still held while the next is made).
SLOTS = 2
# Larger results take the unpooled path: pinned memory is a scarce host resource.
MAX_POOLED_BYTES = 256 << 20


@dataclass
class _Slot:
    tensor: Any  # the pinned torch CPU tensor that owns the memory
    handed: Any = None  # weakref.ref to the array last handed out, or None

    def free(self) -> bool:
        return self.handed is None or self.handed() is None


class PinnedResults:
    """A bounded pool of pinned float32 result arrays (`take`)."""

    def __init__(
        self,
        torch: Any,
        *,
        pinned: bool = True,
        slots: int = SLOTS,
        max_bytes: int = MAX_POOLED_BYTES,
    ) -> None:
        self._torch = torch
        self._pinned = pinned  # False on a machine without CUDA (plain CPU tensors)
        self._slots_max = slots
        self._max_bytes = max_bytes
        self._slots: list[_Slot] = []

    def take(self, shape: tuple[int, ...]) -> tuple[Any, np.ndarray] | None:
        """``(pinned tensor, the array over it)`` of ``shape``, float32, not held by anyone;
        None when the shape is too large to pool or every slot is held."""
        nbytes = int(np.prod(shape)) * 4
        if nbytes > self._max_bytes:
            return None
        slot = self._free_slot(tuple(shape))
        if slot is None:
            return None
        array = slot.tensor.numpy()  # its base is the tensor: views keep both alive
        slot.handed = weakref.ref(array)
        return slot.tensor, array

    def _free_slot(self, shape: tuple[int, ...]) -> _Slot | None:
        free = [s for s in self._slots if s.free()]
        for slot in free:
            if tuple(slot.tensor.shape) == shape:
                return slot
        if len(self._slots) < self._slots_max:
            slot = _Slot(self._empty(shape))
            self._slots.append(slot)
            return slot
        if free:  # a free slot of another size: replace its memory
            free[0].tensor = self._empty(shape)
            free[0].handed = None
            return free[0]
        return None

    def _empty(self, shape: tuple[int, ...]) -> Any:
        torch = self._torch
        return torch.empty(shape, dtype=torch.float32, pin_memory=self._pinned)

    def tensors(self) -> list[Any]:
        """The pinned tensors the pool holds."""
        return [s.tensor for s in self._slots]

    def nbytes(self) -> int:
        """Pinned bytes the pool holds."""
        return sum(int(s.tensor.numel()) * 4 for s in self._slots)

    def clear(self) -> None:
        """Forget the slots (arrays still held keep their memory until they are dropped)."""
        self._slots.clear()
