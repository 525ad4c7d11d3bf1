"""The one in-process cache: a small thread-safe LRU mapping."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class LRU(Generic[V]):
    """Least-recently-used mapping of at most `size` entries. Values are shared between callers
    (threads, requests): never mutate one."""

    def __init__(self, size: int) -> None:
        self._data: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()
        self._size = size

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def get_or_make(self, key: Hashable, make: Callable[[], V]) -> V:
        """The cached value, or `make()` stored under `key` (made outside the lock)."""
        value = self.get(key)
        if value is None:
            value = make()
            self.put(key, value)
        return value
