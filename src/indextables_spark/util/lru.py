"""A small thread-safe LRU map for per-process caches of what immutable files give (delete logs,
Bloom filters, aggregation partials) and of clients and credential objects (storage/): computed
once, dropped least recently used past a bound."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


class LruCache(Generic[V]):
    def __init__(self, max_entries: int, per_process: bool = False):
        """per_process: a forked child starts empty (for values holding locks or connections,
        which belong to the parent)."""
        self.max_entries = max_entries
        self._items: "OrderedDict[Hashable, V]" = OrderedDict()
        self._lock = threading.Lock()
        self._per_process = per_process
        self._pid = os.getpid()

    def _forget_parent(self) -> None:  # under the lock
        if self._per_process and self._pid != os.getpid():
            self._items.clear()
            self._pid = os.getpid()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            self._forget_parent()
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._forget_parent()
            self._items[key] = value
            self._items.move_to_end(key)
            self._trim()

    def get_or_build(self, key: Hashable, build: Callable[[], V]) -> V:
        """The value for `key`, built on a miss. `build` runs outside the lock (it may be slow: a
        client, a provider call); when two threads build one key at once, the first stored wins."""
        hit = self.get(key)
        if hit is not None:
            return hit
        built = build()
        with self._lock:
            self._forget_parent()
            value = self._items.setdefault(key, built)
            self._items.move_to_end(key)
            self._trim()
            return value

    def _trim(self) -> None:  # under the lock
        while len(self._items) > self.max_entries:
            self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
