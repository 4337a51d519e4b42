"""`IndexTable`: the Spark-free entry point to one table, shaped like pyiceberg's Table.

Reading (snapshot, files, search, to_arrow, count, aggregate, explain, changes_since), writing
(write, delete, transaction), and, as namespaces, `t.maintenance` (api/maintenance.py) and
`t.inspect` (api/inspect.py). Operations return typed results (results.py)."""

from __future__ import annotations

import numbers
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from indextables_spark.config.option_checks import warn_unknown_options
from indextables_spark.config.options import Options
from indextables_spark.config.sessions import with_session_options
from indextables_spark.core.log.maintenance.shared_logs import log_with_maintenance, shared_log
from indextables_spark.core.storage import Storage
from indextables_spark.errors import InvalidOptionError

# What a snapshot read does not need is imported on use ("# lazy" below), so that a fresh process
# reaches its first snapshot importing only the read path: the change feed, transactions, the
# maintenance commands and pyarrow (imported by the state read itself, overlapping its decoding).
if TYPE_CHECKING:
    import pyarrow as pa

    from indextables_spark.api.inspect import InspectTable
    from indextables_spark.api.maintenance import MaintenanceTable
    from indextables_spark.api.transaction import TableTransaction
    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.core.log.read.changes import ChangeSet
    from indextables_spark.core.log.read.snapshot import Snapshot
    from indextables_spark.core.split.read.search import SearchPlan
    from indextables_spark.core.split.read.search_explain import SearchExplanation
    from indextables_spark.core.split.read.vector.fusion_spec import FusionArg
    from indextables_spark.expr.search_query import SearchQuery
    from indextables_spark.results.maintenance import DeleteResult, WriteResult
    from indextables_spark.results.record import ProgressArg


