"""One least-recently-used cache: the per-configuration frames, shape plans and bind groups.

`LruCache` is a mapping that keeps at most ``size`` entries: `get` and `put` make an
entry the most recently used, and `put` evicts the least recently used entries beyond
``size``, handing each to the cache's ``evict`` callback (which releases GPU objects
once the queue is done with them, for example). Reading through the `Mapping`
interface (``cache[key]``, ``in``, iteration) changes no order. Values are never
None (`get` answers None for a missing key). Not thread-safe: callers that share a
cache between threads hold their own lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Generic, TypeVar

from oidn_gpu.errors import InvalidArgumentError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Mapping[K, V], Generic[K, V]):
    """At most ``size`` entries, the least recently used evicted first.

    Args:
        size: how many entries to keep (at least 1).
        evict: called with each value `put` evicts (not with values `pop` or `clear`
            remove: their caller handles those).
    """

    def __init__(self, size: int, evict: Callable[[V], None] | None = None) -> None:
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._evict = evict
        self.size = size

    @property
    def size(self) -> int:
        return self._size

    @size.setter
    def size(self, size: int) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidArgumentError(f"cache size is {size!r}; expected a positive integer")
        self._size = size

    def get(self, key: K, default: V | None = None) -> V | None:  # type: ignore[override]
        """The value of ``key`` (now the most recently used), or ``default``."""
        value = self._entries.get(key)
        if value is None:
            return default
        self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` as the most recently used entry; evict beyond `size`."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            _, evicted = self._entries.popitem(last=False)
            if self._evict is not None:
                self._evict(evicted)

    def make_room(self) -> None:
        """Evict least recently used entries until one more fits (before building a large
        value, so that the evicted one is released first)."""
        while len(self._entries) >= self._size:
            _, evicted = self._entries.popitem(last=False)
            if self._evict is not None:
                self._evict(evicted)

    def get_or_put(self, key: K, make: Callable[[], V]) -> tuple[V, bool]:
        """``(value of key, True)`` when cached (now the most recently used), else
        ``(make(), False)`` after putting it."""
        value = self.get(key)
        if value is not None:
            return value, True
        value = make()
        self.put(key, value)
        return value, False

    def pop(self, key: K, default: V | None = None) -> V | None:
        """Remove ``key`` and return its value (``default`` when absent); no ``evict``."""
        return self._entries.pop(key, default)

    def clear(self) -> list[V]:
        """Remove every entry (no ``evict``); returns the values, least recent first."""
        values = list(self._entries.values())
        self._entries.clear()
        return values

    def __getitem__(self, key: K) -> V:
        return self._entries[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._entries)

    def __reversed__(self) -> Iterator[K]:
        return reversed(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"LruCache(size={self._size}, keys={list(self._entries)!r})"
