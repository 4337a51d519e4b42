"""Where the source libraries and our storage layer find a source's files: URI schemes, local
paths, and data file URIs from the paths the sources record."""

from __future__ import annotations

import os
from urllib.parse import quote, unquote, urlsplit

from indextables_spark.core.storage.base import AZURE_SCHEMES


def scheme_of(uri: str | None) -> str:
    if not uri:
        return ""
    if len(uri) > 2 and uri[1] == ":" and uri[2] in "\\/":  # a Windows drive, not a scheme
        return ""
    try:
        return urlsplit(uri).scheme.lower()
    except ValueError:
        return ""


def is_local(uri: str) -> bool:
    return scheme_of(uri) in ("", "file")


def local_path(uri: str) -> str:
    """Absolute local path of a plain path or file:// URI."""
    if scheme_of(uri) == "file":
        return os.path.abspath(unquote(urlsplit(uri).path))
    return os.path.abspath(uri)


def http_endpoint(raw: str | None) -> str | None:
    """An endpoint URL, https:// added when the scheme is missing (as our storage backends do)."""
    raw = (raw or "").strip()
    if not raw:
        return None
    return raw if "://" in raw else "https://" + raw


def _join(root: str, key: str) -> str:
    return root.rstrip("/") + "/" + key


PATH_SAFE = "/=+,;:@!$&'()*~"


def file_uri(root: str, key: str) -> str:
    """Where our storage layer (and the libraries) find `key` under `root`: an absolute path for
    local roots; for Azure the key percent-encoded, since Azure URIs are decoded by our backend and
    by object_store (a Delta directory named 'p=x%20y' must be written 'p=x%2520y'); S3 keys are
    taken literally."""
    if "://" in key:  # Delta absolute paths (shallow clones) are read where they are
        return key
    if is_local(root):
        return os.path.join(local_path(root), *key.split("/"))
    if scheme_of(root) in AZURE_SCHEMES:
        return _join(root, quote(key, safe=PATH_SAFE))
    return _join(root, key)


def iceberg_file_uri(file_path: str) -> str:
    """An Iceberg data file location as a readable URI. Iceberg locations are plain strings, never
    percent-decoded (pyiceberg writes a directory 'p=a%2Fb' for the value 'a/b'): local ones become
    paths (a file:// URI would be decoded), Azure ones get their path encoded (see file_uri)."""
    scheme = scheme_of(file_path)
    if scheme == "file":
        return urlsplit(file_path).path
    if scheme in AZURE_SCHEMES:
        parts = urlsplit(file_path)
        # adlfs writes abfs://container/path (the account comes from the options): our storage
        # takes that form as az://container/path
        scheme_out = parts.scheme if "@" in parts.netloc else "az"
        return f"{scheme_out}://{parts.netloc}{quote(parts.path, safe=PATH_SAFE)}"
    return file_path
