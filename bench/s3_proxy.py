"""An HTTP proxy in front of an S3 emulator (moto, path-style addressing) for the cloud benches:
it forwards requests to the emulator, optionally serves object GET/HEAD from memory (honouring
Range), optionally adds a fixed delay per request, and records every request (key, byte range,
response body bytes) for the bench to read and reset.

Why serve from memory: moto reads the WHOLE object for every ranged GET, under a lock per object,
so timing ranged reads against moto bills big objects for moto's own work. Objects loaded with
`preload` (or on a first GET/HEAD when `memory` is on) are answered by the proxy itself; anything
else (listings, PUT, DELETE, POST, GETs with a query string or conditional headers, multi-range
GETs) goes to the emulator, and a write through the proxy drops the memory copies it may change.
The delay (`latency_ms`, settable between runs) stands in for an object store's time to first
byte: it is added to every request, forwarded or not; concurrent requests wait in parallel.
`stream_mb_s` (0: unlimited) also holds each answer from memory for its bytes at that rate, one
request's stream (an object store serves a GET at tens of MB/s; parallel GETs add up).
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import socketserver
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable
from urllib.parse import unquote, urlsplit

HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection", "expect"}
# headers of a stored object not replayed as they were (recomputed per response)
_PER_RESPONSE = HOP | {"content-length", "content-range", "date", "server", "x-amz-request-id", "x-amz-id-2"}
_CONDITIONAL = ("if-match", "if-none-match", "if-modified-since", "if-unmodified-since")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
ACCESS_KEY, SECRET_KEY, REGION = "bench", "bench-secret", "us-east-1"  # the benches' emulator credentials


def s3_options(endpoint: str) -> dict[str, str]:
    """Our table options for the S3 emulator (or a proxy in front of it) at `endpoint`."""
    return {
        "spark.indextables.aws.accessKey": ACCESS_KEY,
        "spark.indextables.aws.secretKey": SECRET_KEY,
        "spark.indextables.aws.region": REGION,
        "spark.indextables.s3.endpoint": endpoint,
        "spark.indextables.s3.pathStyleAccess": "true",
    }


def lance_storage_options(endpoint: str) -> dict[str, str]:
    """Lance's `storage_options` for the same endpoint (path-style, plain HTTP)."""
    return {
        "aws_endpoint": endpoint,
        "aws_access_key_id": ACCESS_KEY,
        "aws_secret_access_key": SECRET_KEY,
        "aws_region": REGION,
        "allow_http": "true",
        "aws_virtual_hosted_style_request": "false",
    }


@dataclass(frozen=True)
class Request:
    """One request the proxy answered: `key` is "bucket/object key" (no query string), `start`/`end`
    the object byte range of a GET's body ([start, end); the whole object without a Range header;
    None for other requests or unknown sizes), `nbytes` the response body's length."""

    t: float  # time.time() when the request arrived
    method: str
    key: str
    query: str
    start: int | None
    end: int | None
    nbytes: int
    status: int
    from_memory: bool


@dataclass
class _Object:
    data: bytes
    headers: list[tuple[str, str]]


