"""Keeping credentials out of what the storage layer shows: `redact_uri` and `Redactor` clean
URIs and messages, `protect_secrets` keeps known credential values out of the SDKs' debug logs."""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Iterable
from urllib.parse import quote, unquote, urlsplit, urlunsplit

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
