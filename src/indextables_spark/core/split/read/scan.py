"""TableScan: the one planner of a read. Every route only feeds it what it was asked — the
Spark-free API (search, to_arrow, to_batches, count, aggregate, explain), the Spark driver
(spark/reader.py: what Spark pushed), streaming (a micro-batch's splits), DELETE
(ops/write/delete.py), the SQL routes and the table functions — and runs what it returns.

In: the table version (snapshot), the options, the conditions the read decides, the conditions
someone else re-checks (Spark's pushed filters), the query value (expr/search_query.py), the
nearest query, the columns, the snippet fields and the limit. Out: the splits to read
(`plan_files`: partition pruning, min/max skipping, Bloom filters; each a SplitTask with its delete
logs) and one ReadPlan (read/plan.py) that every split runs. The checks a read refuses with are
made here, once, with one exception class per kind whatever the route (tests/test_refusals.py).
"""

from __future__ import annotations

import copy
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.schema.types import check_snippet_fields
from indextables_spark.core.split.cache.fetch_plan import IndexQuery
from indextables_spark.core.split.format.column_specs import column_specs, table_options
from indextables_spark.core.split.read.corpus_stats import (
    CorpusStats,
    fetch_for_stats,
    statistics_mode,
    table_stats,
    table_wide,
)
from indextables_spark.core.split.read.file_pruning import prune_files, spark_type_names
from indextables_spark.core.split.read.vector.query import NearestQuery, bound_to_table, vector_columns
from indextables_spark.core.split.read.plan import SNIPPET_COLUMN, ReadPlan, divide_conditions
from indextables_spark.core.split.read.reader import DISTANCE_COLUMN, SCORE_COLUMN
from indextables_spark.core.split.read.query_parsing import plan_query
from indextables_spark.core.split.read.index_only import check_index_only
from indextables_spark.core.split.reference.reference import with_reference_index_only
from indextables_spark.core.storage.base import Storage
from indextables_spark.errors import InvalidOptionError, SchemaMismatchError
from indextables_spark.expr.model import Filter, columns_of
from indextables_spark.expr.search_query import SearchQuery
from indextables_spark.expr.struct_narrowing import where_narrowing
from indextables_spark.expr.values import struct_column
from indextables_spark.util.pools import shared_pool

if TYPE_CHECKING:
    from indextables_spark.core.log.model.actions import AddFile, DeleteLog
    from indextables_spark.core.log.read.snapshot import Snapshot
    from indextables_spark.core.schema.types import ColumnSpec


@dataclass(frozen=True)
class SplitTask:
    """One split a read opens: its AddFile, the delete logs that apply to it, its position among
    the read's splits (ties of a vector read rank by it)."""

    file: AddFile
    delete_logs: tuple[DeleteLog, ...]
    ordinal: int


@dataclass(frozen=True)
class Pruning:
    """How many splits each step of `plan_files` kept (explain and the Spark driver's log)."""

    total: int
    after_partitions: int
    after_stats: int  # min/max statistics
    read: int  # after the Bloom filters: the splits opened


