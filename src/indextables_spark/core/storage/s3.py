"""Amazon S3 (and S3-compatible) storage through boto3.

Table paths: `s3://bucket/prefix` (`s3a://` and `s3n://` are accepted as synonyms).

Options (without the `spark.indextables.` prefix, case-insensitive):

| option | meaning |
| --- | --- |
| `aws.accessKey`, `aws.secretKey`, `aws.sessionToken` | static credentials; otherwise boto3's default chain (env, profile, instance role, ...) |
| `aws.credentialsProvider`, `aws.profile`, `aws.roleArn`, ... | provider callables, profiles, assumed roles: see aws_auth.py and credentials.py |
| `aws.region` | region (default: boto3's, else `us-east-1` when an endpoint is set) |
| `s3.endpoint` | endpoint URL of an S3-compatible service, e.g. `http://127.0.0.1:9000` |
| `s3.pathStyleAccess` | `true` to address buckets as `endpoint/bucket/key` |
| `s3.multipartThreshold` | files at least this big are uploaded in parts (default `64M`) |
| `s3.multipartPartSize` | part size (default `16M`, at least `5M`) |
| `s3.uploadConcurrency` | parts uploaded in parallel (default 4) |
| `s3.maxConnections` | HTTP connection pool size (default 32) |
| `s3.listPageSize` | keys per LIST request (default 1000, the S3 maximum) |
| `s3.presignedReads` | `false` sends object reads through the SDK instead of as presigned GETs (s3_reads.py) |
| `storage.retry.maxAttempts`, `storage.retry.baseDelayMs`, `storage.retry.maxDelayMs` | see retry.py |
| `storage.connectTimeoutMs`, `storage.readTimeoutMs` | socket timeouts (10 s, 60 s) |

botocore's own retries are off: retry.py decides, the same way as for Azure.
"""

from __future__ import annotations

import builtins
import hashlib
import logging
from contextlib import closing
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlsplit

from indextables_spark.config.options import Options
from indextables_spark.core.storage.aws_auth import AwsAuth
from indextables_spark.core.storage.object_store import ObjectEntry, ObjectStorage, upload_in_parts
from indextables_spark.config.redaction import Redactor, remember_secrets, redact_uri
from indextables_spark.core.storage.retry import RetryPolicy, describe_exception, error_code, http_status
from indextables_spark.core.storage.s3_reads import S3Reads, range_header, s3_reads
from indextables_spark.errors import InvalidOptionError, StorageError
from indextables_spark.util.lru import LruCache

log = logging.getLogger("indextables_spark.core.storage.s3")

MIN_PART_SIZE = 5 << 20

EventHandler = tuple[str, Callable[..., Any]]


