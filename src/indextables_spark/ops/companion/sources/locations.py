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


def is_companion_of(of: tuple[str, str] | None, fmt: str, source: str, named: bool) -> bool:
    """Whether a companion recording `of` (its (format, source), core/split/format/companion.py)
    indexes this source; `named`: an Iceberg table named in a catalog, compared by its name."""
    return of is not None and of[0] == fmt and (of[1] == source if named else same_source(of[1], source))


def same_source(recorded: str, given: str) -> bool:
    """Whether two spellings name one source location: a relative and an absolute path, a
    `file:` URI and a path, s3a:// / s3n:// and s3://, with or without a trailing slash."""
    return recorded == given or canonical_location(recorded) == canonical_location(given)


def canonical_location(uri: str) -> str:
    scheme = scheme_of(uri)
    if scheme in ("", "file"):
        return os.path.normpath(local_path(uri))
    if scheme in ("s3a", "s3n"):
        uri = "s3" + uri[len(scheme) :]
    return uri.rstrip("/")


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
