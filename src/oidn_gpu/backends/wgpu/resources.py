"""Tracking of the GPU objects an executor owns, by kind, with a snapshot.

Every buffer and query set an executor creates goes through a `ResourceTracker`;
releasing goes through it too, so `snapshot()` always says what is alive.
`close()` on an executor must leave its snapshot empty, which the tests check.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

BUFFER = "gpu-buffer"
QUERY_SET = "gpu-query-set"


@dataclass(frozen=True)
class ResourceSnapshot:
    """Live GPU objects of one owner.

    Attributes:
        counts: number of live objects by kind, e.g. ``(("gpu-buffer", 12),)``.
        byte_size: total bytes of live buffers.
        pending_operations: deferred releases and profile readbacks not yet finished.
    """

    counts: tuple[tuple[str, int], ...]
    byte_size: int
    pending_operations: int

    def count(self, kind: str) -> int:
        return dict(self.counts).get(kind, 0)

    @property
    def total(self) -> int:
        return sum(n for _, n in self.counts)

    @property
    def is_empty(self) -> bool:
        return self.total == 0 and self.pending_operations == 0


class ResourceTracker:
    """Set of live GPU objects, keyed by identity."""

    def __init__(self) -> None:
        self._live: dict[int, tuple[str, Any, int]] = {}

    def track(self, kind: str, obj: Any) -> Any:
        """Record ``obj`` as live and return it."""
        size = int(getattr(obj, "size", 0) or 0) if kind == BUFFER else 0
        self._live[id(obj)] = (kind, obj, size)
        return obj

    def release(self, obj: Any, destroy: Callable[[Any], None] | None = None) -> None:
        """Forget ``obj`` and destroy it (``obj.destroy()`` by default); None is ignored."""
        if obj is None or id(obj) not in self._live:
            return
        del self._live[id(obj)]
        with contextlib.suppress(Exception):  # a lost device already freed everything
            (destroy or (lambda o: o.destroy()))(obj)

    def release_all(self) -> None:
        for _, obj, _ in list(self._live.values()):
            self.release(obj)

    def snapshot(self, pending_operations: int = 0) -> ResourceSnapshot:
        counts: dict[str, int] = {}
        byte_size = 0
        for kind, _, size in self._live.values():
            counts[kind] = counts.get(kind, 0) + 1
            byte_size += size
        return ResourceSnapshot(
            counts=tuple(sorted(counts.items())),
            byte_size=byte_size,
            pending_operations=pending_operations,
        )
