"""The package's one LRU: a small thread-safe map for per-process caches of what immutable files
give (delete logs, Bloom filters, aggregation partials, decoded columns), of open handles and of
clients and credential objects (core/storage/): computed once, dropped least recently used past a
bound on the number of entries, on their total weight (bytes), or both."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


class LruCache(Generic[V]):
    def __init__(
        self,
        max_entries: int | None,
        per_process: bool = False,
        *,
        max_weight: int | None = None,
        weigh: Callable[[V], int] | None = None,
    ):
        """max_entries: the most entries kept (None: no bound on their number).
        per_process: a forked child starts empty (for values holding locks or connections,
        which belong to the parent).
        max_weight, weigh: the most total weight kept, each entry weighing weigh(value) (e.g. the
        bytes of an Arrow array); the least recently used go until the rest fit."""
        if (max_weight is None) != (weigh is None):
            raise ValueError("LruCache: max_weight and weigh go together")
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._weigh = weigh
        self._weight = 0
        self._items: "OrderedDict[Hashable, V]" = OrderedDict()
        self._lock = threading.Lock()
        self._per_process = per_process
        self._pid = os.getpid()

    def _forget_parent(self) -> None:  # under the lock
        if self._per_process and self._pid != os.getpid():
            self._clear()
            self._pid = os.getpid()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            self._forget_parent()
            return self._touch(key)

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._forget_parent()
            self._drop(key)
            self._add(key, value)

    def put_if_absent(self, key: Hashable, value: V) -> V:
        """The value stored for `key`: the one already there (made most recent), else `value`."""
        with self._lock:
            self._forget_parent()
            held = self._touch(key)
            if held is not None:
                return held
            self._add(key, value)
            return value

    def get_or_build(self, key: Hashable, build: Callable[[], V]) -> V:
        """The value for `key`, built on a miss. `build` runs outside the lock (it may be slow: a
        client, a provider call); when two threads build one key at once, the first stored wins."""
        hit = self.get(key)
        if hit is not None:
            return hit
        return self.put_if_absent(key, build())

    def pop(self, key: Hashable) -> V | None:
        """Remove `key`'s entry; its value, or None when there was none."""
        with self._lock:
            self._forget_parent()
            return self._drop(key)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            self._forget_parent()
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            self._forget_parent()
            return len(self._items)

    def keys(self) -> list[Hashable]:
        """A snapshot of the keys, least recently used first."""
        with self._lock:
            self._forget_parent()
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._clear()

    # -- under the lock ------------------------------------------------------------------------

    def _touch(self, key: Hashable) -> V | None:
        """The value for key, made the most recent; None on a miss."""
        hit = self._items.get(key)
        if hit is not None:
            self._items.move_to_end(key)
        return hit

    def _add(self, key: Hashable, value: V) -> None:
        self._items[key] = value
        if self._weigh is not None:
            self._weight += self._weigh(value)
        self._trim()

    def _drop(self, key: Hashable) -> V | None:
        value = self._items.pop(key, None)
        if value is not None and self._weigh is not None:
            self._weight -= self._weigh(value)
        return value

    def _trim(self) -> None:
        def over() -> bool:
            if self.max_entries is not None and len(self._items) > self.max_entries:
                return True
            return self.max_weight is not None and self._weight > self.max_weight

        while self._items and over():
            self._drop(next(iter(self._items)))

    def _clear(self) -> None:
        self._items.clear()
        self._weight = 0
