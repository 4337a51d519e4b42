"""The rows of one split a read selects, as sorted row ids (ReadPlan.row_ids: the rows a vector
search may return, the rows DELETE removes), found the cheaper of two exact ways:

- the index alone, when its query answers the filters exactly, no row has to decide and listing
  its matches is the cheaper way (below). It answers exactly: term, range, IN and IS [NOT] NULL
  on indexed fast fields (integers, dates, timestamps, booleans, whole strings) and AND / OR /
  NOT of those (tantivy_query.build_query says `exact`); a full-text query and filters on
  index-only columns are always the index's. Its matches come back in row order
  (row_access.SplitRows.sorted_rows), minus the deleted positions: no row is read;
- the rows, for what the index cannot answer alone: filters on tokenized text, compact strings,
  floats, decimals, truncated strings, JSON and struct fields; residual filters (on rows with
  their partition values); value deletes. The index's candidates are taken by id when few, else
  every live row is checked in one columnar pass: the columns the checks read, as one table over
  the memory-mapped record batches, one Arrow evaluation.

Which is cheaper (measured on splits of 100,000 rows): tantivy-py hands every match over as a
Python object, ~0.15-0.4 us each in row order, where the columnar pass checks a row of a narrow
column in ~1.5-3 ns (0.15 ms for an int column of 100,000 rows). So the index lists its matches
only when they are few (INDEX_FRACTION of the rows; NARROW_SCAN_FRACTION when the rows check its
candidates), and counts them first only when the count is cheap: terms' postings (=, IN). A
range, IS [NOT] NULL or NOT is counted by scanning the fast field, as dear as the pass itself
(0.16 ms for `sel < 10` there), so those filters go to the pass at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.log.deletes.delete_logs import equality_hits
from indextables_spark.core.schema.types import specs_by_name
from indextables_spark.expr.arrow_eval import arrow_mask
from indextables_spark.expr.model import And, EqualNullSafe, EqualTo, In, Or
from indextables_spark.expr.values import lookup_spec

if TYPE_CHECKING:
    from indextables_spark.core.log.deletes.delete_logs import SplitDeletes
    from indextables_spark.core.schema.types import ColumnSpec
    from indextables_spark.core.split.read.reader import SplitReader
    from indextables_spark.expr.model import Filter
    from indextables_spark.expr.search_query import SearchQuery

# The index lists its matches when they are at most this share of the split's rows (module docstring) ...
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
    if q is not None and (must_run or _counted_by_postings(rest, specs_by_name(split.specs))):
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


def _counted_by_postings(filters: Sequence[Filter], specs: Mapping[str, ColumnSpec]) -> bool:
    """Whether the index counts the filters' matches from terms' postings (=, <=> and IN on a
    column indexed by terms, AND / OR of those): the count costs about the matches. A range, an IS
    [NOT] NULL or a NOT is a scan of the column's fast field (Tantivy's range and exists queries),
    a pattern a walk of its terms: as dear as the columnar pass, which then runs alone."""

    def terms(f: Filter) -> bool:
        if isinstance(f, (And, Or)):
            return terms(f.left) and terms(f.right)
        if isinstance(f, (EqualTo, EqualNullSafe)) and f.value is None:
            return False
        if isinstance(f, (EqualTo, EqualNullSafe, In)):
            spec = lookup_spec(specs, f.column)
            return spec is None or spec.kind not in ("f64", "decimal")  # (those are ranges)
        return False

    return all(terms(f) for f in filters)


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
