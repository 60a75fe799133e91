"""Result arrays reused once the caller lets go of them.

A result written into a fresh ``np.empty`` array pays the first touch of every page (a
1920x1080 RGBA float32 result is 33 MB: about 8,000 page faults a call, tens of
milliseconds on some virtual machines). `ResultPool` hands out arrays over memory it
keeps: an array comes back to the pool once the caller, and every view of it, has dropped
it (a weak reference to the array all of them are views of tells); a caller that keeps
its results (a list of frames) gets fresh memory once every slot is held.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

# Two slots let a loop ``out = denoiser.denoise(...)`` alternate between them (the previous
# result is still held while the next is made).
SLOTS = 2
MAX_POOLED_BYTES = 256 << 20  # larger results are allocated for each call


class _Slot:
    def __init__(self, nbytes: int) -> None:
        self.memory = bytearray(nbytes)
        self.handed: Any = None  # weakref.ref to the array last handed out, or None

    def free(self) -> bool:
        return self.handed is None or self.handed() is None


class ResultPool:
    """A bounded pool of result arrays (`take`)."""

    def __init__(self, *, slots: int = SLOTS, max_bytes: int = MAX_POOLED_BYTES) -> None:
        self._slots_max = slots
        self._max_bytes = max_bytes
        self._slots: list[_Slot] = []

    def take(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A writeable array of ``shape`` and ``dtype`` (contents undefined) that no one
        else holds: pooled memory where a slot is free, else a new array."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        slot = self._free_slot(nbytes) if 0 < nbytes <= self._max_bytes else None
        if slot is None:
            return np.empty(shape, dtype)
        # Every view the caller makes has this flat array as its base, so the slot is
        # free only once all of them are gone.
        flat = np.frombuffer(slot.memory, dtype=dtype, count=nbytes // dtype.itemsize)
        slot.handed = weakref.ref(flat)
        return flat.reshape(shape)

    def _free_slot(self, nbytes: int) -> _Slot | None:
        free = [s for s in self._slots if s.free()]
        for slot in free:
            if len(slot.memory) == nbytes:
                return slot
        if len(self._slots) < self._slots_max:
            self._slots.append(_Slot(nbytes))
            return self._slots[-1]
        if free:  # a free slot of another size: replace its memory
            free[0].memory = bytearray(nbytes)
            free[0].handed = None
            return free[0]
        return None

    def nbytes(self) -> int:
        """Bytes the pool holds."""
        return sum(len(s.memory) for s in self._slots)
