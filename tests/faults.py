"""Fault injection for the S3 and Azure SDKs (test helpers, not product code).

Both wrap the real SDK on its real HTTP path to the emulator; a chosen fraction of requests fails
the way a real service or network fails:

* `S3Faults`: a botocore `before-send` handler. A faulted request never reaches the server; the
  handler answers 503 SlowDown, 500 InternalError, or raises ConnectionClosedError. With
  `lose_answers=N` the first N requests reach the server and then their answer is lost
  (ConnectionClosedError raised from `after-call`), the hard case for conditional writes.
  Pass `faults.handlers()` as `S3Storage(..., event_handlers=...)`.
* `AzureFaults`: an azure-core HTTP transport wrapped around the real one, passed as
  `AzureStorage(..., client_kwargs={"transport": faults})`. Faulted requests get a 503
  ServerBusy / 500 InternalError response or a ServiceResponseError/ServiceRequestError, or (with
  `lose_answers`) are sent and then have their answer replaced by ServiceResponseError.

`fail_first=N` fails the first N (matching) requests with one of `kinds`.
`permanent_status=403` answers every request with that status instead. `only(op)` limits the
faults to some operations (S3: "PutObject", ...; Azure: "PUT", "GET comp=list", ...). Both count requests
(`requests`, `faults`, and `calls[name]` by operation) so tests can prove what happened.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any, Callable, Iterator

TRANSIENT_KINDS = ("503", "500", "closed")


class _FaultPlan:
    def __init__(
        self,
        rate: float,
        seed: int,
        kinds: tuple[str, ...],
        permanent_status: int | None,
        lose_answers: int,
        only: Callable[[str], bool] | None,
        fail_first: int = 0,
    ):
        self.rate = rate
        self.fail_first = fail_first
        self.kinds = kinds
        self.permanent_status = permanent_status
        self.lose_answers = lose_answers
        self.only = only
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.requests = 0
        self.faults = 0
        self.lost = 0
        self.calls: Counter[str] = Counter()

    def decide(self, op: str) -> str | None:
        """The fault for the next request of operation `op` ("503", "500", "closed", "lose",
        "permanent") or None."""
        with self._lock:
            self.requests += 1
            self.calls[op] += 1
            if self.only is not None and not self.only(op):
                return None
            if self.permanent_status is not None:
                self.faults += 1
                return "permanent"
            if self.lost < self.lose_answers:
                self.lost += 1
                return "lose"
            if self.fail_first > 0:
                self.fail_first -= 1
                self.faults += 1
                return self._rng.choice(self.kinds)
            if self.rate > 0 and self._rng.random() < self.rate:
                self.faults += 1
                return self._rng.choice(self.kinds)
            return None


# --- S3 (botocore events) ------------------------------------------------------------------------


class _Raw:
    def __init__(self, body: bytes):
        self._body = body

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self._body

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        body, self._body = self._body, b""
        return body


def _s3_error(status: int, code: str, message: str) -> tuple[dict[str, str], bytes]:
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{message}</Message>'
        f"<RequestId>injected</RequestId></Error>"
    ).encode()
    return {"Content-Type": "application/xml", "Content-Length": str(len(body))}, body


class S3Faults(_FaultPlan):
    def __init__(
        self,
        rate: float = 0.0,
        *,
        seed: int = 1,
        kinds: tuple[str, ...] = TRANSIENT_KINDS,
        permanent_status: int | None = None,
        lose_answers: int = 0,
        only: Callable[[str], bool] | None = None,
        fail_first: int = 0,
    ):
        super().__init__(rate, seed, kinds, permanent_status, 0, only, fail_first)  # answers are lost in after-call
        self.lose_after_call = lose_answers

    def handlers(self) -> list[tuple[str, Callable[..., Any]]]:
        return [("before-send.s3", self._before_send), ("after-call.s3", self._after_call)]

    def _before_send(self, request: Any, event_name: str = "", **kwargs: Any) -> Any:
        from botocore.awsrequest import AWSResponse
        from botocore.exceptions import ConnectionClosedError

        kind = self.decide(event_name.rsplit(".", 1)[-1])  # e.g. before-send.s3.PutObject
        if kind is None:
            return None
        if kind == "closed":
            raise ConnectionClosedError(endpoint_url=request.url)
        if kind == "permanent":
            headers, body = _s3_error(self.permanent_status or 403, "AccessDenied", "Access Denied (injected)")
            return AWSResponse(request.url, self.permanent_status, headers, _Raw(body))
        status, code = (503, "SlowDown") if kind == "503" else (500, "InternalError")
        headers, body = _s3_error(status, code, "injected fault")
        return AWSResponse(request.url, status, headers, _Raw(body))

    def _after_call(self, http_response: Any = None, event_name: str = "", **kwargs: Any) -> None:
        """Lose the answer of the first `lose_answers` successful requests (the server did the work)."""
        from botocore.exceptions import ConnectionClosedError

        op = event_name.rsplit(".", 1)[-1]
        if http_response is None or http_response.status_code >= 300:
            return
        with self._lock:
            if self.lost >= self.lose_after_call or (self.only is not None and not self.only(op)):
                return
            self.lost += 1
        raise ConnectionClosedError(endpoint_url=getattr(http_response, "url", "?"))


# --- Azure (azure-core transport) ------------------------------------------------------------------


def azure_operation(request: Any) -> str:
    """A short name for an Azure Blob request: e.g. 'PUT comp=block', 'GET', 'POST comp=batch'."""
    from urllib.parse import parse_qs, urlsplit

    query = parse_qs(urlsplit(request.url).query)
    comp = query.get("comp", [""])[0]
    return f"{request.method} comp={comp}" if comp else request.method


class AzureFaults(_FaultPlan):
    def __init__(
        self,
        rate: float = 0.0,
        *,
        seed: int = 1,
        kinds: tuple[str, ...] = TRANSIENT_KINDS,
        permanent_status: int | None = None,
        lose_answers: int = 0,
        only: Callable[[str], bool] | None = None,
        fail_first: int = 0,
    ):
        super().__init__(rate, seed, kinds, permanent_status, lose_answers, only, fail_first)
        from azure.core.pipeline.transport import RequestsTransport

        self.inner = RequestsTransport()

    # HttpTransport protocol
    def __enter__(self) -> "AzureFaults":
        self.inner.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self.inner.__exit__(*args)

    def open(self) -> None:
        self.inner.open()

    def close(self) -> None:
        self.inner.close()

    def send(self, request: Any, **kwargs: Any) -> Any:
        from azure.core.exceptions import ServiceRequestError, ServiceResponseError

        kind = self.decide(azure_operation(request))
        if kind is None:
            return self.inner.send(request, **kwargs)
        if kind == "lose":
            response = self.inner.send(request, **kwargs)  # the service does the work...
            if response.status_code >= 300:
                with self._lock:
                    self.lost -= 1  # only successful answers are lost
                return response
            raise ServiceResponseError("injected: connection reset while reading the response")
        if kind == "closed":
            if self._rng_bit():
                raise ServiceRequestError("injected: connection refused")
            raise ServiceResponseError("injected: connection closed")
        if kind == "permanent":
            return self._response(
                request,
                self.permanent_status or 403,
                "AuthorizationFailure",
                "This request is not authorized to perform this operation (injected).",
                **kwargs,
            )
        if kind == "503":
            return self._response(request, 503, "ServerBusy", "The server is busy (injected).", **kwargs)
        return self._response(
            request, 500, "InternalError", "The server encountered an internal error (injected).", **kwargs
        )

    def _rng_bit(self) -> bool:
        with self._lock:
            return self._rng.random() < 0.5

    @staticmethod
    def _response(request: Any, status: int, code: str, message: str, **kwargs: Any) -> Any:
        """An error answer built the way RequestsTransport builds real ones."""
        import io

        import requests
        from azure.core.pipeline._tools import handle_non_stream_rest_response, is_rest
        from azure.core.pipeline.transport import RequestsTransportResponse
        from azure.core.rest._requests_basic import RestRequestsTransportResponse
        from requests.structures import CaseInsensitiveDict

        body = (
            f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code><Message>{message}</Message></Error>'
        ).encode()
        raw = requests.Response()
        raw.status_code = status
        raw.reason = {403: "Forbidden", 500: "Internal Server Error", 503: "Service Unavailable"}.get(status, "Error")
        raw.headers = CaseInsensitiveDict(
            {"x-ms-error-code": code, "Content-Type": "application/xml", "Content-Length": str(len(body))}
        )
        raw.raw = io.BytesIO(body)
        raw.url = request.url
        if is_rest(request):
            response = RestRequestsTransportResponse(request=request, internal_response=raw, block_size=4096)
            if not kwargs.get("stream"):
                handle_non_stream_rest_response(response)
            return response
        raw._content = body  # type: ignore[attr-defined]
        return RequestsTransportResponse(request, raw)
