"""The optional libraries the source readers use (deltalake, pyiceberg): importing them with an
install hint, and their errors on one line without our secrets."""

from __future__ import annotations

import importlib
import re
from typing import Any, Mapping

from indextables_spark.config.options import Options
from indextables_spark.config.redaction import Redactor, secret_name
from indextables_spark.errors import InvalidOptionError

INSTALL_HINT = "pip install 'indextables_spark[companion]'"


def require_library(module: str, fmt: str) -> Any:
    """Import an optional dependency; a clear install hint when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise InvalidOptionError(
            f"format {fmt!r} needs the {module.split('.')[0]} package: {INSTALL_HINT} ({e})"
        ) from None


def library_redactor(opts: Options, *extra: Mapping[str, str]) -> Redactor:
    """Hides the values of secret-named options and library properties (config/redaction.py
    secret_name) in a library's error messages."""
    return Redactor(v for values in (opts, *extra) for k, v in values.items() if secret_name(k))


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def describe_error(e: BaseException, limit: int = 500) -> str:
    """A library error on one line: delta-rs nests its causes over several lines (with colour codes)."""
    text = " ".join(_ANSI.sub("", str(e)).replace("\u21b3", " ").split())
    text = text or type(e).__name__
    return text if len(text) <= limit else text[:limit] + "..."
