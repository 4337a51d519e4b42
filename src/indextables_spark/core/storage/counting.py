"""A storage that counts what it reads: bytes and requests per operation (benches, tests, and users
who want to see what a query fetched). Wraps any Storage; everything else is passed through."""

from __future__ import annotations

import builtins
import os
import threading
from collections import Counter
from typing import Iterable

from indextables_spark.core.storage.base import FileInfo, Storage


class CountingStorage(Storage):
    def __init__(self, inner: Storage):
        self.inner = inner
        self.uri = inner.uri
        self._lock = threading.Lock()
        self.bytes_read: Counter[str] = Counter()  # operation -> bytes (read, read_range, download_file)
        self.requests: Counter[str] = Counter()  # operation -> calls

    def _count(self, op: str, nbytes: int = 0) -> None:
        with self._lock:
            self.requests[op] += 1
            self.bytes_read[op] += nbytes

    @property
    def total_bytes_read(self) -> int:
        with self._lock:
            return sum(self.bytes_read.values())

    def reset(self) -> None:
        with self._lock:
            self.bytes_read.clear()
            self.requests.clear()

    def read(self, key: str) -> bytes:
        data = self.inner.read(key)
        self._count("read", len(data))
        return data

    def read_range(self, key: str, start: int, end: int) -> bytes:
        data = self.inner.read_range(key, start, end)
        self._count("read_range", len(data))
        return data

    def download_file(self, key: str, local_path: str) -> None:
        self.inner.download_file(key, local_path)
        self._count("download_file", os.path.getsize(local_path))

    def put(self, key: str, data: bytes) -> None:
        self._count("put")
        self.inner.put(key, data)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        self._count("put_if_absent")
        return self.inner.put_if_absent(key, data)

    def upload_file(self, key: str, local_path: str) -> None:
        self._count("upload_file")
        self.inner.upload_file(key, local_path)

    def list(self, prefix: str) -> list[FileInfo]:
        self._count("list")
        return self.inner.list(prefix)

    def delete(self, keys: Iterable[str]) -> None:
        self._count("delete")
        self.inner.delete(keys)

    def stat(self, key: str) -> FileInfo | None:
        self._count("stat")
        return self.inner.stat(key)

    def list_temporaries(self) -> builtins.list[FileInfo]:
        return self.inner.list_temporaries()

    def full_uri(self, key: str) -> str:
        return self.inner.full_uri(key)

    def local_path(self, key: str) -> str | None:
        return self.inner.local_path(key)
