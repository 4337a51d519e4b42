"""What this process fetched from object storage (S3, Azure): bytes and GET requests since it
started, counted by core/storage/object_store.py's `read` and `read_range` (transaction log files,
split footers and sections, whole splits). DESCRIBE INDEXTABLES STORAGE STATS (ops/cluster/storage_stats.py)
reports them per process, as the reference reports tantivy4java's SplitCacheManager counters per
JVM; local files are not counted (neither are they there)."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class FetchStats:
    bytes_fetched: int
    requests: int


_lock = threading.Lock()
_bytes = 0
_requests = 0


def record_fetch(nbytes: int) -> None:
    """One GET request answered with `nbytes` bytes."""
    global _bytes, _requests
    with _lock:
        _bytes += nbytes
        _requests += 1


def fetch_stats() -> FetchStats:
    """The counters of this process (cumulative since it started)."""
    with _lock:
        return FetchStats(_bytes, _requests)
