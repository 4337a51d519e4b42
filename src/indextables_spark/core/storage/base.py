"""One small storage interface; local, S3 and Azure implement it.

A Storage is rooted at a table location. Every key is a '/'-separated path relative to that
root (e.g. `_transaction_log/00000000000000000001.json`); implementations refuse keys that
escape the root.
"""

from __future__ import annotations

import builtins
import logging
import os
import posixpath
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from indextables_spark.errors import FileNotFoundInStorageError, PathEscapeError

if TYPE_CHECKING:
    from indextables_spark.config.options import Options

# The URI schemes of the cloud backends (open_storage picks one by them).
S3_SCHEMES = ("s3", "s3a", "s3n")
AZURE_SCHEMES = ("abfss", "abfs", "wasbs", "wasb", "az", "azure")


@dataclass(frozen=True)
class FileInfo:
    key: str  # relative to the storage root
    size: int
    modified_ms: int  # last modification, epoch milliseconds


def check_key(key: str) -> str:
    """Normalise a relative key and refuse anything that leaves the root."""
    if not key or key.startswith("/") or "\\" in key or "://" in key or "\x00" in key:
        raise PathEscapeError(f"path {key!r} is not a relative path inside the table")
    norm = posixpath.normpath(key)
    if norm == ".." or norm.startswith("../") or norm == ".":
        raise PathEscapeError(f"path {key!r} escapes the table root")
    return norm


class Storage(ABC):
    """Object-store operations needed by the log and the splits."""

    uri: str  # the root, as given by the user (credentials never included)
    # The options it was opened with (open_storage sets them): a companion split reaches the
    # source table's files with the same credentials.
    options: Options | None = None

    @abstractmethod
    def read(self, key: str) -> bytes:
        """Whole object. Raises FileNotFoundInStorageError naming the URI when missing."""

    @abstractmethod
    def read_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of an object."""

    @abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Create or replace an object (atomically: readers see old or new, never partial)."""

    @abstractmethod
    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Create an object only if no object exists at key. False if it already existed."""

    @abstractmethod
    def list(self, prefix: str) -> list[FileInfo]:
        """Every object whose key starts with prefix (recursive), in key order."""

    @abstractmethod
    def delete(self, keys: Iterable[str]) -> None:
        """Delete objects; missing ones are ignored."""

    @abstractmethod
    def stat(self, key: str) -> FileInfo | None:
        """Size and modification time, or None when missing."""

    def exists(self, key: str) -> bool:
        return self.stat(key) is not None

    def holds(self, key: str, data: bytes) -> bool:
        """Does the object at key hold exactly these bytes? Decides a conditional write whose
        answer was lost: the object found on retry may be our own write."""
        try:
            current = self.read(key)
        except FileNotFoundInStorageError:
            return False
        mine = current == data
        logging.getLogger(__name__).debug(
            "conditional write of %s after a lost answer: the existing object is %s",
            self.full_uri(key),
            "ours" if mine else "another writer's",
        )
        return mine

    def upload_file(self, key: str, local_path: str) -> None:
        """Upload a local file (large splits): default reads it whole."""
        with open(local_path, "rb") as f:
            self.put(key, f.read())

    def download_file(self, key: str, local_path: str) -> None:
        data = self.read(key)  # raises before any local file is created when the key is missing
        os.makedirs(os.path.dirname(os.path.abspath(local_path)), exist_ok=True)
        with open(local_path, "wb") as f:
            f.write(data)

    def list_temporaries(self) -> builtins.list[FileInfo]:
        """Leftovers of writes killed half way that `list` never shows (local `.tmp-*` files);
        object stores publish an object atomically, so they have none. PURGE deletes old ones."""
        return []

    def full_uri(self, key: str) -> str:
        return self.uri.rstrip("/") + "/" + key

    def local_path(self, key: str) -> str | None:
        """A local filesystem path for key when the storage is local (lets readers avoid copies)."""
        return None
