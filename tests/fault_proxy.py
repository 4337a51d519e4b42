"""A fault-injecting HTTP proxy in front of the S3 (moto) and Azure (Azurite) emulators (a test helper,
not product code).

The storage under test talks real HTTP to the proxy (its `s3.endpoint` / `azure.endpoint` option set
to `proxy.endpoint`), which forwards each request to the emulator, unless a rule says otherwise:

    with FaultProxy(s3_endpoint) as proxy:
        proxy.rule("503", method="GET", path=r"/splits/", times=2)   # the next 2 matching requests
        storage = S3Storage(uri, {**opts, "spark.indextables.s3.endpoint": proxy.endpoint})
        ...
        assert proxy.count("GET", r"/splits/") == 3                    # attempts the proxy saw

Faults (`FAULTS`), each hitting a request that matches the rule's method and path pattern (a regex
searched in the request target, path and query), at most `times` times (None: every time):

* `503`, `429`, `500`: answered by the proxy, never forwarded; 503 is S3's `SlowDown` or Azure's
  `ServerBusy`, 429 `TooManyRequests`, 500 `InternalError`, each with the service's XML error body
  (and Azure's `x-ms-error-code` header);
* `reset`: a request with a body (an upload) is reset after half of its body arrived, never
  forwarded; a request without one is forwarded and its answer reset (TCP RST) after the headers
  and half the body (at once when the answer has none);
* `truncate`: forwarded; the answer's headers say its Content-Length (at least 16 bytes), fewer
  bytes follow (half; none of an empty answer), then the connection closes: a truncated read, or
  the lost answer of a write the service did (a HEAD's answer, which has no body, is reset);
* `stall`: forwarded; the answer is held `stall_s` (2 s) before it is sent: a client whose read
  timeout (`storage.readTimeoutMs`) is shorter times out (the write already done), a longer one
  waits;
* `drop`: the connection closes without an answer, nothing forwarded;
* `status`: answered with the rule's `status` (e.g. 403, 301), never forwarded.

Azure is told from S3 by its `x-ms-version` header. `proxy.requests` lists (method, target) of every
request seen, faulted or not; `count(method, path)` counts the matching ones (the attempts), and each
rule's `hits` how often it struck.
"""

from __future__ import annotations

import http.client
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

FAULTS = ("503", "429", "500", "reset", "truncate", "stall", "drop", "status")
# (S3 code, Azure code) of each error answer
_CODES = {
    503: ("SlowDown", "ServerBusy"),
    429: ("TooManyRequests", "TooManyRequests"),
    500: ("InternalError", "InternalError"),
}
_CODES_BY_FAULT = {"503": 503, "429": 429, "500": 500}
_HOP_BY_HOP = ("content-length", "transfer-encoding", "connection", "keep-alive")


@dataclass
class Rule:
    fault: str
    method: str | None = None
    path: str | None = None  # a regex searched in the request target
    times: int | None = 1  # None: every matching request
    status: int | None = None  # the answer of fault "status"
    hits: int = 0

    def take(self, method: str, target: str) -> bool:
        """Does this rule strike the request (and count it)? Called under the proxy's lock."""
        if self.times is not None and self.hits >= self.times:
            return False
        if self.method is not None and self.method != method:
            return False
        if self.path is not None and not re.search(self.path, target):
            return False
        self.hits += 1
        return True