class TableScan:
    """One read of a table version, planned once (see the module docstring).

    conditions: conjuncts the read decides — partition-only ones prune splits exactly, the ones a
    split applies exactly are pushed, the rest (the residual) is checked on the rows. rechecked:
    conjuncts the caller checks again on what the read returns (Spark's pushed filters): they only
    prune and narrow. narrowing: struct-field queries the caller made (Spark's nested filters).
    columns: the partition and data columns returned (None: all); typed: the Arrow schema the
    caller's rows are typed as (Spark's read schema, with field metadata; default the table's);
    read_filter_columns: whether the columns of every row-checked condition are read (else those
    of the residual only: Spark reads the columns it declares and re-checks its own filters);
    limit: the rows a task returns at most (a ranked read's per-split best: `ranking`)."""

    def __init__(
        self,
        storage: Storage,
        snapshot: Snapshot,
        options: Options,
        *,
        conditions: Sequence[Filter] = (),
        rechecked: Sequence[Filter] = (),
        query: str | SearchQuery | None = None,
        narrowing: Sequence[str] = (),
        nearest: NearestQuery | None = None,
        columns: Sequence[str] | None = None,
        snippets: Sequence[str] = (),
        typed: pa.Schema | None = None,
        read_filter_columns: bool = True,
        limit: int | None = None,
        batch_rows: int = 65536,
        subject: str | None = None,
    ):
        self.storage, self.snapshot = storage, snapshot
        self.options, self.schema, self.specs = table_layout(snapshot, options)
        self.subject = subject or f"a read of {storage.uri}"
        uri = storage.uri
        if nearest is not None:
            nearest = bound_to_table(self.specs, nearest, uri)
        self.nearest = nearest
        if nearest is not None:
            if snippets:
                raise InvalidOptionError(f"a vector search of {uri} returns no snippets")
        names = self.schema.names
        if columns is not None:
            unknown = [c for c in columns if c not in names]
            if unknown:
                raise SchemaMismatchError(f"columns {unknown} are not in the table {uri} (columns: {names})")
        self.columns = list(columns) if columns is not None else list(names)
        self.snippets = tuple(snippets)
        check_snippet_fields(self.specs, self.snippets, uri)
        self.parts = list(snapshot.partition_columns)
        parts = set(self.parts)

        # filters on index-only columns: the index answers them exactly, or the read fails now
        self.conjuncts = list(conditions)
        index_only = check_index_only(self.conjuncts, self.specs, self.subject)
        divided = divide_conditions(self.conjuncts, self.parts, self.specs, index_only)
        hinted = divide_conditions(list(rechecked), self.parts, self.specs, ())
        self.part_only = [*divided.partition_only, *hinted.partition_only]
        self.data_only = [*divided.data_only, *hinted.pushed]
        self.pushed = [*divided.pushed, *hinted.pushed]
        self.residual = list(divided.residual)
        self.exact = [f for f in self.conjuncts if not any(f is g for g in divided.partition_only)]
        # struct-field conditions narrow reads through the json field (checked on the rows too)
        by_name = {s.name: s for s in self.specs}
        where = [q for f in divided.data_only if (q := where_narrowing(f, by_name, names)) is not None]
        self.narrowing = [*where, *narrowing]
        # the read's one query value: the text AND that narrowing (planned for the splits read)
        self.query = SearchQuery.of(query, self.narrowing)
        # data columns read from a split: the projection, the snippet fields, the row-checked columns
        checked = self.exact if read_filter_columns else self.residual
        filter_cols = {struct_column(c, names) or c for f in checked for c in columns_of(f)}
        self.read_names = [
            c for c in names if c not in parts and (c in self.columns or c in self.snippets or c in filter_cols)
        ]
        types = typed if typed is not None else self.schema
        fields = [types.field(c) if c in types.names else self.schema.field(c) for c in self.read_names]
        # what every split runs (plan.py): the exact filters it takes; the residual — conditions
        # mixing partition and data columns, filters a split cannot take — checked on rows with
        # partition values (ReadPlan.keep_residual)
        self.read = ReadPlan(
            uri,
            self.options,
            tuple(self.parts),
            pa.schema(fields),
            self.query,
            tuple(self.pushed),
            tuple(self.residual),
            self.snippets,
            limit,
            batch_rows=batch_rows,
            nearest=nearest,
        )
        self.mode = statistics_mode(self.options)
        self.pruning: Pruning | None = None

    def with_query(self, query: str | SearchQuery | None, files: Sequence[AddFile]) -> TableScan:
        """This scan with the full-text query bound, a copy (as pyiceberg's `TableScan.update`):
        the splits are planned from the conditions alone, so a route may plan them first and bind
        the query after, planned for the doc mappings of the splits kept (`files`; QueryParseError
        before a split opens). The query joins the scan's struct-field narrowing."""
        value = SearchQuery.of(query, self.narrowing)
        if value is not None:
            plan_query(self.snapshot, self.options, value, files, every=True)
        bound = copy.copy(self)
        bound.query = value
        bound.read = replace(self.read, query=value)
        return bound

    @property
    def text(self) -> str | None:
        """The query's text (None: no full-text query; the read may still narrow by struct fields)."""
        return self.query.text if self.query is not None else None

    @property
    def index_query(self) -> IndexQuery | None:
        """What a split's index runs (ReadPlan.index_query): how far a remote split is fetched."""
        return self.read.index_query

    @property
    def index_reads(self) -> tuple[SearchQuery | None, tuple[str, ...]]:
        """What a split's index is asked (ReadPlan.index_reads)."""
        return self.read.index_reads

    def out_schema(self, scored: bool) -> pa.Schema:
        """The columns the read returns: the projection, then `_score`, `_distance`, `_snippet`."""
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

    def row_schema(self, scored: bool) -> pa.Schema:
        """The columns a split's rows are completed to: partition and read columns (+ `_score`)."""
        fields = [f for f in self.schema if f.name in self.parts or f.name in self.read_names]
        return pa.schema(fields + ([pa.field(SCORE_COLUMN, pa.float32())] if scored else []))

    def live_files(self, among: Sequence[AddFile] | None = None) -> list[AddFile]:
        """The splits the read opens (partition pruning, min/max data skipping, Bloom filters:
        the conditions decide them, never the query) — of the snapshot, or of `among` (a stream's
        micro-batch: spark/streaming.py) —, with the query planned for their doc mappings
        (QueryParseError before a split opens)."""
        types = {c: t for c, t in spark_type_names(self.snapshot).items() if c in self.parts}
        files, (total, parts, stats) = prune_files(
            self.storage.uri,
            self.options,
            self.snapshot,
            self.part_only,
            self.data_only,
            self.parts,
            types,
            self.specs,
            among,
        )
        self.pruning = Pruning(total, parts, stats, len(files))
        self.plan_query(files)
        return files

    def plan_files(self) -> list[SplitTask]:
        """live_files as SplitTasks (each with its delete logs and ordinal)."""
        return [SplitTask(f, tuple(self.snapshot.deletes_for(f)), i) for i, f in enumerate(self.live_files())]

    def plan_query(self, files: Sequence[AddFile] | None) -> None:
        """Plan the query for the splits read (None: every live split): analysed once per doc
        mapping (the value the ReadPlan holds), QueryParseError for a query one of them cannot
        parse, before a split is opened. (The value itself keeps what it analysed.)"""
        if self.query is not None:
            plan_query(self.snapshot, self.options, self.query, files, every=True)

    def weighs_table(self) -> bool:
        """Whether the read's statistics weigh the whole table version (corpus_stats.py)."""
        return self.text is not None and table_wide(self.mode, self.snapshot.num_files)

    def corpus(self) -> CorpusStats | None:
        """The BM25 statistics of every live split of the version for the query (None: each
        split's own, with `search.statistics=split` or one split)."""
        if self.query is None or not self.weighs_table():
            return None
        return table_stats(self.storage, self.options, self.snapshot.version, self.snapshot.files, self.query)

    def ranking(self, limit: int | None) -> None:
        """Rank from here on: each split's best `limit` (every match without one), scored with the
        corpus statistics (`corpus`)."""
        self.read = self.read.with_ranking(limit, self.corpus())

    def statistics_fetch(self, read: Sequence[AddFile]) -> Future[None] | None:
        """Start fetching, in a thread, what the statistics (`corpus`) look up in the splits the
        read does not open, so that those request rounds overlap the read's own fetch."""
        files = self.snapshot.files
        if self.query is None or not self.weighs_table() or len(read) == len(files):
            return None
        version, query = self.snapshot.version, self.query
        # (a thread of its own: the fetch itself runs on the shared fetch pool, as the read's does)
        return shared_pool("statistics", 4).submit(
            fetch_for_stats, self.storage, self.options, version, files, query, read
        )


Layout = tuple[Options, pa.Schema, list["ColumnSpec"]]
_last_layout: tuple[()] | tuple[Snapshot, Options, Layout] = ()


def table_layout(snapshot: Snapshot, options: Options) -> Layout:
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


def table_vector_columns(snapshot: Snapshot, options: Options) -> list[str]:
    """The vector columns of a table version (its recorded settings under these options)."""
    return vector_columns(table_layout(snapshot, options)[2])