class S3Storage(ObjectStorage):
    """Storage rooted at `s3://bucket/prefix`.

    S3Storage(uri, options=None, *, event_handlers=(), retry_policy=None)

    `event_handlers`: extra botocore event handlers as (event name, handler) pairs, registered on
    the client (e.g. `("before-send.s3", handler)` to inject faults in tests). `retry_policy`
    overrides the one built from the options.
    """

    service = "S3"
    delete_batch = 1000

    def __init__(
        self,
        uri: str,
        options: Mapping[str, Any] | None = None,
        *,
        event_handlers: Sequence[EventHandler] = (),
        retry_policy: RetryPolicy | None = None,
    ):
        opts = options if isinstance(options, Options) else Options.of(options)
        self._event_handlers = tuple(event_handlers)
        self.uri, self.bucket, self.root = _parse_s3_uri(uri)
        self._configure(opts, retry_policy, "s3", 1000)
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
        remember_secrets(self._auth.secrets())
        self.path_style = opts.get_bool("s3.pathStyleAccess")
        self.multipart_threshold = opts.get_size("s3.multipartThreshold")
        self.part_size = opts.get_size("s3.multipartPartSize")
        if self.part_size < MIN_PART_SIZE:
            raise InvalidOptionError(
                f"option 'spark.indextables.s3.multipartPartSize' must be at least 5M (S3's minimum part size), "
                f"got {self.part_size} bytes"
            )
        self.single_put_max = self.multipart_threshold - 1
        # fault-injecting event handlers hook the SDK's pipeline: their reads must go through it
        self.presigned = opts.get_bool("s3.presignedReads") and not self._event_handlers

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The boto3 S3 client (created on first use; thread-safe)."""
        return self._connection()

    def _new_client(self) -> Any:
        """Clients are shared per process between storages with the same settings (see
        `_shared_client`): building one costs 0.1–0.5 s, and every IndexTable, every Spark task and
        every split read opens a storage. Storages with event handlers get a client of their own."""
        return self.make_client() if self._event_handlers else _shared_client(self)

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
        from botocore.config import Config  # lazy: SDK loaded on first use

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

    def _lean(self) -> S3Reads | None:
        """The reads that need no client (s3_reads.py), shared per process like the client; None
        where the SDK does every read."""
        if not self.presigned:
            return None
        key = (self.client_settings(), self.bucket)
        held = _reads.get(key)
        if held is None:
            with self._lock:  # the listing and the first reads of an open ask at once: build once
                held = _reads.get_or_build(key, lambda: (self._new_reads(),))
        lean = held[0]
        return lean if lean is not None and not lean.off else None

    def _new_reads(self) -> S3Reads | None:
        credentials, region = self._auth.signing_credentials(self._options, self.region)
        return s3_reads(
            credentials,
            self.bucket,
            region,
            self.endpoint,
            self.path_style,
            self._auth.profile,
            self.max_connections,
            (self.connect_timeout_s, self.read_timeout_s),
        )

    def _container_gone(self, e: Exception) -> str | None:
        if error_code(e) == "NoSuchBucket":
            return f"bucket {self.bucket!r} does not exist ({describe_exception(e)})"
        return None

    # -- the SDK primitives (see ObjectStorage) --------------------------------------------------

    def _get(self, name: str, start: int | None = None, end: int | None = None) -> bytes:
        from botocore.exceptions import ClientError  # lazy: SDK loaded on first use

        lean = self._lean()
        if lean is not None:  # what the lean path (s3_reads.py) does not take, the SDK answers
            got = lean.get(name, start, end)
            if got is not None:
                return got
        ranged = range_header(start, end)
        try:
            resp = self.client.get_object(Bucket=self.bucket, Key=name, **ranged)
        except ClientError as e:
            if ranged and http_status(e) == 416:  # start at or past the end: nothing to read (as a file)
                return b""
            raise
        with closing(resp["Body"]) as body:
            data: bytes = body.read()
            return data

    def put(self, key: str, data: bytes) -> None:
        name = self._object_key(key)
        data = bytes(data)
        self._run("write", key, lambda attempt: self.client.put_object(Bucket=self.bucket, Key=name, Body=data))

    def _create(self, name: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError  # lazy: SDK loaded on first use

        try:
            self.client.put_object(Bucket=self.bucket, Key=name, Body=data, IfNoneMatch="*")
            return True
        except ClientError as e:
            status, code = http_status(e), error_code(e)
            if status == 412 or (status == 409 and code in ("ConditionalRequestConflict", "OperationAborted")):
                return False
            raise

    def _head(self, name: str) -> ObjectEntry | None:
        from botocore.exceptions import ClientError  # lazy: SDK loaded on first use

        try:
            resp = self.client.head_object(Bucket=self.bucket, Key=name)
        except ClientError as e:
            if http_status(e) == 404:
                return None
            raise
        return name, int(resp.get("ContentLength", 0)), resp.get("LastModified")

    def _list_page(self, prefix: str, token: str | None) -> tuple[builtins.list[ObjectEntry], str | None]:
        lean = self._lean()
        page = lean.list_page(prefix, token, self.list_page_size) if lean is not None else None
        if page is not None:
            return page
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "MaxKeys": self.list_page_size}
        if token:
            kwargs["ContinuationToken"] = token
        resp = self.client.list_objects_v2(**kwargs)
        entries = [(o["Key"], int(o.get("Size", 0)), o.get("LastModified")) for o in resp.get("Contents", ())]
        if not resp.get("IsTruncated"):
            return entries, None
        following: str | None = resp.get("NextContinuationToken")
        if not following:
            where = self.full_uri(prefix[len(self._root_prefix()) :] or ".")
            raise StorageError(f"cannot list {where}: truncated listing without a continuation token")
        return entries, following

    def _delete_some(self, batch: builtins.list[tuple[str, str]]) -> tuple[builtins.list[tuple[str, str]], str, int]:
        by_object = {name: key for key, name in batch}
        resp = self.client.delete_objects(
            Bucket=self.bucket, Delete={"Objects": [{"Key": name} for _, name in batch], "Quiet": True}
        )
        retry: list[tuple[str, str]] = []
        for err in resp.get("Errors", ()):
            code = err.get("Code", "")
            name = err.get("Key", "")
            if code == "NoSuchKey":
                continue
            key = by_object.get(name, name)
            if code in ("SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout"):
                retry.append((key, name))
                continue
            raise StorageError(f"cannot delete {self.full_uri(key)}: {code}: {self._redact(err.get('Message', ''))}")
        return retry, "S3 answered a retryable error", 503

    def _upload_parts(self, key: str, name: str, size: int, chunk: Callable[[int, int], bytes]) -> None:
        """A multipart upload, aborted when it fails."""
        part_size = max(self.part_size, -(-size // 10_000))  # S3 allows at most 10,000 parts
        upload_id = self._run(
            "start multipart upload of",
            key,
            lambda attempt: self.client.create_multipart_upload(Bucket=self.bucket, Key=name)["UploadId"],
        )
        try:

            def send(i: int, body: bytes) -> dict[str, Any]:
                resp = self._run(
                    f"upload part {i + 1} of",
                    key,
                    lambda attempt: self.client.upload_part(
                        Bucket=self.bucket, Key=name, UploadId=upload_id, PartNumber=i + 1, Body=body
                    ),
                )
                return {"PartNumber": i + 1, "ETag": resp["ETag"]}

            parts = upload_in_parts(size, part_size, self.upload_concurrency, chunk, send)

            def complete(attempt: int) -> None:
                from botocore.exceptions import ClientError  # lazy: SDK loaded on first use

                try:
                    self.client.complete_multipart_upload(
                        Bucket=self.bucket, Key=name, UploadId=upload_id, MultipartUpload={"Parts": parts}
                    )
                except ClientError as e:
                    # The answer of an earlier attempt was lost but the upload was completed.
                    if attempt > 1 and error_code(e) == "NoSuchUpload" and self._is_completed(name, parts, size):
                        return
                    raise

            self._run("complete multipart upload of", key, complete)
        except BaseException as e:
            self._abort_upload(key, name, upload_id, e)
            raise

    def _is_completed(self, name: str, parts: builtins.list[dict[str, Any]], size: int) -> bool:
        resp = self.client.head_object(Bucket=self.bucket, Key=name)
        if int(resp.get("ContentLength", -1)) != size:
            return False
        try:
            digest = hashlib.md5(b"".join(bytes.fromhex(p["ETag"].strip('"')) for p in parts)).hexdigest()
        except ValueError:  # part ETags are not MD5s (e.g. SSE-KMS): the size must do
            return True
        etag: str = resp.get("ETag", "").strip('"')
        return etag == f"{digest}-{len(parts)}"

    def _abort_upload(self, key: str, name: str, upload_id: str, cause: BaseException) -> None:
        try:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=name, UploadId=upload_id)
        except Exception as e:  # the original failure is what the caller needs; keep this one in the log
            log.warning(
                "could not abort the failed multipart upload of %s (%s); the upload failed with %s",
                self.full_uri(key),
                describe_exception(e),
                describe_exception(cause),
            )


_clients: LruCache[Any] = LruCache(16, per_process=True)


def _shared_client(storage: S3Storage) -> Any:
    """A client for the storage's settings, shared within this process (boto3 clients are
    thread-safe). Keyed by the settings (credentials included: a different key gets a different
    client); at most 16 are kept (least recently used dropped). A forked child never reuses its
    parent's clients (their connection pools belong to the parent)."""
    return _clients.get_or_build(storage.client_settings(), storage.make_client)


_reads: LruCache[tuple[S3Reads | None]] = LruCache(16, per_process=True)  # by client settings and bucket


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
