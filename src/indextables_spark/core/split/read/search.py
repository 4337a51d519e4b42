"""Spark-free reading of a table's splits: counting (IndexTable.count), searching and reading rows
(IndexTable.search/to_arrow/to_batches). The pieces the Spark reader shares: file_pruning.py and
split_rows.py; threads: split_threads.py; explain: search_explain.py."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.core.log.deletes.delete_logs import load_split_deletes
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.schema.types import check_snippet_fields
from indextables_spark.core.split.cache.cache import get_cache
from indextables_spark.core.split.read.prefetch import fetch_missing
from indextables_spark.core.split.read.split_threads import FETCH_THREADS, in_threads, map_chunks, matched_threads
from indextables_spark.core.split.format.column_specs import column_specs, table_options
from indextables_spark.core.split.reference.reference import with_reference_index_only
from indextables_spark.core.split.read.corpus_stats import fetch_for_stats, statistics_mode, table_stats, table_wide
from indextables_spark.core.split.read.plan import SNIPPET_COLUMN, ReadPlan, divide_conditions, ranked_top
from indextables_spark.core.split.read.file_pruning import prune_files, spark_type_names
from indextables_spark.core.split.read.query_parsing import plan_query, query_hits
from indextables_spark.core.split.read.vector.query import NearestQuery, check_vector_query, vector_columns
from indextables_spark.core.split.read.reader import DISTANCE_COLUMN, SCORE_COLUMN, SplitReader
from indextables_spark.core.split.read.split_rows import (
    joined,
    snippet_column,
    top_n,
    with_partition_values,
)
from indextables_spark.core.split.read.tantivy_query import check_index_only
from indextables_spark.core.storage.base import Storage
from indextables_spark.errors import InvalidOptionError, SchemaMismatchError
from indextables_spark.util.pools import shared_pool
from indextables_spark.expr.model import Filter, columns_of
from indextables_spark.expr.search_query import SearchQuery
from indextables_spark.expr.values import struct_column

if TYPE_CHECKING:
    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.core.log.deletes.delete_logs import SplitDeletes
    from indextables_spark.core.schema.types import ColumnSpec


def count_split(storage: Storage, plan: ReadPlan, add_file: Any, delete_logs: Sequence[Any] = ()) -> int:
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
    snapshot: Any,
    files: Sequence[Any],
    query: SearchQuery | None,
    options: Options | dict[str, Any] | None = None,
    filters: Sequence[Filter] = (),
) -> int:
    """Rows of `files` matching the query (and filters); the snapshot is the table version read
    (the query is planned for its splits' doc mappings: a bad one fails before a split opens)."""
    opts = options if isinstance(options, Options) else Options.of(options)
    files = list(files)
    if not files:
        return 0
    if query is not None and snapshot is not None:
        query = plan_query(snapshot, opts, query, files, every=True)
    parts = tuple(snapshot.partition_columns) if snapshot is not None else ()
    plan = ReadPlan(storage.uri, opts, parts, pa.schema([]), query, tuple(filters))

    def counts(chunk: list[Any]) -> list[int]:
        return [count_split(storage, plan, f, snapshot.deletes_for(f) if snapshot is not None else ()) for f in chunk]

    if query is not None or filters:  # else the log's row counts may answer without any split
        fetch_missing(storage, opts, files, plan.index_query, reads=plan.index_reads)  # only what it reads
    return sum(map_chunks(counts, files))


# ---- Spark-free search / read of a set of splits (IndexTable.search, to_arrow, to_batches) --------


class SearchPlan:
    """What one Spark-free read needs: the snapshot read, the output schema, the filters split into
    partition-only conjuncts (exact pruning), pushable data filters, and the rest (exact, Arrow)."""

    def __init__(
        self,
        storage: Storage,
        snapshot: Any,
        options: Options,
        conjuncts: Sequence[Filter],
        query: SearchQuery | None,
        columns: Sequence[str] | None,
        snippets: Sequence[str] | None = None,
        nearest: NearestQuery | None = None,
    ):
        self.storage, self.snapshot = storage, snapshot
        self.options, self.schema, self.specs = _table_layout(snapshot, options)
        self.nearest = nearest
        if nearest is not None:
            check_vector_query(self.specs, nearest, storage.uri)
            if snippets:
                raise InvalidOptionError(f"a vector search of {storage.uri} returns no snippets")
        names = self.schema.names
        if columns is not None:
            unknown = [c for c in columns if c not in names]
            if unknown:
                raise SchemaMismatchError(f"columns {unknown} are not in the table (columns: {names})")
        self.columns = list(columns) if columns is not None else list(names)
        self.snippets = tuple(snippets or ())
        check_snippet_fields(self.specs, self.snippets, storage.uri)
        self.parts = list(snapshot.partition_columns)

        parts = set(self.parts)
        self.conjuncts = list(conjuncts)
        # filters on index-only columns: the index answers them exactly, or the read fails now
        index_only = check_index_only(self.conjuncts, self.specs, f"a read of {storage.uri}")
        divided = divide_conditions(self.conjuncts, self.parts, self.specs, index_only)
        self.part_only, self.data_only = list(divided.partition_only), list(divided.data_only)
        self.pushed = list(divided.pushed)
        self.exact = [f for f in self.conjuncts if not any(f is g for g in self.part_only)]
        # data columns read from a split: the projection, the snippet fields, the filter columns
        from indextables_spark.expr.struct_narrowing import where_narrowing

        filter_cols = {struct_column(c, names) or c for f in self.exact for c in columns_of(f)}
        # struct-field conditions narrow unscored reads through the json field (checked on the rows too)
        specs_by_name = {s.name: s for s in self.specs}
        self.narrowing = [q for f in self.data_only if (q := where_narrowing(f, specs_by_name, names)) is not None]
        # the read's query: the text AND that narrowing (planned for the splits read: plan_query)
        self.query = SearchQuery.of(query, self.narrowing)
        self.read_names = [
            c for c in names if c not in parts and (c in self.columns or c in self.snippets or c in filter_cols)
        ]
        self.cache = get_cache(self.options)
        self._hits: dict[str, tuple[str, int]] = {}  # split path -> (its directory, query matches)
        # what every split runs (plan.py): the exact filters it takes; the residual — conditions
        # mixing partition and data columns, filters a split cannot take — is checked on rows with
        # partition values (ReadPlan.keep_residual: by `ranked` itself, on joined rows here)
        self.read = ReadPlan(
            storage.uri,
            self.options,
            tuple(self.parts),
            pa.schema([self.schema.field(c) for c in self.read_names]),
            self.query,
            tuple(self.pushed),
            divided.residual,
            self.snippets,
            nearest=nearest,
        )
        # only the query goes to the index (no pushed filter, narrowing or snippet): a remote
        # split's index files may be fetched only as far as it reads them (SplitCache.local_dir)
        self.index_query = self.read.index_query
        self.index_reads = self.read.index_reads
        self.mode = statistics_mode(self.options)

    @property
    def text(self) -> str | None:
        """The query's text (None: no full-text query; the read may still narrow by struct fields)."""
        return self.query.text if self.query is not None else None

    def ranking(self, limit: int | None) -> None:
        """Rank from here on: each split's best `limit` (every match without one), scored with the
        statistics of every live split of the version read (corpus_stats.py), unless
        `search.statistics` is `split` or the table has one split."""
        files = self.snapshot.files
        corpus = None
        if self.query is not None and self.text is not None and table_wide(self.mode, len(files)):
            corpus = table_stats(self.storage, self.options, self.snapshot.version, files, self.query)
        self.read = self.read.with_ranking(limit, corpus)

    def statistics_fetch(self, read: Sequence[AddFile]) -> Future[None] | None:
        """Start fetching, in a thread, what a ranked read's statistics (`ranking`) look up in the
        splits it does not read, so that those request rounds overlap the read's own fetch."""
        files = self.snapshot.files
        if self.query is None or self.text is None or not table_wide(self.mode, len(files)):
            return None
        if len(read) == len(files):
            return None
        version, query = self.snapshot.version, self.query
        # (a thread of its own: the fetch itself runs on the shared fetch pool, as the read's does)
        return shared_pool("statistics", 4).submit(
            fetch_for_stats, self.storage, self.options, version, files, query, read
        )

    def live_files(self) -> list[AddFile]:
        """Partition pruning, min/max data skipping and Bloom filters, as the Spark reader's planner."""
        types = {c: t for c, t in spark_type_names(self.snapshot).items() if c in self.parts}
        return prune_files(
            self.storage.uri, self.options, self.snapshot, self.part_only, self.data_only, self.parts, types, self.specs
        )[0]

    def matching(self, files: Sequence[Any]) -> list[Any]:
        """The cached splits among `files` whose index matches the query (every one without a
        query, with a struct-field narrowing, which joins the query, or with a query not
        cheap to count: query_parsing.query_hits): a split without a match costs its cache entry, the
        query built for its doc mapping (kept) and Tantivy's count (a few microseconds), and is
        not opened further. Filters and deletes only remove rows, so they cannot make a split
        without a query match return rows. The counts are kept for the reads (matching_rows does
        not count again) and for map_chunks."""
        if self.query is None or self.narrowing:
            return list(files)

        kept = []
        for f in files:
            local = self.cache.local_dir(self.storage, f, self.index_query, reads=self.index_reads)
            n = query_hits(local, self.query)
            if n is None:
                kept.append(f)
            elif n:
                self._hits[f.path] = (local, n)
                kept.append(f)
        return kept

    def match_counts(self, files: Sequence[Any]) -> list[int] | None:
        """The query's matches in each of `files` (all counted by `matching`), else None."""
        counts = [self._hits.get(f.path) for f in files]
        return [c[1] for c in counts if c is not None] if all(c is not None for c in counts) else None

    def plan_query(self, files: Sequence[Any]) -> None:
        """Plan the query for the splits read: analysed once per doc mapping of `files` (the value
        the ReadPlan holds: every split reuses it), QueryParseError for a query one of them
        cannot parse (as every route), before a split is opened."""
        if self.query is not None:
            plan_query(self.snapshot, self.options, self.query, list(files), every=True)

    def out_schema(self, scored: bool) -> pa.Schema:
        fields = [self.schema.field(c) for c in self.columns]
        if self.nearest is not None:
            if self.nearest.fusion is not None:
                fields.append(pa.field(SCORE_COLUMN, pa.float32()))
            fields.append(pa.field(DISTANCE_COLUMN, pa.float64()))
            return pa.schema(fields)
        if scored:
            fields.append(pa.field(SCORE_COLUMN, pa.float32()))
        if self.snippets:
            t = pa.string() if len(self.snippets) == 1 else pa.map_(pa.string(), pa.string())
            fields.append(pa.field(SNIPPET_COLUMN, t))
        return pa.schema(fields)

    # ---- one split ----------------------------------------------------------------------------
    def _full_schema(self, scored: bool) -> pa.Schema:
        """The columns a split's rows are completed to: partition and read columns (+ `_score`)."""
        fields = [f for f in self.schema if f.name in self.parts or f.name in self.read_names]
        return pa.schema(fields + ([pa.field(SCORE_COLUMN, pa.float32())] if scored else []))

    def _full(self, table: pa.Table | pa.RecordBatch, add: Any) -> pa.Table:
        """Rows of a split with the partition values and the columns the split lacks (NULL) attached."""
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        out: pa.Table = with_partition_values(
            [(add, table)], self._full_schema(SCORE_COLUMN in table.schema.names), self.parts
        )
        return out

    def _finish(self, table: pa.Table, split: SplitReader | None, scored: bool) -> pa.Table:
        """The residual filters applied, the snippets (from `split`, given when there are snippet
        fields) attached, the output columns selected."""

        table = self.read.keep_residual(table)
        if self.snippets:
            snip = snippet_column(split, table, self.query, self.snippets)
            table = table.append_column(SNIPPET_COLUMN, snip)
        return table.select(
            self.columns + ([SCORE_COLUMN] if scored else []) + ([SNIPPET_COLUMN] if self.snippets else [])
        )

    def _open(self, add: Any) -> tuple[SplitReader, SplitDeletes | None]:
        known = self._hits.get(add.path)
        split = SplitReader(
            known[0]
            if known is not None
            else self.cache.local_dir(self.storage, add, self.index_query, reads=self.index_reads)
        )
        if known is not None and self.query is not None:
            split.hits_hint = (split.tantivy_query(self.query), known[1])
        deletes = load_split_deletes(self.storage, self.snapshot.deletes_for(add), split.num_rows, add.path)
        return split, deletes

    def _split_batches(self, add: Any, batch_rows: int) -> tuple[SplitReader, Iterator[pa.RecordBatch]]:
        """(the split, its rows matching the query and the filters in row order, data columns only)."""

        split, deletes = self._open(add)
        read = self.read if batch_rows == self.read.batch_rows else replace(self.read, batch_rows=batch_rows)
        return split, read.rows(split, deletes)

    def read_split(self, add: Any, batch_rows: int = 65536) -> Iterator[pa.Table]:
        """Rows of one split matching the query and the filters, in row order (no score)."""
        split, batches = self._split_batches(add, batch_rows)
        for batch in batches:
            out = self._finish(self._full(batch, add), split, False)
            if out.num_rows:
                yield out

    def read_splits(self, files: Sequence[Any], batch_rows: int = 65536) -> Iterator[pa.Table]:
        """Rows of the splits matching the query and the filters, split by split in row order (no
        score). The splits' rows are joined before their partition values are attached and the
        rest of the filters run, as a Spark task does: with hundreds of splits of a few matches
        each, per-split work is the cost. Snippets are made split by split (from its index)."""
        if self.snippets:
            for add in files:
                yield from self.read_split(add, batch_rows)
            return

        def pieces() -> Iterator[tuple[Any, pa.RecordBatch]]:
            for add in files:  # (ReadPlan.rows gives the plan's data_schema)
                for batch in self._split_batches(add, batch_rows)[1]:
                    yield add, batch

        for batch in joined(pieces(), batch_rows, self._full_schema(False), self.parts):
            out = self._finish(pa.Table.from_batches([batch]), None, False)
            if out.num_rows:
                yield out

    def search_top(self, files: Sequence[Any], limit: int, weights: Sequence[int] | None) -> pa.Table:
        """The global top `limit` of the splits' matches with `_score`, best first (the plan's
        `ranking(limit)`), in two phases (plan.ranked_top): scores and row ids of every split,
        then the rows of the winners only."""
        table = ranked_top(
            self.read,
            list(files),
            self._open,
            self._full_schema(True),
            in_threads("search", matched_threads(files, weights)),
            in_threads("fetch-rows", FETCH_THREADS),
        )
        return table.select(self.columns + [SCORE_COLUMN] + ([SNIPPET_COLUMN] if self.snippets else []))

    def search_split(self, add: Any) -> pa.Table:
        """Matches of one split with `_score`, best first (the plan's `ranking`)."""
        split, deletes = self._open(add)
        table = self.read.ranked(split, add, deletes, self._full_schema(True))
        return table.select(self.columns + [SCORE_COLUMN] + ([SNIPPET_COLUMN] if self.snippets else []))


_Layout = tuple[Options, pa.Schema, list["ColumnSpec"]]
_last_layout: tuple[()] | tuple[Any, Options, _Layout] = ()  # (snapshot, options, layout)


def _table_layout(snapshot: Any, options: Options) -> _Layout:
    """(read options = table configuration + `options`, Arrow schema, column specs) of a snapshot.
    The last one is kept: a service searching one table asks for the same snapshot per request."""
    global _last_layout
    last = _last_layout
    if last and last[0] is snapshot and last[1] is options:
        return last[2]

    opts = table_options(snapshot, options)
    layout = (
        opts,
        arrow_schema(snapshot.schema_json),
        with_reference_index_only(column_specs(snapshot.schema_json, list(snapshot.partition_columns), opts), snapshot),
    )
    _last_layout = (snapshot, options, layout)
    return layout


def table_vector_columns(snapshot: Any, options: Options) -> list[str]:
    """The vector columns of a table version (its recorded settings under these options)."""
    return vector_columns(_table_layout(snapshot, options)[2])


def search_table(plan: SearchPlan, limit: int | None = None, *, scored: bool = False) -> pa.Table:
    """Every match of the plan's splits (fetched in parallel, searched in map_chunks); with a query
    and a limit (or `scored`), with `_score`, best first: the global top `limit`, or every match.
    (A vector search is read/vector/table_search.py's nearest_table.)"""
    if plan.nearest is not None:
        raise InvalidOptionError("a vector search of a table is vector/table_search.nearest_table's")
    files = plan.live_files()
    plan.plan_query(files)
    scored = plan.text is not None and (limit is not None or scored)
    schema = plan.out_schema(scored)
    if (limit is not None and limit <= 0) or not files:
        return schema.empty_table()
    statistics = plan.statistics_fetch(files) if scored else None
    # (a scored read takes the rows of its top matches only: no prefetch of every match's rows)
    fetch_missing(
        plan.storage,
        plan.options,
        files,
        plan.index_query,
        None if scored else plan.read_names,
        reads=plan.index_reads,
    )
    if statistics is not None:
        statistics.result()
    files = plan.matching(files)
    weights = plan.match_counts(files)
    if scored and limit is not None:
        plan.ranking(limit)
        return plan.search_top(files, limit, weights).cast(schema).combine_chunks()
    if scored:
        plan.ranking(limit)
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
    files = plan.live_files()
    plan.plan_query(files)
    schema = plan.out_schema(False)

    def gen() -> Iterator[pa.RecordBatch]:
        for f in files:
            if plan.text is not None and not plan.matching([f]):
                continue
            for t in plan.read_split(f, batch_rows):
                yield from t.cast(schema).to_batches()

    return pa.RecordBatchReader.from_batches(schema, gen())