class IndexTable:
    """One table, without Spark: read (`snapshot`, `schema`, `files`, `search`, `to_arrow`,
    `to_batches`, `count`, `aggregate`, `explain`, `changes_since`), write (`write`, `delete`,
    `transaction`), and the `maintenance` and `inspect` namespaces. Cheap to make: tables of the
    same path and options share one transaction log per process."""

    def __init__(
        self,
        path: str,
        options: Mapping[str, Any] | None = None,
        *,
        spark: Any = None,
        storage: Storage | None = None,
    ):
        """spark: a SparkSession (classic or Spark Connect): its `spark.indextables.*` conf entries
        (credentials, endpoints, ...) are taken as options; explicit `options` win. Over Spark
        Connect the server withholds secret entries (aws.accessKey, aws.secretKey, azure.sasToken,
        ...; see config/sessions.py): give those as options. storage: the Storage to read and write
        through (e.g. core/storage/counting.py's), instead of one opened from `path`.

        Reads of the latest version reuse the log's listing while it is younger than
        `read.stalenessLimit` (object stores; see docs/configuration.md): they may miss commits
        other processes made within that window, never this process's own. `refresh()` lists now.
        With `spark`, whose jobs commit in other processes, the window is 0 unless set."""
        if not isinstance(options, Options):  # an Options was checked where it was given
            warn_unknown_options(options)
        self.options = Options.of(options) if spark is None else with_session_options(spark, options)
        self.path = path
        if storage is not None:
            self.storage = storage
            self.log = log_with_maintenance(storage, self.options)
        else:
            self.log = shared_log(path, self.options)
            self.storage = self.log.storage

    def __repr__(self) -> str:
        return f"IndexTable({self.storage.uri!r})"

    def version(self) -> int:
        """Latest committed version; -1 when no table exists (always lists the log)."""
        return self.log.latest_version()

    def refresh(self) -> IndexTable:
        """List the table's log now: the next reads of the latest version see every commit made
        before this call, whatever `read.stalenessLimit` (as pyiceberg's Table.refresh)."""
        self.log.refresh()
        return self

    def exists(self) -> bool:
        return self.version() >= 0

    def snapshot(self, version: int | None = None, timestamp_ms: int | None = None) -> Snapshot:
        """The table at `version` (latest by default) or as of `timestamp_ms`."""
        if version is not None and timestamp_ms is not None:
            raise InvalidOptionError("give either version or timestamp_ms, not both")
        if timestamp_ms is not None:
            version = self.log.version_at_timestamp(timestamp_ms)
        return self.log.snapshot(version, stale_ok=True)

    def schema(self, version: int | None = None) -> pa.Schema:
        """The table's columns at `version` (latest by default) as a pyarrow.Schema, partition
        columns included, in the order and with the types reads return them (to_arrow, search)."""
        from indextables_spark.core.schema.arrow_types import arrow_schema  # lazy: pyarrow

        return arrow_schema(self.log.header(version, stale_ok=True)[1].schema_json)

    def files(self, partition_filter: str | None = None, *, version: int | None = None) -> list[AddFile]:
        """Live files, optionally only those matching a partition filter; with a filter, only the
        manifests whose partition bounds may match are decoded. (As a pyarrow Table:
        `snapshot(version).files_table`.)"""
        return self.log.pruned_snapshot(partition_filter, version, stale_ok=True).files

    # ---- change feed, transactions -------------------------------------------------------------
    def changes_since(self, version: int) -> ChangeSet:
        """ChangeSet(.adds, .removes, .version): files added after `version` still live now, and
        the removes committed after it."""
        from indextables_spark.core.log.read.changes import (
            changes_since,
        )  # lazy: keeps `import indextables_spark.api.table` cheap

        return changes_since(self.log, version)

    def changes_since_timestamp(self, timestamp_ms: int) -> ChangeSet:
        from indextables_spark.core.log.read.changes import changes_since_timestamp  # lazy

        return changes_since_timestamp(self.log, timestamp_ms)

    def transaction(
        self, resolver: str = "merge", *, version: int | None = None, operation: str = "WRITE"
    ) -> TableTransaction:
        """A transaction on the table read at `version` (latest by default): the log's
        (add_files, remove_files, add_delete_log, update_stat) and data-level steps (write,
        delete; api/transaction.py), committed as one version by `commit()`, or as a context
        manager (`with t.transaction() as tx:` commits on a clean exit, discards on an exception)."""
        from indextables_spark.api.transaction import (
            TableTransaction,
        )  # lazy: keeps `import indextables_spark.api.table` cheap (pyarrow, the write path)

        return TableTransaction(self.log, self.options, resolver=resolver, read_version=version, operation=operation)

    # ---- maintenance and inspection (as pyiceberg's Table.maintenance / .inspect) ---------------
    @property
    def maintenance(self) -> MaintenanceTable:
        """checkpoint, compact, merge_splits, purge, truncate_time_travel, gc_state,
        drop_partitions, repair_transaction_log, convert, prewarm_cache: api/maintenance.py."""
        # lazy: api/maintenance.py (and ops/, the layer below api/, as each method runs) loads on the
        # first use, as pyiceberg's Table.maintenance does.
        from indextables_spark.api.maintenance import MaintenanceTable

        return MaintenanceTable(self.log)

    @property
    def inspect(self) -> InspectTable:
        """history, state, transaction_log, skipped_files: api/inspect.py."""
        from indextables_spark.api.inspect import InspectTable  # lazy: it imports ops/ and pyarrow

        return InspectTable(self.log)

    def count(self, query: str | SearchQuery | None = None, partition_filter: str | None = None) -> int:
        """Row count without deleted rows; from the log's numRecords when there is no query (splits
        with only positional deletes are not opened either). `query`: a text or an it.SearchQuery."""
        snap = self.log.pruned_snapshot(partition_filter, stale_ok=True)
        files = snap.files
        if query is None and not snap.delete_logs and all(f.num_records is not None for f in files):
            return sum(f.num_records or 0 for f in files)
        from indextables_spark.core.split.read.search import count_matches  # lazy: tantivy, pyarrow
        from indextables_spark.expr.search_query import SearchQuery  # lazy: the read path's modules

        return count_matches(self.storage, snap, files, SearchQuery.of(query), self.options)

    # ---- Spark-free search (core/split/read/search.py: the same pruning, filters and deletes as a Spark read) --
    def _search_plan(
        self,
        query: str | SearchQuery | None,
        where: str | None,
        columns: Sequence[str] | None,
        snippets: Sequence[str] | None,
        version: int | None,
        vector: Any = None,
        vector_column: str | None = None,
        limit: int | None = None,
        fusion: FusionArg | None = None,
    ) -> SearchPlan:
        from indextables_spark.core.split.read.scan import TableScan  # lazy: tantivy, pyarrow
        from indextables_spark.core.split.read.search import SearchPlan  # lazy: as above
        from indextables_spark.core.split.read.vector.fusion_spec import parse_fusion  # lazy: with the read path
        from indextables_spark.core.split.read.vector.query import NearestQuery  # lazy: numpy
        from indextables_spark.expr.where import parse_where  # lazy: the expression parsers

        limit = positive_limit(limit)
        snap = self.snapshot(version)
        conjuncts = [] if where is None else parse_where(where, snap.schema_json)
        nearest = None
        if vector is not None:
            from indextables_spark.core.split.read.scan import table_vector_columns  # lazy: as above

            columns_ = table_vector_columns(snap, self.options)
            nearest = NearestQuery.build(
                vector,
                limit,
                parse_fusion(fusion, with_query=query is not None),  # the one parse of every route's fusion
                self.options,
                column=vector_column,
                vector_columns=columns_,
                where=self.storage.uri,
                column_option="vector_column=...",
            )
        elif fusion is not None or vector_column is not None:
            raise InvalidOptionError("search(): fusion and vector_column need a query vector (vector=...)")
        scan = TableScan(
            self.storage,
            snap,
            self.options,
            conditions=conjuncts,
            nearest=nearest,
            columns=columns,
            snippets=tuple(snippets or ()),
        )
        files = scan.live_files()  # (the conditions plan the splits; the query is bound after)
        bound = scan.with_query(query, files)  # the one value of the query, from here to every split
        return SearchPlan(bound, files)

    def search(
        self,
        query: str | SearchQuery | None = None,
        *,
        vector: Any = None,
        vector_column: str | None = None,
        fusion: FusionArg | None = None,
        where: str | None = None,
        columns: Sequence[str] | None = None,
        limit: int | None = None,
        snippets: str | Sequence[str] | None = None,
        version: int | None = None,
    ) -> pa.Table:
        """Rows matching the Tantivy `query` (the `query` read option's syntax; a text or an
        it.SearchQuery) as a pyarrow Table.
        where: SQL-like predicate over any columns (as delete()), Spark semantics; columns: a
        projection; limit: the global top n by relevance, then with a float `_score` column, best
        first; snippets: fields (the reader's snippetFields) → a `_snippet` column. Partition
        pruning, data skipping, Bloom filters and delete logs apply as in a Spark read.

        vector: a vector search (a sequence of floats): the `limit` (default 10) rows whose
        `vector_column` (needed when the table has several vector columns; the name every route
        uses: `vector_column=` in Python, option `vectorColumn` in Spark, as LanceDB's
        `vector_column_name`) is nearest, nearest first, with `_distance`; `where` selects the rows
        searched (the k nearest among them, not fewer).
        With both `query` and `vector`, a hybrid search: by default (fusion None, as every route)
        reciprocal rank fusion of `query`'s ranking and the vector ranking across the table,
        `_score` the fused score; fusion "rrf", "weighted", an it.Fusion or a mapping of its fields
        (method, rrf_k, text_weight, window) choose how (core/split/read/vector/fusion.py);
        fusion="none": no fusion, the query only selects the rows the vectors rank (search()'s
        default up to 0.2.0)."""
        from indextables_spark.core.split.read.search import search_table  # lazy: tantivy, pyarrow
        from indextables_spark.core.split.read.vector.table_search import nearest_table  # lazy: as above

        if query is None and vector is None:
            raise InvalidOptionError("search() needs a query or a vector (to_arrow() reads rows without one)")
        fields = [snippets] if isinstance(snippets, str) else snippets
        plan = self._search_plan(query, where, columns, fields, version, vector, vector_column, limit, fusion)
        return nearest_table(plan) if plan.scan.nearest is not None else search_table(plan, limit)

    def search_many(
        self,
        queries: Sequence[str | SearchQuery | None] | None = None,
        *,
        vectors: Sequence[Any] | None = None,
        vector_column: str | None = None,
        fusion: FusionArg | None = None,
        where: str | None = None,
        columns: Sequence[str] | None = None,
        limit: int | None = None,
        version: int | None = None,
    ) -> list[pa.Table]:
        """Many searches of one table version: for each i, what search(queries[i],
        vector=vectors[i], ...) returns (a query is a text or an it.SearchQuery; a None query or
        vector leaves that side out; both None: an empty result; `fusion` as search's, for the
        queries with both). The vector searches without text run together: they share the plan,
        each split's selection of rows and one graph search per split
        (core/split/read/vector/table_search.py)."""
        from indextables_spark.core.split.read.vector.table_search import nearest_tables, query_matrix  # lazy: numpy

        if queries is None and vectors is None:
            raise InvalidOptionError("search_many() needs queries, vectors or both")
        limit = positive_limit(limit)  # (before any search: a batch without one is refused too)
        n = len(queries) if queries is not None else len(vectors) if vectors is not None else 0
        if queries is not None and vectors is not None and len(queries) != len(vectors):
            raise InvalidOptionError(f"search_many(): {len(queries)} queries but {len(vectors)} vectors")
        texts = list(queries) if queries is not None else [None] * n
        vecs = list(vectors) if vectors is not None else [None] * n
        version = self.snapshot(version).version  # every search reads the same version
        results: list[pa.Table | None] = [None] * n
        alone = [i for i in range(n) if vecs[i] is not None and texts[i] is None]
        if alone:
            plan = self._search_plan(None, where, columns, None, version, vecs[alone[0]], vector_column, limit)
            for i, table in zip(alone, nearest_tables(plan, query_matrix(plan, [vecs[i] for i in alone]))):
                results[i] = table
        for i in range(n):
            if results[i] is None and (texts[i] is not None or vecs[i] is not None):
                results[i] = self.search(
                    texts[i],
                    vector=vecs[i],
                    vector_column=vector_column if vecs[i] is not None else None,
                    fusion=fusion if texts[i] is not None and vecs[i] is not None else None,
                    where=where,
                    columns=columns,
                    limit=limit,
                    version=version,
                )
        if any(r is None for r in results):  # neither text nor vector: nothing matches
            empty = self._search_plan(None, where, columns, None, version).scan.out_schema(False).empty_table()
            return [r if r is not None else empty for r in results]
        return [r for r in results if r is not None]

    def explain(
        self,
        query: str | SearchQuery | None = None,
        where: str | None = None,
        *,
        version: int | None = None,
        vector: Any = None,
        vector_column: str | None = None,
        limit: int | None = None,
        fusion: FusionArg | None = None,
    ) -> SearchExplanation:
        """What a read with this query and `where` does (core/split/read/search_explain.SearchExplanation; .to_dict()):
        the conditions the index answers, narrows (the rows re-check them) or leaves to the rows,
        the Tantivy query the splits run, and how many splits partition pruning, min/max
        statistics and Bloom filters kept, out of how many."""
        from indextables_spark.core.split.read.search_explain import explain  # lazy: tantivy, pyarrow

        return explain(self._search_plan(query, where, None, None, version, vector, vector_column, limit, fusion).scan)

    def to_arrow(
        self, where: str | None = None, columns: Sequence[str] | None = None, version: int | None = None
    ) -> pa.Table:
        """The table's rows (those matching `where`) as a pyarrow Table."""
        from indextables_spark.core.split.read.search import search_table  # lazy: tantivy, pyarrow

        return search_table(self._search_plan(None, where, columns, None, version))

    def to_batches(
        self,
        query: str | SearchQuery | None = None,
        *,
        where: str | None = None,
        columns: Sequence[str] | None = None,
        version: int | None = None,
    ) -> pa.RecordBatchReader:
        """The rows (matching `query`/`where`) as a pyarrow RecordBatchReader, split by split."""
        from indextables_spark.core.split.read.search import stream_table  # lazy: tantivy, pyarrow

        return stream_table(self._search_plan(query, where, columns, None, version))

    def aggregate(
        self,
        aggs: Mapping[str, Any] | str,
        *,
        query: str | SearchQuery | None = None,
        partition_filter: str | None = None,
        spark: Any = None,
        execution: str = "auto",
        version: int | None = None,
    ) -> dict[str, Any]:
        """Exact Tantivy aggregations (terms, stats, histogram, date_histogram, range, percentiles,
        cardinality, …; Elasticsearch's request and response shapes) over the rows matching
        `query` in the partitions matching `partition_filter`. execution: "driver" (threads of
        this process), "spark" (a job on `spark`), "auto" (see api/aggregate.py).

        The request names each aggregation, `{name: {kind: {parameters}, "aggs": {…}}}`, with
        the table's column names as fields; the answer has the same names and the matching rows'
        `doc_count`. On the table of docs/guide/aggregations.md's first example (which has every
        kind further down):

            t.aggregate({
                "by_tag": {"terms": {"field": "tag", "size": 2},
                           "aggs": {"views": {"avg": {"field": "views"}}}},
            })
            # {'doc_count': 6,
            #  'by_tag': {'buckets': [{'key': 'news', 'doc_count': 3, 'views': {'value': 170.0}},
            #                         {'key': 'blog', 'doc_count': 2, 'views': {'value': 30.0}}],
            #             'sum_other_doc_count': 1}}
        """
        from indextables_spark.api.aggregate import aggregate, aggregation_plan  # lazy: tantivy, pyarrow
        from indextables_spark.expr.search_query import SearchQuery  # lazy: the read path's modules

        snap = self.log.pruned_snapshot(partition_filter, version, stale_ok=True)
        plan = aggregation_plan(self.storage, snap, self.options, SearchQuery.of(query))
        return aggregate(self.storage, snap, snap.files, plan, aggs, spark=spark, execution=execution)

    # ---- writing: one data-level step of a transaction each ----------------------------------------
    def write(
        self,
        data: Any,
        *,
        mode: str = "append",
        partition_by: str | Sequence[str] | None = None,
        progress: ProgressArg = None,
    ) -> WriteResult:
        """Write a pyarrow Table / RecordBatchReader or pandas DataFrame (it.write_table; with
        this table's options and storage); returns a WriteResult: `.version` the committed version,
        `.rows_written`, `.splits_added`, `.bytes_written`, ….
        mode: "append" | "overwrite" | "error". progress: a callback receiving
        `Progress("writing", done, total, "rows")` as chunks of rows become splits (`total` None
        when the rows are not known in advance: a RecordBatchReader); None (default): a progress
        bar on stderr when stderr is a terminal, nothing otherwise; False: nothing (api/progress.py)."""
        from indextables_spark.results.record import elapsed_ms  # lazy: results import pyarrow

        started = time.perf_counter()
        with self.transaction() as tx:
            staged = tx.write(data, mode=mode, partition_by=partition_by, progress=progress)
        return replace(staged, status="SUCCESS", version=_committed(tx), duration_ms=elapsed_ms(started))

    def delete(
        self,
        where: str | None = None,
        query: str | SearchQuery | None = None,
        kind: str = "auto",
        resolver: str = "merge",
    ) -> DeleteResult:
        """Row-level DELETE of the rows matching `where` (SQL-like predicate over any columns, e.g.
        "region = 'eu' AND views < 10"; `_indexall = '<query>'` for a full-text condition) and/or
        the full-text `query` (a text or an it.SearchQuery, as search's); returns a DeleteResult:
        `.version` the new version (status NO_ACTION, the current one, when nothing matched),
        `.deleted_rows` (None for key and equality deletes), `.kind`, `.delete_logs`,
        `.removed_splits`, ….
        kind: "auto" (positional, or primary_key for `<key> = / IN` on the declared key column
        spark.indextables.indexing.primaryKey), "positional", "equality", "primary_key".
        Planned again on a conflict with a concurrent commit (ops/write/delete.py)."""
        from indextables_spark.ops.write.delete import OPERATION, replan_on_conflict  # lazy: the delete planner, on use
        from indextables_spark.results.record import elapsed_ms  # lazy: results import pyarrow

        started = time.perf_counter()

        def once() -> DeleteResult:
            with self.transaction(resolver=resolver, operation=OPERATION) as tx:
                staged = tx.delete(where, query=query, kind=kind)
            if staged.status == "NO_ACTION":
                return staged
            return replace(staged, status="SUCCESS", version=_committed(tx), duration_ms=elapsed_ms(started))

        return replan_on_conflict(self.log, resolver, once)

    @classmethod
    def create(
        cls,
        path: str,
        schema: pa.Schema,
        partition_by: str | Sequence[str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> IndexTable:
        """Create an empty table at `path` from a pyarrow.Schema (version 0: protocol + metadata, what a
        Spark write of an empty DataFrame commits); TableExistsError if a table exists there."""
        table = cls(path, options)
        table.write(schema.empty_table(), mode="error", partition_by=partition_by, progress=False)
        return table


def _committed(tx: TableTransaction) -> int:
    """The version a transaction committed (after its `with` block)."""
    assert tx.committed_version is not None  # the block exited cleanly: it committed
    return tx.committed_version


def positive_limit(limit: Any) -> int | None:
    """A search's `limit` (None: no limit); InvalidOptionError naming it unless a positive integer,
    as the Spark read option, the table functions and search_join refuse theirs."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, numbers.Integral) or limit <= 0:
        raise InvalidOptionError(f"limit must be a positive integer (a number of rows), got {limit!r}")
    return int(limit)
