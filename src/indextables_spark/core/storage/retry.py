"""Retries of transient object-store failures, shared by the S3 and Azure backends.

The SDKs' own retries are switched off (botocore `total_max_attempts=1`, azure `retry_total=0`),
so every retry decision is made here, the same way for both clouds:

* transient (retried with exponential backoff and jitter, at most `storage.retry.maxAttempts`
  attempts in all): HTTP 429, 408 and every 5xx (e.g. S3 `SlowDown` 503), S3 `RequestTimeout`,
  connection resets/closures, connect and read timeouts, truncated responses
  (botocore `EndpointConnectionError`, `ConnectionClosedError`, `ReadTimeoutError`,
  `IncompleteReadError`, ...; azure `ServiceRequestError`, `ServiceResponseError`,
  `IncompleteReadError`, and an `HttpResponseError` without a status wrapping one of these or a
  broken body (requests' `ChunkedEncodingError`); builtin `ConnectionError`, `TimeoutError`);
* anything else (403, 404, 400, bad options, ...) is permanent and raised at once.

The backends turn the final SDK exception into a `StorageError` / `FileNotFoundInStorageError`
that names the URI; conditional-write conflicts never get here (they are answers, not errors).

"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, TypeVar

from indextables_spark.config.registry import registered_default
from indextables_spark.errors import InvalidOptionError

if TYPE_CHECKING:
    from indextables_spark.config.options import Options

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
        from botocore import exceptions as be  # lazy: SDK loaded on first failure

        types += [
            be.ConnectionError,  # EndpointConnectionError, ConnectionClosedError, timeouts, proxy
            be.HTTPClientError,
            be.IncompleteReadError,
            be.ResponseStreamingError,
        ]
    except ImportError:  # pragma: no cover - boto3 is a dependency
        pass
    try:
        from urllib3 import exceptions as ue  # lazy: SDK loaded on first failure

        types += [ue.ProtocolError, ue.TimeoutError, ue.NewConnectionError]
    except ImportError:  # pragma: no cover
        pass
    try:
        from requests import exceptions as rq  # lazy: SDK loaded on first failure

        types += [rq.ChunkedEncodingError, rq.ConnectionError]  # azure-core's transport, mid-body
    except ImportError:  # pragma: no cover - azure-core's requests transport needs it
        pass
    try:
        from azure.core import exceptions as ae  # lazy: SDK loaded on first failure

        types += [ae.ServiceRequestError, ae.ServiceResponseError, ae.IncompleteReadError]
    except ImportError:  # pragma: no cover - azure-storage-blob is a dependency
        pass
    return tuple(types)


_TRANSIENT_TYPES: tuple[type[BaseException], ...] | None = None


def is_transient(exc: BaseException) -> bool:
    """True when exc is worth retrying (see the module doc)."""
    global _TRANSIENT_TYPES
    status = http_status(exc)
    if status is not None:
        if status >= 500 or status in (408, 429):
            return True
        return error_code(exc) in _TRANSIENT_CODES
    if _TRANSIENT_TYPES is None:  # after the status: a 404 (a missing file) imports no SDK
        _TRANSIENT_TYPES = _transient_exception_types()
    if isinstance(exc, _TRANSIENT_TYPES):
        return True
    # azure-core raises a body broken off mid-read as an HttpResponseError without a status around
    # the transport's error, and the blob download, having read such a body again itself, wraps
    # that once more: what broke decides.
    inner = getattr(exc, "inner_exception", None)
    return isinstance(inner, BaseException) and inner is not exc and is_transient(inner)


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
    def from_options(cls, options: Options) -> "RetryPolicy":
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
