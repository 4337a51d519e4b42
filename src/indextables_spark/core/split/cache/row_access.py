"""Where a split's rows come from and how its index's documents name them: the one seam between
the readers (read/reader.py's SplitReader, read/plan.py, aggregate/) and a split's layout.

A row id is a row's position in the split (0 .. num_rows-1, in document order). Two layouts:
- ours (`IpcRows`, here): the rows are Arrow IPC record batches (rows.arrow, or a RowStore read
  by ranges or from a companion's Parquet files) and every document holds its row id in the `__row`
  fast field;
- the reference implementation's (`reference/docstore.py` StoredDocs): the rows are Tantivy's
  document store, a row id is the document's position among the index's live documents.
Readers ask this object, never the layout: sorted row ids of a query's matches, the row ids of
scored hits, rows by id, every row, and the query without some rows (deletes)."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Iterator, Protocol, Sequence, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.schema.types import ROW_FIELD
from indextables_spark.core.split.format.row_layout import live_batches

if TYPE_CHECKING:
    import tantivy

FEW_ROWS = 16  # rows of one record batch gathered by slicing rather than `take` (_gather_few)
SCAN_AHEAD = 16  # batches a scan fetches at once from a row store read by ranges


class SplitRows(Protocol):
    """A split's rows and their ids (see the module docstring)."""

    schema: pa.Schema  # the stored columns
    num_rows: int

    def sorted_rows(self, searcher: tantivy.Searcher, query: tantivy.Query, limit: int) -> list[int]:
        """Row ids of the query's first `limit` matches in row order (limit >= the matches: all)."""
        ...

    def hit_rows(self, searcher: tantivy.Searcher, addresses: Sequence[tantivy.DocAddress]) -> list[int]:
        """Row ids of these documents (tantivy DocAddresses of a search's hits), in their order."""
        ...

    def take(self, rows: list[int], columns: Sequence[str] | None) -> Iterator[tuple[pa.Array, pa.RecordBatch]]:
        """(row ids, batch) of the rows with these sorted ids, only `columns` when given."""
        ...

    def scan(
        self, with_ids: bool, columns: Sequence[str] | None, dead: np.ndarray | None = None
    ) -> Iterator[tuple[pa.Array | None, pa.RecordBatch]]:
        """(row ids or None, batch) of every row in row order; a batch all of whose rows are `dead`
        (sorted row ids: deleted) may be left out, never read."""
        ...

    def local(self, rows: list[int], columns: Sequence[str] | None) -> bool:
        """Whether taking these rows (sorted ids) reads nothing from object storage."""
        ...

    def without_rows(self, schema: tantivy.Schema, query: tantivy.Query | None, dead: np.ndarray) -> tantivy.Query:
        """The Tantivy query (None: every document) minus the documents of these sorted row ids."""
        ...


class Batches(Protocol):
    """Record batches by position (open_splits.SplitHandles: the row store, projected)."""

    @property
    def ranged(self) -> bool:
        """Whether the batches are read by ranges from object storage (prefetch and has matter)."""
        ...

    def batch(self, i: int, columns: Sequence[str] | None = None) -> pa.RecordBatch: ...

    def prefetch(self, batches: Sequence[int], columns: Sequence[str] | None = None) -> None:
        """Fetch at once what reading these batches will (a row store read by ranges)."""
        ...

    def has(self, batches: Sequence[int], columns: Sequence[str] | None = None) -> bool:
        """Whether reading these batches reads nothing from object storage."""
        ...


def _gather_few(batch: pa.RecordBatch, rows: list[int], start: int) -> pa.RecordBatch:
    """Rows (sorted ids, batch starting at row id `start`) of a batch as zero-copy slices of
    their runs, joined: for a few rows, 3-4x cheaper than `take`, whose per-column kernel
    dispatch dominates (2 rows of 9 columns: 8 us against 29 us)."""
    pieces = []
    run_start = prev = rows[0]
    for r in rows[1:]:
        if r != prev + 1:
            pieces.append(batch.slice(run_start - start, prev - run_start + 1))
            run_start = r
        prev = r
    pieces.append(batch.slice(run_start - start, prev - run_start + 1))
    return pieces[0] if len(pieces) == 1 else pa.concat_batches(pieces)


