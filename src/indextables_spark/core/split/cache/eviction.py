"""The split cache's size bound (cache.py's SplitCache builds on CacheSpace): what the directories
under its root take (every process's that shares the root), and evicting the least recently used.

Size bound: option `cache.disk.maxSize` (default 10G), lowered so that the cache's file system
keeps `cache.disk.minFreeSpace` (default 2G) free for everything else on the disk (spill, other
tables, other caches); least recently used directories (by modification time, refreshed on each
use) are evicted, never one this process has open (cached handles, live SplitReader objects, or
handed out in the last GRACE_SECONDS).
"""

from __future__ import annotations

import os
import shutil
import threading
import time

from indextables_spark.config.registry import registered_default
from indextables_spark.core.split.cache import open_splits
from indextables_spark.core.split.cache.layout import STALE_TMP_SECONDS, discard, dir_size, is_leftover
from indextables_spark.core.split.cache.locks import LOCK_DIR
from indextables_spark.core.split.reference import native

DEFAULT_MAX_BYTES = registered_default("cache.disk.maxSize")
DEFAULT_MIN_FREE_BYTES = registered_default("cache.disk.minFreeSpace")
GRACE_SECONDS = 300.0  # a directory handed out recently counts as in use


class CacheSpace:
    """The directories under a cache root and their sizes, kept under `limit_bytes`. `_lock`
    guards the bookkeeping (a subclass guards its own with it too)."""

    def __init__(self, root: str, max_bytes: int = DEFAULT_MAX_BYTES):
        self.root = os.path.abspath(root)
        self.max_bytes = max_bytes
        self.min_free_bytes = DEFAULT_MIN_FREE_BYTES  # option cache.disk.minFreeSpace
        os.makedirs(self.root, exist_ok=True)
        self._lock = threading.Lock()
        self._sizes: dict[str, int] = {}  # directory name -> bytes
        self._decoded: set[str] = set()  # directories counted with their decoded rows (native.DECODED_ROWS)
        self._recent: dict[str, float] = {}  # directory -> when this process last handed it out
        self.grace_seconds = GRACE_SECONDS
        self.evictions = 0  # directories this process evicted

    def limit_bytes(self, used: int) -> int:
        """The size the cache may have now: `max_bytes`, or less where the file system would keep
        under `min_free_bytes` free (`used` is what the cache holds; evicting frees it)."""
        free = shutil.disk_usage(self.root).free
        return int(max(0, min(self.max_bytes, used + free - self.min_free_bytes)))

    def usage(self) -> tuple[int, int]:
        """(directories, bytes) on disk now, every process's."""
        with self._lock:
            self._rescan()
            return len(self._sizes), sum(self._sizes.values())

    def usage_bytes(self) -> int:
        return self.usage()[1]

    def _mark_used(self, final: str) -> None:
        """Used now: its modification time (what other processes see) and this process's own record."""
        now = time.time()
        try:
            os.utime(final, (now, now))
        except FileNotFoundError:
            pass  # evicted by another process right now; the caller's open handles still work
        with self._lock:
            self._recent[final] = now

    def _count(self, key: str, final: str) -> None:
        """A directory this process just put in place."""
        with self._lock:
            self._sizes[key] = dir_size(final)

    def _rescan(self) -> None:
        """Sizes of every cached directory (others may be written by other processes); leftovers
        of dead processes removed. The caller holds `_lock`."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            os.makedirs(self.root, exist_ok=True)
            names = []
        present = set()
        now = time.time()
        for n in names:
            path = os.path.join(self.root, n)
            if n == LOCK_DIR:
                continue
            if is_leftover(n):
                try:
                    if now - os.stat(path).st_mtime > STALE_TMP_SECONDS:
                        shutil.rmtree(path, ignore_errors=True)
                except FileNotFoundError:
                    pass
                continue
            present.add(n)
            if n not in self._sizes:
                self._sizes[n] = dir_size(path)
                if os.path.exists(os.path.join(path, native.DECODED_ROWS)):
                    self._decoded.add(n)
            elif n not in self._decoded and os.path.exists(os.path.join(path, native.DECODED_ROWS)):
                # a reference split whose document store a read decoded since (docstore.py)
                self._sizes[n] = dir_size(path)
                self._decoded.add(n)
        for gone in set(self._sizes) - present:
            del self._sizes[gone]
        self._decoded &= present

    def _evict(self, protect: str) -> None:
        """Least recently used directories removed until the cache is within its limit; never
        `protect`, nor one this process has open or handed out within `grace_seconds`."""
        with self._lock:
            self._rescan()
            total = sum(self._sizes.values())
            limit = self.limit_bytes(total)
            if total <= limit:
                return
            now = time.time()
            in_use = open_splits.dirs_in_use() | {protect}
            in_use |= {d for d, t in self._recent.items() if now - t < self.grace_seconds}
            candidates = []
            for key in self._sizes:
                path = os.path.join(self.root, key)
                if path in in_use:
                    continue
                try:  # last use: the mtime, or this process's own later use
                    candidates.append((max(os.stat(path).st_mtime, self._recent.get(path, 0.0)), key, path))
                except FileNotFoundError:
                    continue
            for _mtime, key, path in sorted(candidates):
                if total <= limit:
                    break
                if discard(self.root, path):
                    self.evictions += 1
                total -= self._sizes.pop(key, 0)
                self._recent.pop(path, None)

    def _remove_unread(self) -> tuple[list[str], int, int]:
        """Every directory no reader of this process reads right now removed (their cached handles
        dropped): (the directories removed, their bytes, the directories kept)."""
        removed: list[str] = []
        removed_bytes = kept = 0
        with self._lock:
            self._rescan()
            in_use = open_splits.dirs_being_read()
            for key in list(self._sizes):
                path = os.path.join(self.root, key)
                if path in in_use:
                    kept += 1
                    continue
                if not discard(self.root, path):
                    continue
                removed.append(path)
                removed_bytes += self._sizes.pop(key, 0)
        return removed, removed_bytes, kept
