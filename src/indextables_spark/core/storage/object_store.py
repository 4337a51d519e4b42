"""What the S3 and Azure backends share: one object-store Storage whose operations are written once
(retries, error messages naming the URI, the lost answer of a conditional write, listing pages,
batched deletes, uploads in parts, downloads in ranged chunks, the lazily built client that is
dropped on pickling and rebuilt on the executor), over a few primitives each backend implements
with its SDK."""

from __future__ import annotations

import builtins
import datetime as dt
import os
import tempfile
import threading
from abc import abstractmethod
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, ClassVar, Iterable, Iterator, TypeVar

from indextables_spark.config.options import Options
from indextables_spark.core.storage.base import FileInfo, Storage, check_key
from indextables_spark.core.storage.fetch_stats import record_fetch
from indextables_spark.config.redaction import Redactor
from indextables_spark.core.storage.retry import RetryPolicy, describe_exception, error_code, http_status
from indextables_spark.errors import FileNotFoundInStorageError, IndexTablesError, InvalidOptionError, StorageError

T = TypeVar("T")

# One listed or stat'ed object: (full object name, size, last modification or None).
ObjectEntry = tuple[str, int, "dt.datetime | None"]


class TransientBatchError(StorageError):
    """Some objects of a batch delete failed with a retryable error (retried by RetryPolicy)."""

    def __init__(self, message: str, status: int = 503):
        super().__init__(message)
        self.status_code = status


