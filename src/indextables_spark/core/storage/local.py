"""Local filesystem storage (plain paths and file:// URIs)."""

from __future__ import annotations

import builtins
import errno
import os
import shutil
import stat as stat_module
import tempfile
import uuid
from typing import Iterable

from indextables_spark.core.storage.base import FileInfo, Storage, check_key
from indextables_spark.errors import FileNotFoundInStorageError, PathEscapeError, StorageError


class LocalStorage(Storage):
    def __init__(self, root: str, uri: str | None = None):
        self.root = os.path.abspath(root)
        self.uri = uri or self.root

    def _path(self, key: str) -> str:
        return os.path.join(self.root, check_key(key))

    def local_path(self, key: str) -> str:
        return self._path(key)

    def read(self, key: str) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise FileNotFoundInStorageError(f"file not found: {self.full_uri(key)}") from None

    def read_range(self, key: str, start: int, end: int) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                f.seek(start)
                return f.read(max(0, end - start))
        except FileNotFoundError:
            raise FileNotFoundInStorageError(f"file not found: {self.full_uri(key)}") from None

    def _write_temp(self, path: str, data: bytes) -> str:
        d = os.path.dirname(path)
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            os.unlink(tmp)
            raise
        return tmp

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        tmp = self._write_temp(path, data)
        os.replace(tmp, path)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        # Write a complete temp file, then link it into place: link() fails if the target
        # exists, so the object appears atomically and at most one writer wins.
        path = self._path(key)
        tmp = self._write_temp(path, data)
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        except OSError as e:
            if e.errno in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):  # no hard links here
                try:
                    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    return False
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                return True
            raise StorageError(f"cannot write {self.full_uri(key)}: {e}") from e
        finally:
            os.unlink(tmp)

    def upload_file(self, key: str, local_path: str) -> None:
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = os.path.join(os.path.dirname(path), f".tmp-{uuid.uuid4().hex}")
        try:
            try:
                os.link(local_path, tmp)
            except OSError:
                shutil.copyfile(local_path, tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def download_file(self, key: str, local_path: str) -> None:
        src = self._path(key)
        if not os.path.isfile(src):
            raise FileNotFoundInStorageError(f"file not found: {self.full_uri(key)}")
        os.makedirs(os.path.dirname(os.path.abspath(local_path)), exist_ok=True)
        shutil.copyfile(src, local_path)

    def list(self, prefix: str) -> list[FileInfo]:
        if prefix.startswith("/") or "\\" in prefix or ".." in prefix.split("/"):
            raise PathEscapeError(f"listing prefix {prefix!r} is not a relative path inside the table")
        # Walk only the deepest directory that contains the prefix.
        base_dir = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        top = os.path.join(self.root, base_dir) if base_dir else self.root
        out: list[FileInfo] = []
        if not os.path.isdir(top):
            return out
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, self.root)
            rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
            for name in filenames:
                if name.startswith(".tmp-"):
                    continue
                key = rel_dir + name
                if key.startswith(prefix):
                    try:
                        st = os.stat(os.path.join(dirpath, name))
                    except FileNotFoundError:
                        continue
                    out.append(FileInfo(key, st.st_size, int(st.st_mtime * 1000)))
        out.sort(key=lambda f: f.key)
        return out

    def list_temporaries(self) -> builtins.list[FileInfo]:
        """`.tmp-*` files under the root: a process killed inside put/put_if_absent/upload_file
        leaves its temp file behind (it is never visible to `list`)."""
        out: list[FileInfo] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, self.root)
            rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
            for name in filenames:
                if name.startswith(".tmp-"):
                    try:
                        st = os.stat(os.path.join(dirpath, name))
                    except FileNotFoundError:
                        continue
                    out.append(FileInfo(rel_dir + name, st.st_size, int(st.st_mtime * 1000)))
        out.sort(key=lambda f: f.key)
        return out

    def delete(self, keys: Iterable[str]) -> None:
        paths = [self._path(k) for k in keys]  # refuse the whole batch if any key escapes
        for path in paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def stat(self, key: str) -> FileInfo | None:
        try:
            st = os.stat(self._path(key))
        except FileNotFoundError:
            return None
        if not stat_module.S_ISREG(st.st_mode):  # directories are not objects
            return None
        return FileInfo(check_key(key), st.st_size, int(st.st_mtime * 1000))
