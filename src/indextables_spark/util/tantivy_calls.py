"""The boundary to tantivy-py: its panics derive from BaseException, so convert them here (every
layer that calls Tantivy imports it: core/split/format/_tantivy.py re-exports it)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from indextables_spark.errors import IndexTablesError


class TantivyError(IndexTablesError):
    """Tantivy failed (error or panic); the message says what we were doing and on which split."""


def _is_panic(e: BaseException) -> bool:
    # pyo3_runtime.PanicException is not importable by name; recognise it by type name.
    return type(e).__name__ == "PanicException"


@contextmanager
def tantivy_call(context: str) -> Iterator[None]:
    try:
        yield
    except IndexTablesError:
        raise
    except (ValueError, RuntimeError, OSError) as e:
        raise TantivyError(f"{context}: {e}") from e
    except BaseException as e:
        if _is_panic(e):
            raise TantivyError(f"{context}: tantivy panicked: {e}") from e
        raise
