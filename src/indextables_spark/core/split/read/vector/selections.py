"""The rows of a split that a vector search's filters, query and deletes select, kept for the next
search with the same selection (Elasticsearch keeps filter bitsets per segment so, its query
cache): a service or a batch that searches one table under one filter (a tenant, a category)
computes each split's selection once.

A selection depends only on immutable things: the split (its extracted directory names its file
and size), the filters and query text it applies, and the split's deletes in the table version
read (their row ids, and the logs of value deletes), all of which the key holds. Entries weigh
their row ids' bytes; SELECTIONS_BYTES bounds them (util/lru.py). Option
`cache.selections.enabled` (default true) turns it off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Hashable

import numpy as np

from indextables_spark.util.lru import LruCache

if TYPE_CHECKING:
    from indextables_spark.core.log.deletes.delete_logs import SplitDeletes

SELECTIONS_BYTES = 64 * 1024 * 1024  # 8M row ids: 10% of 80M rows
_selections: LruCache[np.ndarray] = LruCache(None, max_weight=SELECTIONS_BYTES, weigh=lambda a: int(a.nbytes) + 64)


def deletes_key(deletes: SplitDeletes | None) -> Hashable:
    """What identifies a split's deletes: its deleted row ids and the logs of its value deletes."""
    if deletes is None:
        return None
    return (deletes.positions.tobytes(), tuple(where for where, _values in deletes.equalities))


def selection(key: Hashable, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """The sorted row ids stored under `key`, else `compute()`'s (stored read-only: searches share it)."""
    return _selections.get_or_build(key, lambda: _read_only(compute()))


def _read_only(rows: np.ndarray) -> np.ndarray:
    rows.flags.writeable = False
    return rows


def clear() -> None:
    """Forget every selection (tests)."""
    _selections.clear()
