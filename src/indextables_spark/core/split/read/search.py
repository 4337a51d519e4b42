"""Spark-free reading of a table's splits, as the scan (scan.py) planned it: counting
(IndexTable.count), searching and reading rows (IndexTable.search/to_arrow/to_batches). The pieces
the Spark tasks share: plan.py and split_rows.py; threads: split_threads.py; explain:
search_explain.py."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.core.log.deletes.delete_logs import load_split_deletes
from indextables_spark.core.split.cache.cache import get_cache
from indextables_spark.core.split.read.prefetch import fetch_missing
from indextables_spark.core.split.read.split_threads import FETCH_THREADS, in_threads, map_chunks, matched_threads
from indextables_spark.core.split.read.plan import SNIPPET_COLUMN, ReadPlan, ranked_top
from indextables_spark.core.split.read.query_parsing import query_hits
from indextables_spark.core.split.read.reader import SCORE_COLUMN, SplitReader
from indextables_spark.core.split.read.scan import TableScan
from indextables_spark.core.split.read.split_rows import (
    joined,
    snippet_column,
    top_n,
    with_partition_values,
)
from indextables_spark.core.storage.base import Storage
from indextables_spark.errors import InvalidOptionError
from indextables_spark.expr.search_query import SearchQuery

if TYPE_CHECKING:
    from indextables_spark.core.log.model.actions import AddFile, DeleteLog
    from indextables_spark.core.log.deletes.delete_logs import SplitDeletes
    from indextables_spark.core.log.read.snapshot import Snapshot


def count_split(storage: Storage, plan: ReadPlan, add_file: AddFile, delete_logs: Sequence[DeleteLog] = ()) -> int:
    """Matching rows of one split under `plan` (ReadPlan.count), minus the rows its delete logs
    (log.actions.DeleteLog) delete."""
    deletes = load_split_deletes(storage, delete_logs, add_file.num_records, add_file.path)
    return plan.count(
        add_file,
        deletes,
        lambda: SplitReader(
            get_cache(plan.options).local_dir(storage, add_file, plan.index_query, reads=plan.index_reads)
        ),
    )


def count_matches(
    storage: Storage,
    snapshot: Snapshot,
    files: Sequence[AddFile],
    query: SearchQuery | None,
    options: Options | dict[str, Any] | None = None,
) -> int:
    """Rows of `files` (of the table version `snapshot`) matching the query: the scan plans the
    query for their doc mappings (a bad one fails before a split opens)."""
    opts = options if isinstance(options, Options) else Options.of(options)
    files = list(files)
    if not files:
        return 0
    scan = TableScan(storage, snapshot, opts, query=query, columns=())
    scan.plan_query(files)
    plan = scan.read

    def counts(chunk: list[AddFile]) -> list[int]:
        return [count_split(storage, plan, f, snapshot.deletes_for(f)) for f in chunk]

    if query is not None:  # else the log's row counts may answer without any split
        fetch_missing(storage, scan.options, files, plan.index_query, reads=plan.index_reads)  # only what it reads
    return sum(map_chunks(counts, files))


# ---- Spark-free search / read of a set of splits (IndexTable.search, to_arrow, to_batches) --------


class SearchPlan:
    """A TableScan (scan.py: the one planner) read in this process: the splits it reads (`files`,
    the scan's `live_files`), the split cache, the query's match counts the first look at each
    split found, and the reads."""

    def __init__(self, scan: TableScan, files: Sequence[AddFile]):
        self.scan = scan
        self.files = list(files)
        self.cache = get_cache(scan.options)
        self._hits: dict[str, tuple[str, int]] = {}  # split path -> (its directory, query matches)

    def matching(self, files: Sequence[AddFile]) -> list[AddFile]:
        """The cached splits among `files` whose index matches the query (every one without a
        query, with a struct-field narrowing, which joins the query, or with a query not
        cheap to count: query_parsing.query_hits): a split without a match costs its cache entry, the
        query built for its doc mapping (kept) and Tantivy's count (a few microseconds), and is
        not opened further. Filters and deletes only remove rows, so they cannot make a split
        without a query match return rows. The counts are kept for the reads (matching_rows does
        not count again) and for map_chunks."""
        if self.scan.query is None or self.scan.narrowing:
            return list(files)

        kept = []
        for f in files:
            local = self.cache.local_dir(self.scan.storage, f, self.scan.index_query, reads=self.scan.index_reads)
            n = query_hits(local, self.scan.query)
            if n is None:
                kept.append(f)
            elif n:
                self._hits[f.path] = (local, n)
                kept.append(f)
        return kept

    def match_counts(self, files: Sequence[AddFile]) -> list[int] | None:
        """The query's matches in each of `files` (all counted by `matching`), else None."""
        counts = [self._hits.get(f.path) for f in files]
        return [c[1] for c in counts if c is not None] if all(c is not None for c in counts) else None

    # ---- one split ----------------------------------------------------------------------------
    def _full(self, table: pa.Table | pa.RecordBatch, add: AddFile) -> pa.Table:
        """Rows of a split with the partition values and the columns the split lacks (NULL) attached."""
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        out: pa.Table = with_partition_values(
            [(add, table)], self.scan.row_schema(SCORE_COLUMN in table.schema.names), self.scan.parts
        )
        return out

    def _finish(self, table: pa.Table, split: SplitReader | None, scored: bool) -> pa.Table:
        """The residual filters applied, the snippets (from `split`, given when there are snippet
        fields) attached, the output columns selected."""

        table = self.scan.read.keep_residual(table)
        if self.scan.snippets:
            snip = snippet_column(split, table, self.scan.query, self.scan.snippets)
            table = table.append_column(SNIPPET_COLUMN, snip)
        return table.select(
            self.scan.columns + ([SCORE_COLUMN] if scored else []) + ([SNIPPET_COLUMN] if self.scan.snippets else [])
        )

    def _open(self, add: AddFile) -> tuple[SplitReader, SplitDeletes | None]:
        known = self._hits.get(add.path)
        split = SplitReader(
            known[0]
            if known is not None
            else self.cache.local_dir(self.scan.storage, add, self.scan.index_query, reads=self.scan.index_reads)
        )
        if known is not None and self.scan.query is not None:
            split.hits_hint = (split.tantivy_query(self.scan.query), known[1])
        deletes = load_split_deletes(self.scan.storage, self.scan.snapshot.deletes_for(add), split.num_rows, add.path)
        return split, deletes

    def _split_batches(self, add: AddFile, batch_rows: int) -> tuple[SplitReader, Iterator[pa.RecordBatch]]:
        """(the split, its rows matching the query and the filters in row order, data columns only)."""

        split, deletes = self._open(add)
        read = (
            self.scan.read
            if batch_rows == self.scan.read.batch_rows
            else replace(self.scan.read, batch_rows=batch_rows)
        )
        return split, read.rows(split, deletes)

    def read_split(self, add: AddFile, batch_rows: int = 65536) -> Iterator[pa.Table]:
        """Rows of one split matching the query and the filters, in row order (no score)."""
        split, batches = self._split_batches(add, batch_rows)
        for batch in batches:
            out = self._finish(self._full(batch, add), split, False)
            if out.num_rows:
                yield out

    def read_splits(self, files: Sequence[AddFile], batch_rows: int = 65536) -> Iterator[pa.Table]:
        """Rows of the splits matching the query and the filters, split by split in row order (no
        score). The splits' rows are joined before their partition values are attached and the
        rest of the filters run, as a Spark task does: with hundreds of splits of a few matches
        each, per-split work is the cost. Snippets are made split by split (from its index)."""
        if self.scan.snippets:
            for add in files:
                yield from self.read_split(add, batch_rows)
            return

        def pieces() -> Iterator[tuple[AddFile, pa.RecordBatch]]:
            for add in files:  # (ReadPlan.rows gives the plan's data_schema)
                for batch in self._split_batches(add, batch_rows)[1]:
                    yield add, batch

        for batch in joined(pieces(), batch_rows, self.scan.row_schema(False), self.scan.parts):
            out = self._finish(pa.Table.from_batches([batch]), None, False)
            if out.num_rows:
                yield out

    def search_top(self, files: Sequence[AddFile], limit: int, weights: Sequence[int] | None) -> pa.Table:
        """The global top `limit` of the splits' matches with `_score`, best first (the plan's
        `ranking(limit)`), in two phases (plan.ranked_top): scores and row ids of every split,
        then the rows of the winners only."""
        table = ranked_top(
            self.scan.read,
            list(files),
            self._open,
            self.scan.row_schema(True),
            in_threads("search", matched_threads(files, weights)),
            in_threads("fetch-rows", FETCH_THREADS),
        )
        return table.select(self.scan.columns + [SCORE_COLUMN] + ([SNIPPET_COLUMN] if self.scan.snippets else []))

    def search_split(self, add: AddFile) -> pa.Table:
        """Matches of one split with `_score`, best first (the plan's `ranking`)."""
        split, deletes = self._open(add)
        table = self.scan.read.ranked(split, add, deletes, self.scan.row_schema(True))
        return table.select(self.scan.columns + [SCORE_COLUMN] + ([SNIPPET_COLUMN] if self.scan.snippets else []))


def search_table(plan: SearchPlan, limit: int | None = None, *, scored: bool = False) -> pa.Table:
    """Every match of the plan's splits (fetched in parallel, searched in map_chunks); with a query
    and a limit (or `scored`), with `_score`, best first: the global top `limit`, or every match.
    (A vector search is read/vector/table_search.py's nearest_table.)"""
    if plan.scan.nearest is not None:
        raise InvalidOptionError("a vector search of a table is vector/table_search.nearest_table's")
    files = plan.files
    scored = plan.scan.text is not None and (limit is not None or scored)
    schema = plan.scan.out_schema(scored)
    if (limit is not None and limit <= 0) or not files:
        return schema.empty_table()
    statistics = plan.scan.statistics_fetch(files) if scored else None
    # (a scored read takes the rows of its top matches only: no prefetch of every match's rows)
    fetch_missing(
        plan.scan.storage,
        plan.scan.options,
        files,
        plan.scan.index_query,
        None if scored else plan.scan.read_names,
        reads=plan.scan.index_reads,
    )
    if statistics is not None:
        statistics.result()
    files = plan.matching(files)
    weights = plan.match_counts(files)
    if scored and limit is not None:
        plan.scan.ranking(limit)
        return plan.search_top(files, limit, weights).cast(schema).combine_chunks()
    if scored:
        plan.scan.ranking(limit)
        tables = map_chunks(lambda chunk: [plan.search_split(f) for f in chunk], files, weights)
    else:
        tables = map_chunks(lambda chunk: list(plan.read_splits(chunk)), files, weights)
    if not tables:
        return schema.empty_table()
    out = pa.concat_tables([t.cast(schema) if not t.schema.equals(schema) else t for t in tables])
    if scored:
        out = top_n(out, limit) if limit is not None else out.sort_by([(SCORE_COLUMN, "descending")])
    elif limit is not None:
        out = out.slice(0, limit)
    return out.combine_chunks()


def stream_table(plan: SearchPlan, batch_rows: int = 65536) -> pa.RecordBatchReader:
    """The plan's rows split by split (one split's matches in memory at a time), in row order."""
    files = plan.files
    schema = plan.scan.out_schema(False)

    def gen() -> Iterator[pa.RecordBatch]:
        for f in files:
            if plan.scan.text is not None and not plan.matching([f]):
                continue
            for t in plan.read_split(f, batch_rows):
                yield from t.cast(schema).to_batches()

    return pa.RecordBatchReader.from_batches(schema, gen())
