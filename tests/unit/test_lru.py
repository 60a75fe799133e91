"""The one LRU cache (`backends.lru.LruCache`) of frames, shape plans and bind groups."""

from __future__ import annotations

import pytest

from oidn_gpu.backends.lru import LruCache
from oidn_gpu.errors import InvalidArgumentError


def test_the_least_recently_used_entry_is_evicted_first() -> None:
    evicted: list[str] = []
    cache: LruCache[int, str] = LruCache(2, evicted.append)
    cache.put(1, "a")
    cache.put(2, "b")
    assert cache.get(1) == "a"  # 2 is now the least recently used
    cache.put(3, "c")
    assert evicted == ["b"] and list(cache) == [1, 3]


def test_reading_through_the_mapping_interface_keeps_the_order() -> None:
    cache: LruCache[int, str] = LruCache(2)
    cache.put(1, "a")
    cache.put(2, "b")
    assert cache[1] == "a" and 1 in cache and dict(cache) == {1: "a", 2: "b"}
    cache.put(3, "c")  # 1 was only read by [], so it goes
    assert list(cache) == [2, 3] and cache == {2: "b", 3: "c"}


def test_make_room_evicts_before_a_new_value_is_built() -> None:
    evicted: list[str] = []
    cache: LruCache[int, str] = LruCache(2, evicted.append)
    cache.put(1, "a")
    cache.put(2, "b")
    cache.make_room()
    assert evicted == ["a"] and len(cache) == 1
    cache.put(3, "c")
    assert evicted == ["a"] and list(cache) == [2, 3]


def test_pop_and_clear_hand_values_back_without_evicting() -> None:
    evicted: list[str] = []
    cache: LruCache[int, str] = LruCache(3, evicted.append)
    for key, value in enumerate("abc"):
        cache.put(key, value)
    assert cache.pop(1) == "b" and cache.pop(7) is None
    assert cache.clear() == ["a", "c"] and len(cache) == 0 and evicted == []


def test_get_or_put_builds_once() -> None:
    built: list[int] = []

    def make() -> str:
        built.append(1)
        return "value"

    cache: LruCache[str, str] = LruCache(1)
    assert cache.get_or_put("k", make) == ("value", False)
    assert cache.get_or_put("k", make) == ("value", True)
    assert built == [1]


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_a_cache_keeps_at_least_one_entry(size: object) -> None:
    with pytest.raises(InvalidArgumentError, match="cache size"):
        LruCache(size)  # type: ignore[arg-type]
