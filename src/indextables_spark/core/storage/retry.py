"""Retries of transient object-store failures, shared by the S3 and Azure backends.

The SDKs' own retries are switched off (botocore `total_max_attempts=1`, azure `retry_total=0`),
so every retry decision is made here, the same way for both clouds:

* transient (retried with exponential backoff and jitter, at most `storage.retry.maxAttempts`
  attempts in all): HTTP 429, 408 and every 5xx (e.g. S3 `SlowDown` 503), S3 `RequestTimeout`,
  connection resets/closures, connect and read timeouts, truncated responses
  (botocore `EndpointConnectionError`, `ConnectionClosedError`, `ReadTimeoutError`, ...;
  azure `ServiceRequestError`, `ServiceResponseError`; builtin `ConnectionError`, `TimeoutError`);
* anything else (403, 404, 400, bad options, ...) is permanent and raised at once.

The backends turn the final SDK exception into a `StorageError` / `FileNotFoundInStorageError`
that names the URI; conditional-write conflicts never get here (they are answers, not errors).

Also here, shared by both backends: `redact_uri` and `Redactor`, which keep credentials out of
URIs, messages and logs, and `protect_secrets`, which keeps them out of the SDKs' debug logs;
`check_prefix` for listing prefixes; `download_in_chunks`.
"""

from __future__ import annotations

import logging
import os
import random
import re
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, TypeVar
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from indextables_spark.errors import InvalidOptionError, StorageError
from indextables_spark.core.storage.base import check_key
from indextables_spark.config.registry import registered_default

if TYPE_CHECKING:
    from indextables_spark.core.storage.base import Storage

T = TypeVar("T")

log = logging.getLogger("indextables_spark.core.storage")

DEFAULT_MAX_ATTEMPTS = registered_default("storage.retry.maxAttempts")
DEFAULT_BASE_DELAY_MS = registered_default("storage.retry.baseDelayMs")
DEFAULT_MAX_DELAY_MS = registered_default("storage.retry.maxDelayMs")

# Service error codes that mean "try again" even when the HTTP status alone would not say so.
_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "RequestTimeout",
        "RequestTimeoutException",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "InternalError",
        "ServiceUnavailable",
        "ServerBusy",
        "OperationTimedOut",
    }
)


def http_status(exc: BaseException) -> int | None:
    """The HTTP status carried by an SDK exception (botocore ClientError, azure HttpResponseError)."""
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):  # botocore ClientError
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return int(status) if status is not None else None
    status = getattr(exc, "status_code", None)  # azure HttpResponseError
    if isinstance(status, int):
        return status
    return None


def error_code(exc: BaseException) -> str | None:
    """The service's error code (S3 `NoSuchKey`, Azure `BlobNotFound`, ...) when there is one."""
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    code = getattr(exc, "error_code", None)
    if code:
        return str(getattr(code, "value", code))
    return None


def _transient_exception_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [ConnectionError, TimeoutError]
    try:
        from botocore import exceptions as be

        types += [
            be.ConnectionError,  # EndpointConnectionError, ConnectionClosedError, timeouts, proxy
            be.HTTPClientError,
            be.IncompleteReadError,
            be.ResponseStreamingError,
        ]
    except ImportError:  # pragma: no cover - boto3 is a dependency
        pass
    try:
        from urllib3 import exceptions as ue

        types += [ue.ProtocolError, ue.TimeoutError, ue.NewConnectionError]
    except ImportError:  # pragma: no cover
        pass
    try:
        from azure.core import exceptions as ae

        types += [ae.ServiceRequestError, ae.ServiceResponseError, ae.IncompleteReadError]
    except ImportError:  # pragma: no cover - azure-storage-blob is a dependency
        pass
    return tuple(types)


_TRANSIENT_TYPES: tuple[type[BaseException], ...] | None = None


def is_transient(exc: BaseException) -> bool:
    """True when exc is worth retrying (see the module doc)."""
    global _TRANSIENT_TYPES
    if _TRANSIENT_TYPES is None:
        _TRANSIENT_TYPES = _transient_exception_types()
    status = http_status(exc)
    if status is not None:
        if status >= 500 or status in (408, 429):
            return True
        return error_code(exc) in _TRANSIENT_CODES
    if isinstance(exc, _TRANSIENT_TYPES):
        return True
    return False


