"""Amazon S3 (and S3-compatible) storage through boto3.

Table paths: `s3://bucket/prefix` (`s3a://` and `s3n://` are accepted as synonyms).

Options (without the `spark.indextables.` prefix, case-insensitive):

| option | meaning |
| --- | --- |
| `aws.accessKey`, `aws.secretKey`, `aws.sessionToken` | static credentials; otherwise boto3's default chain (env, profile, instance role, ...) |
| `aws.credentialsProvider`, `aws.profile`, `aws.roleArn`, ... | provider callables, profiles, assumed roles: see credentials.py |
| `aws.region` | region (default: boto3's, else `us-east-1` when an endpoint is set) |
| `s3.endpoint` | endpoint URL of an S3-compatible service, e.g. `http://127.0.0.1:9000` |
| `s3.pathStyleAccess` | `true` to address buckets as `endpoint/bucket/key` |
| `s3.multipartThreshold` | files at least this big are uploaded in parts (default `64M`) |
| `s3.multipartPartSize` | part size (default `16M`, at least `5M`) |
| `s3.uploadConcurrency` | parts uploaded in parallel (default 4) |
| `s3.maxConnections` | HTTP connection pool size (default 32) |
| `s3.listPageSize` | keys per LIST request (default 1000, the S3 maximum) |
| `storage.retry.maxAttempts`, `storage.retry.baseDelayMs`, `storage.retry.maxDelayMs` | see retry.py |
| `storage.connectTimeoutMs`, `storage.readTimeoutMs` | socket timeouts (10 s, 60 s) |

botocore's own retries are off: retry.py decides, the same way as for Azure.
"""

from __future__ import annotations

import builtins
import hashlib
import logging
import os
import threading
from contextlib import closing
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar
from urllib.parse import urlsplit

from indextables_spark.errors import FileNotFoundInStorageError, IndexTablesError, InvalidOptionError, StorageError
from indextables_spark.util.lru import LruCache
from indextables_spark.config.options import Options
from indextables_spark.core.storage.base import FileInfo, Storage, check_key
from indextables_spark.core.storage.credentials import AwsAuth
from indextables_spark.core.storage.retry import (
    RetryPolicy,
    Redactor,
    check_prefix,
    describe_exception,
    download_in_chunks,
    error_code,
    file_chunks,
    http_status,
    protect_secrets,
    redact_uri,
    upload_in_parts,
)

log = logging.getLogger("indextables_spark.core.storage.s3")

MIN_PART_SIZE = 5 << 20
DELETE_BATCH = 1000
DOWNLOAD_CHUNK = 16 << 20

EventHandler = tuple[str, Callable[..., Any]]
T = TypeVar("T")


class _TransientDeleteError(StorageError):
    """Some keys of a batch delete failed with a retryable per-key error (retried by RetryPolicy)."""

    def __init__(self, message: str, status: int = 503):
        super().__init__(message)
        self.status_code = status


