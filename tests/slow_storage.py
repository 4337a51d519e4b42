"""A storage that behaves like a distant object store (test and bench helper, not product code).

`SlowStorage` wraps any Storage: every request sleeps `delay` seconds first (the round trip of an
object store: ~20 ms on S3 from another region, 3-20 ms on moto), it claims no local paths (so
readers take the object-store code paths: split caches, ranged reads), and it records each call
(operation, key, start, end). `rounds()` is the number of dependent rounds those calls took: a call
is in round 1 + the highest round of the calls that ended before it started, so requests issued
together count once and requests issued one after another count one each."""

from __future__ import annotations

import builtins
import threading
import time
from dataclasses import dataclass
from typing import Iterable

from indextables_spark.core.storage.base import FileInfo, Storage


@dataclass
class Call:
    op: str
    key: str
    start: float
    end: float = 0.0


class SlowStorage(Storage):
    def __init__(self, inner: Storage, delay: float = 0.02):
        self.inner = inner
        self.uri = inner.uri
        self.options = inner.options
        self.delay = delay
        self._lock = threading.Lock()
        self.calls: list[Call] = []

    def _call(self, op: str, key: str) -> Call:
        c = Call(op, key, time.perf_counter())
        time.sleep(self.delay)
        return c

    def _done(self, c: Call) -> None:
        c.end = time.perf_counter()
        with self._lock:
            self.calls.append(c)

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()

    def ops(self, prefix: str = "") -> list[tuple[str, str]]:
        """(operation, key) of the calls on keys under `prefix`, in the order they started."""
        with self._lock:
            calls = sorted(self.calls, key=lambda c: c.start)
        return [(c.op, c.key) for c in calls if c.key.startswith(prefix)]

    def rounds(self, prefix: str = "") -> int:
        """Dependent rounds of the calls on keys under `prefix` (see the module's docstring)."""
        with self._lock:
            calls = sorted((c for c in self.calls if c.key.startswith(prefix)), key=lambda c: c.start)
        depth: list[int] = []
        for i, c in enumerate(calls):
            before = [depth[j] for j in range(i) if calls[j].end <= c.start]
            depth.append(1 + max(before, default=0))
        return max(depth, default=0)

    def read(self, key: str) -> bytes:
        c = self._call("read", key)
        try:
            return self.inner.read(key)
        finally:
            self._done(c)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        c = self._call("read_range", key)
        try:
            return self.inner.read_range(key, start, end)
        finally:
            self._done(c)

    def put(self, key: str, data: bytes) -> None:
        c = self._call("put", key)
        try:
            self.inner.put(key, data)
        finally:
            self._done(c)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        c = self._call("put_if_absent", key)
        try:
            return self.inner.put_if_absent(key, data)
        finally:
            self._done(c)

    def list(self, prefix: str) -> builtins.list[FileInfo]:
        c = self._call("list", prefix)
        try:
            return self.inner.list(prefix)
        finally:
            self._done(c)

    def delete(self, keys: Iterable[str]) -> None:
        keys = builtins.list(keys)
        c = self._call("delete", keys[0] if keys else "")
        try:
            self.inner.delete(keys)
        finally:
            self._done(c)

    def stat(self, key: str) -> FileInfo | None:
        c = self._call("stat", key)
        try:
            return self.inner.stat(key)
        finally:
            self._done(c)

    def full_uri(self, key: str) -> str:
        return self.inner.full_uri(key)
