"""The rows of one split a read selects, as sorted row ids (ReadPlan.row_ids: the rows a vector
search may return, the rows DELETE removes), found the cheaper of two exact ways:

- the index alone, when its query answers the filters exactly and no row has to decide: term,
  range, IN and IS [NOT] NULL on indexed fast fields (integers, dates, timestamps, booleans, whole
  strings) and AND / OR / NOT of those (tantivy_query.build_query says `exact`); a full-text query
  and filters on index-only columns are always the index's. Its matches come back in row order
  (row_access.SplitRows.sorted_rows), minus the deleted positions: no row is read;
- the rows, for what the index cannot answer alone: filters on tokenized text, compact strings,
  floats, decimals, truncated strings, JSON and struct fields, columns a split lacks from its index;
  residual filters (on rows with their partition values); value deletes. The index's candidates
  are taken by id when few, else every live row is checked in one columnar pass: the columns the
  checks read, as one table over the memory-mapped record batches, one Arrow evaluation.

The index is asked only when it keeps few rows (INDEX_FRACTION; NARROW_SCAN_FRACTION when the rows
check its candidates): tantivy-py hands every match over as a Python object (~0.2-0.4 us each in
row order, more as the matches grow), where the columnar pass checks a row of a narrow column in
~3 ns. Counting the matches first is cheap (a term's postings, or the fast field in Rust).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.log.deletes.delete_logs import equality_hits
from indextables_spark.expr.arrow_eval import arrow_mask

if TYPE_CHECKING:
    from indextables_spark.core.log.deletes.delete_logs import SplitDeletes
    from indextables_spark.core.split.read.reader import SplitReader
    from indextables_spark.expr.model import Filter
    from indextables_spark.expr.search_query import SearchQuery

# The index lists its matches when they are at most this share of the split's rows (a hit in row
# order ~0.2-0.4 us, a row of the columnar pass ~0.003 us: measured on 100,000-row splits) ...
INDEX_FRACTION = 0.01
# ... and when the rows check its candidates (taken by id, a few more microseconds a batch)
NARROW_SCAN_FRACTION = 0.02

RowCheck = Callable[[pa.Table], pa.BooleanArray]  # rows (their stored columns) -> the rows kept


def selected_rows(
    split: SplitReader,
    filters: Sequence[Filter],
    query: SearchQuery | None,
    deletes: SplitDeletes | None,
    columns: Sequence[str] = (),
    residual: RowCheck | None = None,
) -> np.ndarray:
    """Sorted row ids of the split's live rows matching `query` and `filters` (exactly) and kept by
    `residual`, which is given the rows' stored `columns` (see the module docstring)."""
    rest, plan = split.search_plan(filters, query)  # SchemaMismatchError for a column it lacks
    q, exact, must_run = plan
    value_deletes = deletes is not None and not deletes.only_positions
    rows_decide = bool(rest and not exact) or residual is not None or value_deletes
    dead = deletes.positions if deletes is not None and deletes.positions.size else None
    if q is None and not rows_decide:  # no filter, no query: the live rows
        every = np.arange(split.num_rows, dtype=np.int64)
        return every if dead is None else every[~_among(every, dead)]
    hits: list[int] | None = None
    if q is not None:
        hits = split.matching_rows(plan, NARROW_SCAN_FRACTION if rows_decide else INDEX_FRACTION)
    if hits is not None and dead is not None:
        kept = np.asarray(hits, dtype=np.int64)
        hits = kept[~_among(kept, dead)].tolist()
    if hits is not None and not rows_decide:
        return np.asarray(hits, dtype=np.int64)
    checks = list(rest) if hits is None or not exact else []  # the index's exact answer needs no check
    needed = split.needed_columns(columns, checks, deletes)
    # every row: with no batch left out (none deleted whole), a row's position is its row id
    with_ids = hits is None and dead is not None
    pieces = list(split.source(hits, with_ids, needed, dead))
    if not pieces:
        return np.empty(0, np.int64)
    ids = np.asarray(hits, dtype=np.int64) if hits is not None else _ids(pieces) if with_ids else None
    table = pa.Table.from_batches([b for _, b in pieces])
    keep = _kept(table, ids, checks, deletes, dead if hits is None else None, residual)
    if keep is None:
        return ids if ids is not None else np.arange(table.num_rows, dtype=np.int64)
    at = _true_positions(keep)
    return ids[at] if ids is not None else at


def _ids(pieces: Sequence[tuple[pa.Array | None, pa.RecordBatch]]) -> np.ndarray:
    """The row ids of (row ids, batch) pieces, in one array."""
    parts = []
    for ids, _ in pieces:
        assert ids is not None  # asked for with ids
        parts.append(ids.to_numpy())
    return np.concatenate(parts).astype(np.int64, copy=False)


def _kept(
    rows: pa.Table,
    ids: np.ndarray | None,
    checks: Sequence[Filter],
    deletes: SplitDeletes | None,
    dead: np.ndarray | None,
    residual: RowCheck | None,
) -> pa.BooleanArray | None:
    """Which of these rows (row ids `ids`, given with `dead`) pass the checks, are not `dead`
    (sorted deleted row ids) nor equal to a deleted value, and pass `residual` (None: all)."""
    masks: list[pa.BooleanArray] = []
    if checks:
        masks.append(arrow_mask(rows, checks))
    if dead is not None and ids is not None:
        gone = _among(ids, dead)
        if gone.any():
            masks.append(pa.array(~gone))
    for where, values in deletes.equalities if deletes is not None else ():
        hit = equality_hits(rows, values, where)
        if hit is not None:
            masks.append(pc.invert(hit))
    if residual is not None:
        masks.append(residual(rows))
    if not masks:
        return None
    keep = masks[0]
    for m in masks[1:]:
        keep = pc.and_(keep, m)
    return keep


def _among(ids: np.ndarray, dead: np.ndarray) -> np.ndarray:
    """Which of these row ids are in `dead` (sorted, distinct)."""
    at = np.minimum(np.searchsorted(dead, ids), dead.size - 1)
    found: np.ndarray = dead[at] == ids
    return found


def _true_positions(mask: pa.BooleanArray | pa.ChunkedArray) -> np.ndarray:
    """Positions of a boolean array's true values, NULL counting as false: from its bitmap through
    numpy (3-4x cheaper than converting the array or Arrow's indices_nonzero)."""
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks()
    if mask.null_count:
        mask = pc.fill_null(mask, False)
    bits = np.unpackbits(np.frombuffer(mask.buffers()[1], np.uint8), bitorder="little")
    return np.flatnonzero(bits[mask.offset : mask.offset + len(mask)].view(bool))