class S3Proxy:
    """A threaded HTTP proxy on a free 127.0.0.1 port (`url`) in front of `upstream`."""

    def __init__(self, upstream: str, *, latency_ms: float = 0.0, memory: bool = True):
        self.upstream = urlsplit(upstream)
        self.latency_ms = latency_ms
        self.stream_mb_s = 0.0  # (see the module docstring)
        self.memory = memory
        self.lock = threading.Lock()
        self.objects: dict[str, _Object] = {}
        self.log: list[Request] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out in separate writes: with Nagle's algorithm on, the body
            # waits for the client's delayed ACK, ~40 ms per request on Linux
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                proxy._handle(self)

            do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            request_queue_size = 256

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="s3-proxy", daemon=True)
        self._thread.start()

    # ---- the bench's side ----------------------------------------------------------------------------

    def preload(self, keys: Iterable[str]) -> int:
        """Load the objects ("bucket/key") into memory from the emulator (with the benches'
        credentials: moto refuses anonymous reads); returns their bytes."""
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=self.upstream.geturl(),
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )
        n = 0
        for key in keys:
            bucket, _, name = key.partition("/")
            got = client.get_object(Bucket=bucket, Key=name)
            data = got["Body"].read()
            headers = got["ResponseMetadata"]["HTTPHeaders"].items()
            with self.lock:
                self.objects[key] = _Object(data, [(k, v) for k, v in headers if k.lower() not in _PER_RESPONSE])
            n += len(data)
        return n

    def object_bytes(self, key: str) -> bytes | None:
        """The memory copy of an object, if any."""
        with self.lock:
            obj = self.objects.get(key)
        return obj.data if obj is not None else None

    def reset(self) -> None:
        """Forget the requests recorded so far."""
        with self.lock:
            self.log = []

    def take(self) -> list[Request]:
        """The requests recorded since the last reset/take (and forget them)."""
        with self.lock:
            log, self.log = self.log, []
        return log

    def bytes_by_key(self, method: str = "GET") -> Counter[str]:
        """Response body bytes per key of the recorded requests with `method` (not reset)."""
        with self.lock:
            out: Counter[str] = Counter()
            for r in self.log:
                if r.method == method:
                    out[r.key] += r.nbytes
            return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)

    # ---- serving --------------------------------------------------------------------------------------

    def _upstream(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.upstream.hostname or "127.0.0.1", self.upstream.port, timeout=300)

    def _load(self, key: str, path: str, headers: dict[str, str]) -> _Object | None:
        """GET the whole object from the emulator into memory with the client's headers (its
        credentials) but no Range (None if it is not there)."""
        conn = self._upstream()
        try:
            conn.request("GET", path, headers={k: v for k, v in headers.items() if k.lower() not in HOP | {"range"}})
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        if resp.status != 200:
            return None
        obj = _Object(data, [(k, v) for k, v in resp.getheaders() if k.lower() not in _PER_RESPONSE])
        with self.lock:
            self.objects[key] = obj
        return obj

    def _handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        t = time.time()
        parts = urlsplit(h.path)
        key = unquote(parts.path).lstrip("/")
        # a presigned request's query is its signature (X-Amz-*): the object read is the same
        query = "&".join(p for p in parts.query.split("&") if p and not p.lower().startswith("x-amz-"))
        body = _request_body(h)
        if self.latency_ms > 0:
            time.sleep(self.latency_ms / 1000)
        served = self._from_memory(h, t, key, query) if h.command in ("GET", "HEAD") else False
        if not served:
            self._forward(h, t, key, query, body)

    def _from_memory(self, h: http.server.BaseHTTPRequestHandler, t: float, key: str, query: str) -> bool:
        if not self.memory or query or "/" not in key or any(c in h.headers for c in _CONDITIONAL):
            return False
        with self.lock:
            obj = self.objects.get(key)
        if obj is None:
            obj = self._load(key, urlsplit(h.path).path, dict(h.headers.items())) if h.command == "GET" else None
            if obj is None:
                return False
        size = len(obj.data)
        start, end, status = 0, size, 200
        rng = h.headers.get("Range") if h.command == "GET" else None
        if rng is not None:
            m = _RANGE.match(rng.strip())
            if m is None or m.group(1) == m.group(2) == "":
                return False  # several ranges: the emulator's business
            if m.group(1) == "":  # the last n bytes
                start = max(0, size - int(m.group(2)))
            else:
                start = int(m.group(1))
                end = min(size, int(m.group(2)) + 1) if m.group(2) else size
            if start >= size or start >= end:
                self._record(t, h.command, key, query, None, None, 0, 416, True)
                h.send_response(416)
                h.send_header("Content-Range", f"bytes */{size}")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return True
            status = 206
        if self.stream_mb_s > 0 and h.command == "GET":
            time.sleep((end - start) / (self.stream_mb_s * 1e6))
        h.send_response(status)
        for k, v in obj.headers:
            h.send_header(k, v)
        h.send_header("Accept-Ranges", "bytes")
        if status == 206:
            h.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        h.send_header("Content-Length", str(end - start if h.command == "GET" else size))
        h.end_headers()
        n = 0
        if h.command == "GET":
            h.wfile.write(memoryview(obj.data)[start:end])
            n = end - start
        self._record(t, h.command, key, query, start if n else None, end if n else None, n, status, True)
        return True

    def _forward(
        self, h: http.server.BaseHTTPRequestHandler, t: float, key: str, query: str, body: bytes | None
    ) -> None:
        headers = {k: v for k, v in h.headers.items() if k.lower() not in HOP}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        conn = self._upstream()
        try:
            conn.request(h.command, h.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        if h.command not in ("GET", "HEAD") and resp.status < 300:
            self._invalidate(key)
        start = end = None
        if h.command == "GET" and 200 <= resp.status < 300 and not query:
            start, end = _content_range(resp.getheader("Content-Range"), len(data))
        self._record(t, h.command, key, query, start, end, len(data), resp.status, False)
        h.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP and k.lower() != "content-length":
                h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)

    def _invalidate(self, key: str) -> None:
        """Drop the memory copies a write to `key` may change (a bucket-level write: the bucket's)."""
        with self.lock:
            if "/" in key:
                self.objects.pop(key, None)
            else:
                prefix = key.rstrip("/") + "/"
                for k in [k for k in self.objects if k.startswith(prefix)]:
                    del self.objects[k]

    def _record(
        self,
        t: float,
        method: str,
        key: str,
        query: str,
        start: int | None,
        end: int | None,
        nbytes: int,
        status: int,
        from_memory: bool,
    ) -> None:
        with self.lock:
            self.log.append(Request(t, method, key, query, start, end, nbytes, status, from_memory))