class IpcRows:
    """Our layout: Arrow record batches (SplitHandles.batch) and the `__row` fast field."""

    def __init__(self, handles: Batches, schema: pa.Schema, num_rows: int, batch_starts: list[int]) -> None:
        self._h = handles
        self._ranged = handles.ranged
        self.schema = schema
        self.num_rows = num_rows
        self._starts = batch_starts

    def sorted_rows(self, searcher: tantivy.Searcher, query: tantivy.Query, limit: int) -> list[int]:
        import tantivy  # lazy: keeps `import indextables_spark.core.split.cache.row_access` free of tantivy

        res = searcher.search(query, limit, count=False, order_by_field=ROW_FIELD, order=tantivy.Order.Asc)
        return [k for k, _ in res.hits]

    def hit_rows(self, searcher: tantivy.Searcher, addresses: Sequence[tantivy.DocAddress]) -> list[int]:
        # `__row` is an unsigned fast field: its values are ints, never None
        return cast(list[int], searcher.fast_field_values(ROW_FIELD, list(addresses))) if addresses else []

    def take(self, rows: list[int], columns: Sequence[str] | None) -> Iterator[tuple[pa.Array, pa.RecordBatch]]:
        """Gathered batch by batch. Projecting before the gather matters: taking 1,000 rows of a
        wide batch copies every column's values."""
        all_rows = pa.array(rows, pa.int64())
        if self._ranged:
            self._h.prefetch(self._touched(rows), columns)
        i = 0
        while i < len(rows):
            b = bisect.bisect_right(self._starts, rows[i]) - 1
            end = bisect.bisect_left(rows, self._starts[b + 1], i)
            ids = all_rows.slice(i, end - i)
            batch = self._h.batch(b, columns)
            start = self._starts[b]
            if end - i <= FEW_ROWS:
                yield ids, _gather_few(batch, rows[i:end], start)
            else:
                yield ids, batch.take(pc.subtract(ids, start))  # batch-local positions
            i = end

    def _touched(self, rows: list[int]) -> list[int]:
        """The record batches holding these row ids."""
        return list(
            np.unique(np.searchsorted(self._starts, np.asarray(rows, dtype=np.int64), side="right") - 1).tolist()
        )

    def local(self, rows: list[int], columns: Sequence[str] | None) -> bool:
        return not self._ranged or self._h.has(self._touched(rows), columns)

    def scan(
        self, with_ids: bool, columns: Sequence[str] | None, dead: np.ndarray | None = None
    ) -> Iterator[tuple[pa.Array | None, pa.RecordBatch]]:
        """Deleted batches are skipped: a companion split's file the source removed may be gone."""
        live = live_batches(self._starts, dead)
        for n, i in enumerate(live):
            if self._ranged and n % SCAN_AHEAD == 0:
                self._h.prefetch(live[n : n + SCAN_AHEAD], columns)
            ids = pa.array(np.arange(self._starts[i], self._starts[i + 1], dtype=np.int64)) if with_ids else None
            yield ids, self._h.batch(i, columns)

    def without_rows(self, schema: tantivy.Schema, query: tantivy.Query | None, dead: np.ndarray) -> tantivy.Query:
        """A range per run of consecutive ids on the `__row` fast field, so the index never sees
        deleted rows."""
        import tantivy  # lazy: keeps `import indextables_spark.core.split.cache.row_access` free of tantivy

        breaks = np.flatnonzero(np.diff(dead) != 1) + 1
        ranges = [
            tantivy.Query.range_query(schema, ROW_FIELD, tantivy.FieldType.Unsigned, int(run[0]), int(run[-1]))
            for run in np.split(dead, breaks)
        ]
        gone = (
            ranges[0] if len(ranges) == 1 else tantivy.Query.boolean_query([(tantivy.Occur.Should, r) for r in ranges])
        )
        return tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Must, query if query is not None else tantivy.Query.all_query()),
                (tantivy.Occur.MustNot, gone),
            ]
        )
