"""Storage backends behind one interface. `open_storage(uri, options)` picks one by URI scheme."""

from __future__ import annotations

import os
from typing import Any, Mapping
from urllib.parse import unquote, urlparse

from indextables_spark.config.options import Options
from indextables_spark.core.storage.base import AZURE_SCHEMES, S3_SCHEMES, FileInfo, Storage, check_key
from indextables_spark.core.storage.local import LocalStorage
from indextables_spark.config.redaction import redact_uri
from indextables_spark.errors import InvalidOptionError

__all__ = ["FileInfo", "Storage", "LocalStorage", "open_storage", "check_key", "normalize_uri", "location_key"]


def normalize_uri(uri: str) -> str:
    """A table location as written by the user, with trailing slashes removed."""
    if not uri or not isinstance(uri, str):
        raise InvalidOptionError(f"table path must be a non-empty string, got {uri!r}")
    return uri.rstrip("/") if len(uri) > 1 else uri


def location_key(uri: str) -> str:
    """The table location a path names now: a relative local path made absolute (a process that
    changes its directory names another table by the same relative path), others as normalized."""
    uri = normalize_uri(uri)
    if "://" in uri or uri.startswith("file:") or os.path.isabs(uri) or uri[1:3] in (":\\", ":/"):
        return uri
    return os.path.abspath(uri)


def open_storage(uri: str, options: Mapping[str, Any] | None = None) -> Storage:
    opts = options if isinstance(options, Options) else Options.of(options)
    storage = _open(uri, opts)
    storage.options = opts
    return storage


def _open(uri: str, opts: Options) -> Storage:
    uri = normalize_uri(uri)
    try:
        parsed = urlparse(uri)
    except ValueError as e:  # e.g. "Invalid IPv6 URL"
        raise InvalidOptionError(f"table path {redact_uri(uri)!r} is not a valid URI ({e})") from None
    scheme = parsed.scheme.lower()
    if scheme in ("", "file") or (len(scheme) == 1 and uri[1:3] in (":\\", ":/")):
        path = unquote(parsed.path) if scheme == "file" else uri
        return LocalStorage(path, uri)
    if scheme in S3_SCHEMES:
        from indextables_spark.core.storage.s3 import S3Storage  # lazy: local tables never load the cloud SDKs' glue

        return S3Storage(uri, opts)
    if scheme in AZURE_SCHEMES:
        from indextables_spark.core.storage.azure import AzureStorage  # lazy: as above

        return AzureStorage(uri, opts)
    raise InvalidOptionError(f"unsupported storage scheme {scheme!r} in table path {uri!r}")
