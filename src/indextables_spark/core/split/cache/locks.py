"""The split cache's fetch lock across threads and processes: `<root>/.locks/` holds LOCK_STRIPES
lock files, one chosen by a split's key (`fcntl.flock` on a descriptor opened per call, so two
threads of one process exclude each other too; a process that dies releases its lock; where
flock is not available the rename race of layout.py still keeps the cache correct, a split may
then be fetched twice)."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

LOCK_DIR = ".locks"  # lock files of the cross-process fetch lock (never evicted)
LOCK_STRIPES = 256

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def process_lock(root: str, key: str) -> Iterator[None]:
    """Exclusive against other processes fetching a split of the same lock stripe."""
    if fcntl is None:
        yield
        return
    lock_dir = os.path.join(root, LOCK_DIR)
    os.makedirs(lock_dir, exist_ok=True)
    fd = os.open(os.path.join(lock_dir, f"{int(key[:8], 16) % LOCK_STRIPES:03d}"), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
