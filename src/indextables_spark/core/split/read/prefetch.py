"""Fetching the splits a search reads before it searches them (split_threads.fetch_missing), with
the row store parts of the query's matches when a split's rows are read by ranges: the fetching
threads read them, so the search that follows, often in one thread, finds them local."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Sequence

from indextables_spark.config.options import Options
from indextables_spark.core.split.cache.cache import Reads
from indextables_spark.core.split.cache.fetch_plan import IndexQuery
from indextables_spark.core.split.format.bundle import ROWS_NAME
from indextables_spark.core.split.read import split_threads
from indextables_spark.core.split.read.reader import SplitReader
from indextables_spark.core.split.reference.native import is_reference_dir
from indextables_spark.core.storage.base import Storage
from indextables_spark.expr.search_query import SearchQuery

if TYPE_CHECKING:
    from indextables_spark.core.log.model.actions import AddFile


def prefetch_rows(local_dir: str, query: SearchQuery, columns: Sequence[str]) -> None:
    """Fetch now, in the caller's (fetching) thread, the row store parts a read of `columns` of
    the rows matching `query` takes from a split whose row store is read by ranges: the reads
    that follow, often in one thread, then find them local. Best effort: the read itself reports
    any error."""
    if os.path.exists(os.path.join(local_dir, ROWS_NAME)) or is_reference_dir(local_dir):
        return  # extracted (a reference split's rows are its extracted document store): nothing to fetch
    try:
        split = SplitReader(local_dir)
        present = set(split.schema.names)
        for _ in split.read([], query, [c for c in columns if c in present]):
            pass
    except Exception:  # noqa: S110 - the search that follows raises it
        pass


def fetch_missing(
    storage: Storage,
    options: Options | None,
    files: Sequence[AddFile],
    query: IndexQuery | None = None,
    columns: Sequence[str] | None = None,
    *,
    reads: Reads | None = None,
) -> None:
    """split_threads.fetch_missing; with a query (no filters) and `columns` too, the row store parts of
    the query's matches (prefetch_rows; not with pushed filters: of those matches the filters
    may keep few, and the read takes the rows it needs by ranges itself)."""
    if not isinstance(query, SearchQuery) or columns is None:
        split_threads.fetch_missing(storage, options, files, query, reads=reads)
        return
    q, cols = query, list(columns)
    split_threads.fetch_missing(
        storage, options, files, query, lambda local: prefetch_rows(local, q, cols), reads=reads
    )
