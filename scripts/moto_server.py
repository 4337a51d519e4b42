"""Run moto's S3 server on 127.0.0.1 with atomic conditional writes.

Why not plain `moto_server`: moto 5.2 checks `If-None-Match: *` and then stores the object as two
separate steps, and its werkzeug server is threaded, so two concurrent conditional PUTs of the
same key can both succeed. Real S3 makes exactly one of them win, and the transaction log relies
on that. This launcher serves the very same moto application, but runs every *conditional*
write (a PUT or POST carrying If-None-Match or If-Match) under one lock, which restores S3's
guarantee. Everything else stays concurrent.

Usage: python scripts/moto_server.py --port PORT [--host 127.0.0.1]
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any, Callable, Iterable

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple


class SerializeConditionalWrites:
    """WSGI middleware: conditional writes run one at a time (check and store become atomic)."""

    def __init__(self, app: Callable[..., Iterable[bytes]]):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        conditional = environ.get("REQUEST_METHOD") in ("PUT", "POST") and (
            "HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MATCH" in environ
        )
        if not conditional:
            return self.app(environ, start_response)
        with self.lock:
            # Materialise the body inside the lock so the store is complete before release.
            return list(self.app(environ, start_response))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    os.environ.setdefault("MOTO_PORT", str(args.port))  # moto builds some URLs from it

    def _exit(signum: int, frame: Any) -> None:
        sys.exit(0)

    signal.signal(signal.SIGTERM, _exit)
    signal.signal(signal.SIGINT, _exit)

    app = DomainDispatcherApplication(create_backend_app)
    run_simple(
        args.host,
        args.port,
        SerializeConditionalWrites(app),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