class FaultProxy:
    """The proxy (see the module doc); a context manager that stops it on exit."""

    def __init__(self, upstream: str, stall_s: float = 2.0):
        up = urlsplit(upstream)
        self.upstream_host, self.upstream_port, self.upstream_netloc = up.hostname, up.port, up.netloc
        self.stall_s = stall_s
        self.rules: list[Rule] = []
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def handle_one_request(self) -> None:
                try:
                    super().handle_one_request()
                except OSError:  # the client went away (a timeout, a reset we made)
                    self.close_connection = True

            def finish(self) -> None:
                try:
                    super().finish()
                except OSError:
                    pass

            def _serve(self) -> None:
                proxy._serve(self)

            do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.endpoint = self.url + up.path.rstrip("/")  # Azurite's account path kept
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    # -- rules and counts ------------------------------------------------------------------------

    def rule(
        self,
        fault: str,
        method: str | None = None,
        path: str | None = None,
        times: int | None = 1,
        status: int | None = None,
    ) -> Rule:
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r} (one of {FAULTS})")
        added = Rule(fault, method, path, times, status)
        with self._lock:
            self.rules.append(added)
        return added

    def clear(self) -> None:
        """Drop every rule and forget the requests seen."""
        with self._lock:
            self.rules.clear()
            self.requests.clear()

    def count(self, method: str | None = None, path: str | None = None) -> int:
        """Requests seen (faulted or not) with this method and a target matching `path`."""
        with self._lock:
            return sum(
                1
                for m, target in self.requests
                if (method is None or m == method) and (path is None or re.search(path, target))
            )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- serving ---------------------------------------------------------------------------------

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        method, target = h.command, h.path
        with self._lock:
            self.requests.append((method, target))
            rule = next((r for r in self.rules if r.take(method, target)), None)
        fault = rule.fault if rule is not None else None
        azure = "x-ms-version" in h.headers
        length = int(h.headers.get("Content-Length") or 0)
        chunked = "chunked" in (h.headers.get("Transfer-Encoding") or "").lower()
        if fault == "reset" and (length or chunked):
            h.rfile.read(max(1, length // 2) if length else 1)  # part of the upload arrived
            _reset(h)
            return
        body = _read_chunked(h) if chunked else (h.rfile.read(length) if length else b"")
        if fault == "drop":
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault is not None and (fault in _CODES_BY_FAULT or fault == "status"):
            assert rule is not None
            _error(h, (rule.status or 403) if fault == "status" else _CODES_BY_FAULT[fault], azure)
            return
        status, reason, headers, payload = self._forward(method, target, h, body)
        if fault == "stall":
            time.sleep(self.stall_s)
        bodiless = method == "HEAD" or status in (204, 304)
        if fault == "reset" and (bodiless or not payload):
            _reset(h)  # the answer lost whole: the service did the work
            return
        h.send_response(status, reason)
        for k, v in headers:
            if k.lower() not in _HOP_BY_HOP or (method == "HEAD" and k.lower() == "content-length"):
                h.send_header(k, v)  # a HEAD's Content-Length is the object's size
        if bodiless:
            if fault == "truncate":
                _reset(h)  # nothing to cut short: lost whole
                return
            h.end_headers()
            return
        if fault == "truncate":
            h.send_header("Content-Length", str(max(16, len(payload))))
            h.end_headers()
            h.wfile.write(payload[: len(payload) // 2])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)  # an orderly close, short of the length
            return
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        if fault == "reset":
            h.wfile.write(payload[: len(payload) // 2])
            _reset(h)
            return
        h.wfile.write(payload)

    def _forward(
        self, method: str, target: str, h: BaseHTTPRequestHandler, body: bytes
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=30)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() not in ("host", "transfer-encoding", "expect")}
            headers["Host"] = self.upstream_netloc
            if body or method in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            conn.request(method, target, body=body or None, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
            return resp.status, resp.reason, resp.getheaders(), payload
        finally:
            conn.close()


def _reset(h: BaseHTTPRequestHandler) -> None:
    """Close the client's connection with a TCP RST (SO_LINGER 0), whatever was sent so far."""
    try:
        h.wfile.flush()
    except OSError:
        pass
    h.close_connection = True
    h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    h.connection.close()


def _read_chunked(h: BaseHTTPRequestHandler) -> bytes:
    out = b""
    while True:
        size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while h.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return out
        out += h.rfile.read(size)
        h.rfile.readline()


def _error(h: BaseHTTPRequestHandler, status: int, azure: bool) -> None:
    s3_code, azure_code = _CODES.get(status, ("AccessDenied", "AuthorizationFailure"))
    code = azure_code if azure else s3_code
    body = (
        f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code>'
        f"<Message>injected by the fault proxy</Message></Error>"
    ).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/xml")
    if azure:
        h.send_header("x-ms-error-code", code)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    if h.command != "HEAD":
        h.wfile.write(body)