def _request_body(h: http.server.BaseHTTPRequestHandler) -> bytes | None:
    """The request's body (Content-Length or chunked), or None."""
    if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
        out = bytearray()
        while True:
            size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while h.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                return bytes(out)
            out += h.rfile.read(size)
            h.rfile.readline()
    length = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(length) if length else None


def _content_range(value: str | None, n: int) -> tuple[int, int]:
    """[start, end) of a GET response's body from its Content-Range header (none: the whole object)."""
    m = re.match(r"bytes (\d+)-(\d+)/", value or "")
    return (int(m.group(1)), int(m.group(2)) + 1) if m else (0, n)


def cold_child(
    proxy: S3Proxy,
    script: str,
    spec: dict[str, Any],
    workdir: str,
    pythonpath: str,
    mark: str,
    timeout: float,
    what: str,
) -> tuple[dict[str, Any], list[Request]]:
    """`python script --child <spec>` in a fresh process (its own TMPDIR and an empty split cache,
    `spec["cache"]`, under `workdir`; `spec["endpoint"]` the proxy) with PYTHONPATH `pythonpath`:
    (the JSON it printed after `mark`, the proxy's requests while it ran). A child that fails or
    prints no result ends the bench, naming `what`, with its output."""
    tmp = tempfile.mkdtemp(prefix="run-", dir=workdir)
    spec = {**spec, "cache": os.path.join(tmp, "cache"), "endpoint": proxy.url}
    env = {**os.environ, "TMPDIR": tmp, "PYTHONPATH": pythonpath}
    proxy.reset()
    try:
        done = subprocess.run(
            [sys.executable, os.path.abspath(script), "--child", json.dumps(spec)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log = proxy.take()
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(mark)]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{what} failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    out: dict[str, Any] = json.loads(lines[-1][len(mark) :])
    return out, log
