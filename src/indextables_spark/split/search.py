"""Spark-free counting over a table's splits (IndexTable.count(query=...))."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from ..options import Options
from ..storage.base import Storage
from .cache import get_cache
from .filters import Filter
from .reader import SplitReader

MAX_THREADS = 4   # Tantivy releases the GIL while searching; downloads are I/O


def count_split(storage: Storage, add_file: Any, query: str | None, options: Options | None,
                filters: Sequence[Filter] = (), delete_logs: Sequence[Any] = ()) -> int:
    """Matching rows of one split, minus the rows its delete logs (log.actions.DeleteLog) delete."""
    from ..log.delete_logs import load_split_deletes

    deletes = load_split_deletes(storage, delete_logs, add_file.num_records, add_file.path)
    if query is None and not filters and add_file.num_records is not None \
            and (deletes is None or deletes.only_positions):
        return int(add_file.num_records) - (int(deletes.positions.size) if deletes is not None else 0)
    reader = SplitReader(get_cache(options).local_dir(storage, add_file))
    return reader.count(list(filters), query, deletes)


def count_matches(storage: Storage, snapshot: Any, files: Sequence[Any], query: str | None,
                  options: Options | dict | None = None, filters: Sequence[Filter] = ()) -> int:
    """Rows of `files` matching the query text (and filters); the snapshot is the table version read."""
    opts = options if isinstance(options, Options) else Options.of(options)
    files = list(files)
    if not files:
        return 0

    def one(f) -> int:
        return count_split(storage, f, query, opts, filters, snapshot.deletes_for(f) if snapshot is not None else ())

    if len(files) == 1:
        return one(files[0])
    with ThreadPoolExecutor(max_workers=min(MAX_THREADS, len(files))) as pool:
        return sum(pool.map(one, files))