@dataclass
class RetryPolicy:
    """Bounded exponential backoff with jitter.

    Attempt n (n >= 2) waits `min(max_delay, base_delay * 2**(n-2))`, scaled by a random factor in
    [0.5, 1.0). `sleep` and `rng` are injectable for tests.
    """

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    base_delay_ms: int = DEFAULT_BASE_DELAY_MS
    max_delay_ms: int = DEFAULT_MAX_DELAY_MS
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    rng: Callable[[], float] = field(default=random.random, repr=False)

    @classmethod
    def from_options(cls, options: Any) -> "RetryPolicy":
        """From `storage.retry.maxAttempts` (5), `storage.retry.baseDelayMs` (100) and
        `storage.retry.maxDelayMs` (5000)."""
        max_attempts = options.get_int("storage.retry.maxAttempts")
        base = options.get_int("storage.retry.baseDelayMs")
        cap = options.get_int("storage.retry.maxDelayMs")
        if max_attempts < 1:
            raise InvalidOptionError(
                f"option 'spark.indextables.storage.retry.maxAttempts' must be at least 1, got {max_attempts}"
            )
        if base < 0 or cap < 0:
            raise InvalidOptionError(
                "options 'spark.indextables.storage.retry.baseDelayMs' / 'maxDelayMs' must not be negative, "
                f"got {base} / {cap}"
            )
        return cls(max_attempts=max_attempts, base_delay_ms=base, max_delay_ms=cap)

    def delay_s(self, attempt: int) -> float:
        """Seconds to wait before attempt `attempt` (2, 3, ...)."""
        raw: float = min(self.max_delay_ms, self.base_delay_ms * (2 ** max(0, attempt - 2)))
        return raw * (0.5 + self.rng() / 2) / 1000.0

    def run(self, fn: Callable[[int], T], what: str) -> T:
        """Call fn(attempt) until it returns, a permanent error occurs or attempts run out.

        The exception that ends the loop is re-raised as is, with `indextables_attempts` (how many
        attempts were made) set on it for the caller's message. `what` (already redacted) names
        the operation in debug logs.
        """
        attempt = 1
        while True:
            try:
                return fn(attempt)
            except Exception as e:
                transient = is_transient(e)
                if not transient or attempt >= self.max_attempts:
                    try:
                        e.indextables_attempts = attempt  # type: ignore[attr-defined]
                        e.indextables_transient = transient  # type: ignore[attr-defined]
                    except AttributeError:  # pragma: no cover - exotic exception types
                        pass
                    raise
                delay = self.delay_s(attempt + 1)
                log.debug(
                    "%s: transient %s (attempt %d of %d), retrying in %.0f ms",
                    what,
                    describe_exception(e),
                    attempt,
                    self.max_attempts,
                    delay * 1000,
                )
                self.sleep(delay)
                attempt += 1


def describe_exception(exc: BaseException) -> str:
    """Short text for an SDK exception: type, HTTP status and service error code."""
    parts = [type(exc).__name__]
    status = http_status(exc)
    if status is not None:
        parts.append(f"HTTP {status}")
    code = error_code(exc)
    if code:
        parts.append(code)
    return " ".join(parts)


# --- secrets ---------------------------------------------------------------------------------

_SECRET_QUERY = re.compile(
    r"(?i)((?:sig|signature|x-amz-signature|x-amz-credential|x-amz-security-token|"
    r"accountkey|sharedaccesssignature|token|secret)=)[^&;\s'\"]+"
)


def redact_uri(uri: str) -> str:
    """The URI without credentials: user:password@ → user@ (an S3 'key:secret@bucket' loses both
    parts), and query strings (SAS tokens) dropped."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return _SECRET_QUERY.sub(r"\1***", uri)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            netloc = "***@" + host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class Redactor:
    """Replaces known secret values (and signature-like query parameters) in text with ***.

    Each secret is also matched URL-encoded and URL-decoded (SAS tokens and keys with '/', '+' or
    '=' show up either way in URLs)."""

    def __init__(self, secrets: Iterable[str | None] = ()):
        forms: set[str] = set()
        for s in secrets:
            if s and len(s) >= 4:
                forms.update((s, unquote(s), quote(s, safe="")))
        # Longest first, so a secret containing another is replaced whole; ignore trivial values.
        self._secrets = sorted((f for f in forms if len(f) >= 4), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for s in self._secrets:
            if s in text:
                text = text.replace(s, "***")
        return _SECRET_QUERY.sub(r"\1***", text)


# Loggers of the libraries under the storage backends. At DEBUG they log what they send: botocore
# the request headers (X-Amz-Security-Token, the access key id in Authorization) and the canonical
# request, urllib3 the request URLs (Azure SAS signatures in the query string).
SDK_LOGGERS = ("botocore", "boto3", "s3transfer", "urllib3", "requests", "azure")
_protected: set[str] = set()
_log_redactor = Redactor()
_protect_lock = threading.Lock()
_factory_installed = False


def protect_secrets(secrets: Iterable[str | None]) -> None:
    """Keep these credential values out of the log records of the SDK loggers (SDK_LOGGERS).

    Called by the S3 and Azure backends with the credentials they are given. Installs (once per
    process) a log record factory that wraps the current one: records of those loggers have their
    message formatted and every known secret replaced by ***. Records are only built for enabled
    levels, so nothing is paid unless the SDKs' debug logging is on."""
    global _log_redactor, _factory_installed
    new = {s for s in secrets if s and len(s) >= 4}
    if new <= _protected and _factory_installed:
        return
    with _protect_lock:
        _protected.update(new)
        _log_redactor = Redactor(_protected)
        if not _factory_installed:
            previous = logging.getLogRecordFactory()

            def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
                record = previous(*args, **kwargs)
                if record.name.startswith(SDK_LOGGERS):
                    _scrub(record)
                return record

            logging.setLogRecordFactory(factory)
            _factory_installed = True


def _scrub(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed record: logging reports it when it is emitted
        return
    clean = _log_redactor(message)
    if clean != message:
        record.msg, record.args = clean, None


# --- shared helpers --------------------------------------------------------------------------


def check_prefix(prefix: str) -> str:
    """A listing prefix relative to the root ('' = everything); refuses prefixes that escape it."""
    if not prefix:
        return ""
    norm = check_key(prefix)  # raises PathEscapeError for absolute or escaping prefixes
    return norm + "/" if prefix.endswith("/") else norm


def download_in_chunks(storage: "Storage", key: str, size: int, local_path: str, chunk: int) -> None:
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
) -> list[T]:
    """send(i, chunk(offset, length)) for each part_size piece of `size` bytes (part i starts at
    i * part_size), `concurrency` pieces at a time, each send retrying on its own; the results in
    part order. S3 multipart parts and Azure staged blocks both go through here."""
    from concurrent.futures import ThreadPoolExecutor

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