class S3Storage(Storage):
    """Storage rooted at `s3://bucket/prefix`.

    S3Storage(uri, options=None, *, event_handlers=(), retry_policy=None)

    `event_handlers`: extra botocore event handlers as (event name, handler) pairs, registered on
    the client (e.g. `("before-send.s3", handler)` to inject faults in tests). `retry_policy`
    overrides the one built from the options.
    """

    def __init__(
        self,
        uri: str,
        options: Mapping[str, Any] | None = None,
        *,
        event_handlers: Sequence[EventHandler] = (),
        retry_policy: RetryPolicy | None = None,
    ):
        opts = options if isinstance(options, Options) else Options.of(options)
        self._options = opts
        self._event_handlers = tuple(event_handlers)
        self.uri, self.bucket, self.root = _parse_s3_uri(uri)
        self._retry = retry_policy or RetryPolicy.from_options(opts)
        endpoint = (opts.get_str("s3.endpoint") or "").strip() or None
        if endpoint and "://" not in endpoint:
            endpoint = "https://" + endpoint
        if endpoint:
            try:
                parts = urlsplit(endpoint)
                parts.port  # noqa: B018 - raises ValueError for a malformed port
            except ValueError as e:
                raise InvalidOptionError(
                    f"option 'spark.indextables.s3.endpoint' is not a valid URL ({e}): {redact_uri(endpoint)!r}"
                ) from None
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise InvalidOptionError(
                    f"option 'spark.indextables.s3.endpoint' must be an http(s) URL, got {redact_uri(endpoint)!r}"
                )
        self.endpoint = endpoint
        self.region = opts.get_str("aws.region") or None
        self._auth = AwsAuth.from_options(opts, self.uri, endpoint)
        self._redact = Redactor(self._auth.secrets())
        protect_secrets(self._auth.secrets())
        self.path_style = opts.get_bool("s3.pathStyleAccess")
        self.multipart_threshold = opts.get_size("s3.multipartThreshold")
        self.part_size = opts.get_size("s3.multipartPartSize")
        if self.part_size < MIN_PART_SIZE:
            raise InvalidOptionError(
                f"option 'spark.indextables.s3.multipartPartSize' must be at least 5M (S3's minimum part size), "
                f"got {self.part_size} bytes"
            )
        self.upload_concurrency = max(1, opts.get_int("s3.uploadConcurrency"))
        self.max_connections = max(1, opts.get_int("s3.maxConnections"))
        self.list_page_size = opts.get_int("s3.listPageSize")
        if not 1 <= self.list_page_size <= 1000:
            raise InvalidOptionError(
                f"option 'spark.indextables.s3.listPageSize' must be between 1 and 1000, got {self.list_page_size}"
            )
        self.connect_timeout_s = opts.get_int("storage.connectTimeoutMs") / 1000.0
        self.read_timeout_s = opts.get_int("storage.readTimeoutMs") / 1000.0
        self._client: Any = None
        self._lock = threading.Lock()

    # -- plumbing ------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"S3Storage({self.uri!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        """The boto3 S3 client (created on first use; thread-safe).

        Clients are shared per process between storages with the same settings (see
        `_shared_client`): building one costs 0.1–0.5 s, and every IndexTable, every Spark task and
        every split read opens a storage. Storages with event handlers get a client of their own."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self.make_client() if self._event_handlers else _shared_client(self)
        return self._client

    def client_settings(self) -> tuple[Any, ...]:
        """Everything a client is built from (the cache key of `_shared_client`)."""
        return (
            self._auth.cache_key(),
            self.region,
            self.endpoint,
            self.path_style,
            self.max_connections,
            self.connect_timeout_s,
            self.read_timeout_s,
        )

    def make_client(self) -> Any:
        """A new boto3 S3 client for this storage's settings (uncached; see `client`)."""
        from botocore.config import Config

        session = self._auth.boto3_session(self._options, self.region)
        region = self.region or session.region_name or ("us-east-1" if self.endpoint else None)
        config = Config(
            region_name=region,
            retries={"total_max_attempts": 1, "mode": "standard"},  # retries are ours (retry.py)
            s3={"addressing_style": "path" if self.path_style else "auto"},
            max_pool_connections=self.max_connections,
            connect_timeout=self.connect_timeout_s,
            read_timeout=self.read_timeout_s,
            # Checksums only where S3 requires them: S3-compatible services differ in their
            # support of the newer default (CRC on every request), and multipart uploads stay
            # the classic ETag-based protocol.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        client = session.client("s3", endpoint_url=self.endpoint, config=config)
        for event, handler in self._event_handlers:
            client.meta.events.register(event, handler)
        log.debug(
            "S3 client for %s (endpoint %s, region %s, credentials %s)",
            self.uri,
            redact_uri(self.endpoint) if self.endpoint else "AWS",
            region,
            self._auth.source + (" + assumed role" if self._auth.role_arn else ""),
        )
        return client

    def _object_key(self, key: str) -> str:
        k = check_key(key)
        return f"{self.root}/{k}" if self.root else k

    def _root_prefix(self) -> str:
        return self.root + "/" if self.root else ""

    def _uri_of(self, key: str) -> str:
        return self.full_uri(key)

    def _run(self, op: str, key: str, fn: Callable[[int], T], *, missing_ok: bool = False) -> T:
        """Run fn with retries; turn its final failure into an IndexTablesError naming the URI."""
        try:
            return self._retry.run(fn, f"S3 {op} {self._uri_of(key)}")
        except IndexTablesError:
            raise
        except Exception as e:
            raise self._translate(e, op, key) from e

    def _translate(self, e: Exception, op: str, key: str) -> IndexTablesError:
        where = self._uri_of(key)
        status = http_status(e)
        code = error_code(e)
        attempts = getattr(e, "indextables_attempts", 1)
        after = f" after {attempts} attempts" if attempts > 1 else ""
        detail = self._redact(str(e).splitlines()[0] if str(e) else type(e).__name__)
        if code == "NoSuchBucket":
            return (FileNotFoundInStorageError if op in ("read", "read_range") else StorageError)(
                f"cannot {op} {where}: bucket {self.bucket!r} does not exist ({describe_exception(e)})"
            )
        if status == 404 or code in ("NoSuchKey", "NotFound", "404"):
            return FileNotFoundInStorageError(f"file not found: {where}")
        return StorageError(f"cannot {op} {where}: {describe_exception(e)}{after}: {detail}")

    # -- Storage -------------------------------------------------------------------------------

    def read(self, key: str) -> bytes:
        okey = self._object_key(key)

        def op(attempt: int) -> bytes:
            resp = self.client.get_object(Bucket=self.bucket, Key=okey)
            with closing(resp["Body"]) as body:
                data: bytes = body.read()
                return data

        return self._run("read", key, op)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        okey = self._object_key(key)
        if start < 0 or end < 0:
            raise StorageError(f"invalid byte range [{start}, {end}) for {self._uri_of(key)}")
        if end <= start:
            if self.stat(key) is None:
                raise FileNotFoundInStorageError(f"file not found: {self._uri_of(key)}")
            return b""

        def op(attempt: int) -> bytes:
            from botocore.exceptions import ClientError

            try:
                resp = self.client.get_object(Bucket=self.bucket, Key=okey, Range=f"bytes={start}-{end - 1}")
            except ClientError as e:
                if http_status(e) == 416:  # start at or past the end: nothing to read (as a file)
                    return b""
                raise
            with closing(resp["Body"]) as body:
                data: bytes = body.read()
                return data

        return self._run("read_range", key, op)

    def put(self, key: str, data: bytes) -> None:
        okey = self._object_key(key)
        data = bytes(data)

        def op(attempt: int) -> None:
            self.client.put_object(Bucket=self.bucket, Key=okey, Body=data)

        self._run("write", key, op)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        okey = self._object_key(key)
        data = bytes(data)

        def op(attempt: int) -> bool:
            from botocore.exceptions import ClientError

            try:
                self.client.put_object(Bucket=self.bucket, Key=okey, Body=data, IfNoneMatch="*")
                return True
            except ClientError as e:
                status, code = http_status(e), error_code(e)
                if status == 412 or (status == 409 and code in ("ConditionalRequestConflict", "OperationAborted")):
                    if attempt > 1:
                        # An earlier attempt failed in a way that may have reached S3: the object
                        # found now may be our own write whose answer was lost.
                        return self.holds(key, data)
                    return False
                raise

        return self._run("conditional write", key, op)

    def list(self, prefix: str) -> list[FileInfo]:
        rel = check_prefix(prefix)
        root = self._root_prefix()
        full = root + rel
        out: list[FileInfo] = []
        token: str | None = None
        while True:
            page_token = token

            def op(attempt: int) -> dict[str, Any]:
                kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full, "MaxKeys": self.list_page_size}
                if page_token:
                    kwargs["ContinuationToken"] = page_token
                resp: dict[str, Any] = self.client.list_objects_v2(**kwargs)
                return resp

            resp = self._run("list", rel or ".", op)
            for obj in resp.get("Contents", ()):
                name = obj["Key"]
                if not name.startswith(root) or name.endswith("/"):
                    continue  # directory markers made by other tools
                modified = obj.get("LastModified")
                out.append(
                    FileInfo(
                        name[len(root) :], int(obj.get("Size", 0)), int(modified.timestamp() * 1000) if modified else 0
                    )
                )
            if not resp.get("IsTruncated"):
                break
            token = resp.get("NextContinuationToken")
            if not token:
                raise StorageError(
                    f"cannot list {self._uri_of(rel or '.')}: truncated listing without a continuation token"
                )
        out.sort(key=lambda f: f.key)
        return out

    def delete(self, keys: Iterable[str]) -> None:
        wanted = [(k, self._object_key(k)) for k in keys]  # validate every key before deleting any
        for i in range(0, len(wanted), DELETE_BATCH):
            self._delete_batch(wanted[i : i + DELETE_BATCH])

    def _delete_batch(self, batch: builtins.list[tuple[str, str]]) -> None:
        pending = list(batch)
        by_object = {okey: key for key, okey in batch}

        def op(attempt: int) -> None:
            nonlocal pending
            resp = self.client.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": okey} for _, okey in pending], "Quiet": True},
            )
            retry: list[tuple[str, str]] = []
            for err in resp.get("Errors", ()):
                code = err.get("Code", "")
                okey = err.get("Key", "")
                if code == "NoSuchKey":
                    continue
                key = by_object.get(okey, okey)
                if code in ("SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout"):
                    retry.append((key, okey))
                    continue
                raise StorageError(f"cannot delete {self._uri_of(key)}: {code}: {self._redact(err.get('Message', ''))}")
            if retry:
                pending = retry
                raise _TransientDeleteError(
                    f"cannot delete {self._uri_of(retry[0][0])} (and {len(retry) - 1} more): S3 answered a "
                    f"retryable error for each of them"
                )

        self._run("delete", batch[0][0], op)

    def stat(self, key: str) -> FileInfo | None:
        okey = self._object_key(key)

        def op(attempt: int) -> FileInfo | None:
            from botocore.exceptions import ClientError

            try:
                resp = self.client.head_object(Bucket=self.bucket, Key=okey)
            except ClientError as e:
                if http_status(e) == 404:
                    return None
                raise
            modified = resp.get("LastModified")
            return FileInfo(
                check_key(key), int(resp.get("ContentLength", 0)), int(modified.timestamp() * 1000) if modified else 0
            )

        return self._run("stat", key, op)

    # -- large files ---------------------------------------------------------------------------

    def upload_file(self, key: str, local_path: str) -> None:
        okey = self._object_key(key)
        try:
            size = os.path.getsize(local_path)
        except OSError as e:
            raise StorageError(f"cannot upload {local_path} to {self._uri_of(key)}: {e}") from e
        if size < self.multipart_threshold:
            with open(local_path, "rb") as f:
                self.put(key, f.read())
            return
        self._multipart_upload(key, okey, local_path, size)

    def _multipart_upload(self, key: str, okey: str, local_path: str, size: int) -> None:
        part_size = max(self.part_size, -(-size // 10_000))  # S3 allows at most 10,000 parts
        upload_id = self._run(
            "start multipart upload of",
            key,
            lambda attempt: self.client.create_multipart_upload(Bucket=self.bucket, Key=okey)["UploadId"],
        )
        try:

            def send(i: int, body: bytes) -> dict[str, Any]:
                resp = self._run(
                    f"upload part {i + 1} of",
                    key,
                    lambda attempt: self.client.upload_part(
                        Bucket=self.bucket, Key=okey, UploadId=upload_id, PartNumber=i + 1, Body=body
                    ),
                )
                return {"PartNumber": i + 1, "ETag": resp["ETag"]}

            with file_chunks(local_path, self._uri_of(key)) as chunk:
                parts = upload_in_parts(size, part_size, self.upload_concurrency, chunk, send)

            def complete(attempt: int) -> None:
                from botocore.exceptions import ClientError

                try:
                    self.client.complete_multipart_upload(
                        Bucket=self.bucket, Key=okey, UploadId=upload_id, MultipartUpload={"Parts": parts}
                    )
                except ClientError as e:
                    # The answer of an earlier attempt was lost but the upload was completed.
                    if attempt > 1 and error_code(e) == "NoSuchUpload" and self._is_completed(okey, parts, size):
                        return
                    raise

            self._run("complete multipart upload of", key, complete)
        except BaseException as e:
            self._abort_upload(key, okey, upload_id, e)
            raise

    def _is_completed(self, okey: str, parts: builtins.list[dict[str, Any]], size: int) -> bool:
        resp = self.client.head_object(Bucket=self.bucket, Key=okey)
        if int(resp.get("ContentLength", -1)) != size:
            return False
        try:
            digest = hashlib.md5(b"".join(bytes.fromhex(p["ETag"].strip('"')) for p in parts)).hexdigest()
        except ValueError:  # part ETags are not MD5s (e.g. SSE-KMS): the size must do
            return True
        etag: str = resp.get("ETag", "").strip('"')
        return etag == f"{digest}-{len(parts)}"

    def _abort_upload(self, key: str, okey: str, upload_id: str, cause: BaseException) -> None:
        try:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=okey, UploadId=upload_id)
        except Exception as e:  # the original failure is what the caller needs; keep this one in the log
            log.warning(
                "could not abort the failed multipart upload of %s (%s); the upload failed with %s",
                self._uri_of(key),
                describe_exception(e),
                describe_exception(cause),
            )

    def download_file(self, key: str, local_path: str) -> None:
        info = self.stat(key)
        if info is None:
            raise FileNotFoundInStorageError(f"file not found: {self._uri_of(key)}")
        download_in_chunks(self, key, info.size, local_path, DOWNLOAD_CHUNK)


_clients: LruCache[Any] = LruCache(16, per_process=True)


def _shared_client(storage: S3Storage) -> Any:
    """A client for the storage's settings, shared within this process (boto3 clients are
    thread-safe). Keyed by the settings (credentials included: a different key gets a different
    client); at most 16 are kept (least recently used dropped). A forked child never reuses its
    parent's clients (their connection pools belong to the parent)."""
    return _clients.get_or_build(storage.client_settings(), storage.make_client)


def _parse_s3_uri(uri: str) -> tuple[str, str, str]:
    """(uri without credentials, bucket, root prefix without slashes)."""
    parts = urlsplit(uri)
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise InvalidOptionError(
            f"S3 table path {redact_uri(uri)!r} must be s3://bucket/prefix: credentials or query strings in the "
            "path are not accepted (use the aws.accessKey / aws.secretKey options)"
        )
    bucket = parts.netloc
    if not bucket:
        raise InvalidOptionError(f"S3 table path {uri!r} names no bucket (expected s3://bucket/prefix)")
    root = parts.path.strip("/")
    if root and any(seg in ("", ".", "..") for seg in root.split("/")):
        raise InvalidOptionError(f"S3 table path {uri!r} has an empty, '.' or '..' segment")
    return uri.rstrip("/"), bucket, root


__all__ = ["S3Storage"]
