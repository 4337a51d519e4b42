"""Long-lived thread pools: starting threads per call costs more (~0.1 ms each) than searching or
aggregating a small split. One pool per purpose, so that a task never waits on its own pool."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

_pools: dict[tuple[str, int], ThreadPoolExecutor] = {}
_lock = threading.Lock()


def shared_pool(purpose: str, threads: int) -> ThreadPoolExecutor:
    """The process's pool of `threads` threads for `purpose` (e.g. "search", "fetch")."""
    key = (purpose, threads)
    with _lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"indextables-{purpose}")
        return pool