class ObjectStorage(Storage):
    """A Storage on an object store rooted at `root` (a prefix without slashes) in a bucket or
    container. Subclasses set `uri`, `root`, `_redact` and call `_configure` first in __init__."""

    service: ClassVar[str]  # names the service in messages: "S3", "Azure"
    delete_batch: ClassVar[int]  # most objects one batch delete request takes
    download_chunk: ClassVar[int] = 16 << 20
    root: str
    _redact: Redactor
    single_put_max: int  # objects up to this size go up in one request

    def _configure(self, opts: Options, retry_policy: RetryPolicy | None, prefix: str, max_page: int) -> None:
        """The settings both backends read (`prefix`: "s3" or "azure"), and the client slot."""
        self._options = opts
        self._retry = retry_policy or RetryPolicy.from_options(opts)
        self.upload_concurrency = max(1, opts.get_int(f"{prefix}.uploadConcurrency"))
        self.max_connections = max(1, opts.get_int(f"{prefix}.maxConnections"))
        self.list_page_size = opts.get_int(f"{prefix}.listPageSize")
        if not 1 <= self.list_page_size <= max_page:
            raise InvalidOptionError(
                f"option 'spark.indextables.{prefix}.listPageSize' must be between 1 and {max_page}, "
                f"got {self.list_page_size}"
            )
        self.connect_timeout_s = opts.get_int("storage.connectTimeoutMs") / 1000.0
        self.read_timeout_s = opts.get_int("storage.readTimeoutMs") / 1000.0
        self._client: Any = None
        self._lock = threading.Lock()

    # -- the SDK primitives, one set per backend -----------------------------------------------

    @abstractmethod
    def _new_client(self) -> Any:
        """The SDK client this storage uses (built once, on first use, in each process)."""

    @abstractmethod
    def _get(self, name: str, start: int | None = None, end: int | None = None) -> bytes:
        """The object's bytes, or bytes [start, end) of it (b"" when start is past its end)."""

    @abstractmethod
    def _create(self, name: str, data: bytes) -> bool:
        """Write the object unless one exists; False when one does."""

    @abstractmethod
    def _head(self, name: str) -> ObjectEntry | None:
        """The object's entry, or None when it is missing."""

    @abstractmethod
    def _list_page(self, prefix: str, token: str | None) -> tuple[builtins.list[ObjectEntry], str | None]:
        """One page of the objects under prefix (directory entries left out), and the next page's token."""

    @abstractmethod
    def _delete_some(self, batch: builtins.list[tuple[str, str]]) -> tuple[builtins.list[tuple[str, str]], str, int]:
        """Delete a batch of (key, name); the pairs whose deletion failed with a retryable error,
        what the service answered for them and its HTTP status. Permanent failures raise."""

    @abstractmethod
    def _upload_parts(self, key: str, name: str, size: int, chunk: Callable[[int, int], bytes]) -> None:
        """Upload a big object in parts read by chunk(offset, length); it appears whole or not at all."""

    def _container_gone(self, e: Exception) -> str | None:
        """When `e` says the bucket or container is missing: what to say about it."""
        return None

    # -- plumbing ------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()  # the client and its lock stay in this process
        state["_client"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _connection(self) -> Any:
        """The client, built on first use (thread-safe)."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._new_client()
        return self._client

    def _object_key(self, key: str) -> str:
        k = check_key(key)
        return f"{self.root}/{k}" if self.root else k

    def _root_prefix(self) -> str:
        return self.root + "/" if self.root else ""

    def _run(self, op: str, key: str, fn: Callable[[int], T]) -> T:
        """Run fn with retries; turn its final failure into an IndexTablesError naming the URI."""
        try:
            return self._retry.run(fn, f"{self.service} {op} {self.full_uri(key)}")
        except IndexTablesError:
            raise
        except Exception as e:
            # not chained: an SDK's error text carries the request URL (an Azure SAS signature in
            # clear); its first line, redacted, is in ours
            raise self._translate(e, op, key) from None

    def _translate(self, e: Exception, op: str, key: str) -> IndexTablesError:
        where = self.full_uri(key)
        gone = self._container_gone(e)
        if gone is not None:
            cls = FileNotFoundInStorageError if op in ("read", "read_range") else StorageError
            return cls(f"cannot {op} {where}: {gone}")
        if http_status(e) == 404 or error_code(e) in ("NoSuchKey", "NotFound", "404"):
            return FileNotFoundInStorageError(f"file not found: {where}")
        attempts = getattr(e, "indextables_attempts", 1)
        after = f" after {attempts} attempts" if attempts > 1 else ""
        text = str(getattr(e, "message", None) or e)  # azure-core keeps the service's message apart
        detail = self._redact(text.splitlines()[0] if text else type(e).__name__)
        return StorageError(f"cannot {op} {where}: {describe_exception(e)}{after}: {detail}")

    def _entry_info(self, key: str, entry: ObjectEntry) -> FileInfo:
        _, size, modified = entry
        return FileInfo(key, size, int(modified.timestamp() * 1000) if modified else 0)

    # -- Storage -------------------------------------------------------------------------------

    def read(self, key: str) -> bytes:
        name = self._object_key(key)
        data = self._run("read", key, lambda attempt: self._get(name))
        record_fetch(len(data))  # DESCRIBE INDEXTABLES STORAGE STATS
        return data

    def read_range(self, key: str, start: int, end: int) -> bytes:
        name = self._object_key(key)
        if start < 0 or end < 0:
            raise StorageError(f"invalid byte range [{start}, {end}) for {self.full_uri(key)}")
        if end <= start:
            if self.stat(key) is None:
                raise FileNotFoundInStorageError(f"file not found: {self.full_uri(key)}")
            return b""
        data = self._run("read_range", key, lambda attempt: self._get(name, start, end))
        record_fetch(len(data))
        return data

    def put_if_absent(self, key: str, data: bytes) -> bool:
        name = self._object_key(key)
        data = bytes(data)

        def op(attempt: int) -> bool:
            if self._create(name, data):
                return True
            # An earlier attempt failed in a way that may have reached the service: the object
            # found now may be our own write whose answer was lost.
            return self.holds(key, data) if attempt > 1 else False

        return self._run("conditional write", key, op)

    def stat(self, key: str) -> FileInfo | None:
        name = self._object_key(key)

        def op(attempt: int) -> FileInfo | None:
            entry = self._head(name)
            return None if entry is None else self._entry_info(check_key(key), entry)

        return self._run("stat", key, op)

    def list(self, prefix: str) -> builtins.list[FileInfo]:
        rel = check_prefix(prefix)
        root = self._root_prefix()
        full = root + rel
        out: builtins.list[FileInfo] = []
        token: str | None = None
        while True:
            page_token = token
            entries, token = self._run("list", rel or ".", lambda attempt: self._list_page(full, page_token))
            for entry in entries:
                name = entry[0]
                if name.startswith(root) and not name.endswith("/"):  # not directory markers of other tools
                    out.append(self._entry_info(name[len(root) :], entry))
            if not token:
                break
        out.sort(key=lambda f: f.key)
        return out

    def delete(self, keys: Iterable[str]) -> None:
        wanted = [(k, self._object_key(k)) for k in keys]  # validate every key before deleting any
        for i in range(0, len(wanted), self.delete_batch):
            self._delete_batch(wanted[i : i + self.delete_batch])

    def _delete_batch(self, batch: builtins.list[tuple[str, str]]) -> None:
        pending = list(batch)

        def op(attempt: int) -> None:
            nonlocal pending
            retry, answer, status = self._delete_some(pending)
            if retry:
                pending = retry
                raise TransientBatchError(
                    f"cannot delete {self.full_uri(retry[0][0])} (and {len(retry) - 1} more): {answer} for each of them",
                    status,
                )

        self._run("delete", batch[0][0], op)

    # -- large files ---------------------------------------------------------------------------

    def upload_file(self, key: str, local_path: str) -> None:
        name = self._object_key(key)
        try:
            size = os.path.getsize(local_path)
        except OSError as e:
            raise StorageError(f"cannot upload {local_path} to {self.full_uri(key)}: {e}") from e
        if size <= self.single_put_max:
            with open(local_path, "rb") as f:
                self.put(key, f.read())
            return
        with file_chunks(local_path, self.full_uri(key)) as chunk:
            self._upload_parts(key, name, size, chunk)

    def download_file(self, key: str, local_path: str) -> None:
        info = self.stat(key)
        if info is None:
            raise FileNotFoundInStorageError(f"file not found: {self.full_uri(key)}")
        download_in_chunks(self, key, info.size, local_path, self.download_chunk)


# -- transfer helpers ------------------------------------------------------------------------------


def check_prefix(prefix: str) -> str:
    """A listing prefix relative to the root ('' = everything); refuses prefixes that escape it."""
    if not prefix:
        return ""
    norm = check_key(prefix)  # raises PathEscapeError for absolute or escaping prefixes
    return norm + "/" if prefix.endswith("/") else norm


def download_in_chunks(storage: Storage, key: str, size: int, local_path: str, chunk: int) -> None:
    """Write an object to local_path through ranged reads (each retried on its own), atomically."""
    directory = os.path.dirname(os.path.abspath(local_path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".download-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            if size <= chunk:
                f.write(storage.read(key))
            else:
                for off in range(0, size, chunk):
                    data = storage.read_range(key, off, min(size, off + chunk))
                    if len(data) != min(chunk, size - off):
                        raise StorageError(f"cannot download {storage.full_uri(key)}: it changed during the download")
                    f.write(data)
        os.replace(tmp, local_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def upload_in_parts(
    size: int, part_size: int, concurrency: int, chunk: Callable[[int, int], bytes], send: Callable[[int, bytes], T]
) -> builtins.list[T]:
    """send(i, chunk(offset, length)) for each part_size piece of `size` bytes (part i starts at
    i * part_size), `concurrency` pieces at a time, each send retrying on its own; the results in
    part order. S3 multipart parts and Azure staged blocks both go through here."""
    n = -(-size // part_size)

    def one(i: int) -> T:
        offset = i * part_size
        return send(i, chunk(offset, min(part_size, size - offset)))

    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, n))) as pool:
        return list(pool.map(one, range(n)))


@contextmanager
def file_chunks(local_path: str, target: str) -> Iterator[Callable[[int, int], bytes]]:
    """chunk(offset, length) reading a local file being uploaded to `target` (positional reads: safe
    from several threads); a short read means the file changed during the upload."""
    fd = os.open(local_path, os.O_RDONLY)
    try:

        def chunk(offset: int, length: int) -> bytes:
            data = os.pread(fd, length, offset)
            if len(data) != length:
                raise StorageError(f"cannot upload {local_path} to {target}: file changed while uploading")
            return data

        yield chunk
    finally:
        os.close(fd)
