"""`IndexTable`: the Spark-free entry point to one table, shaped like pyiceberg's Table.

Reading (snapshot, files, search, to_arrow, count, aggregate, explain, changes_since), writing
(write, delete, transaction), and, as namespaces, `t.maintenance` (api/maintenance.py) and
`t.inspect` (api/inspect.py). Operations return typed results (api/results.py)."""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from indextables_spark.core.log.table_log import TransactionLog
from indextables_spark.config.options import Options
from indextables_spark.util.sessions import with_session_options
from indextables_spark.core.storage import Storage, open_storage

# What a snapshot read does not need is imported on use ("# lazy" below), so that a fresh process
# reaches its first snapshot importing only the read path: the change feed, transactions, the
# maintenance commands and pyarrow (imported by the state read itself, overlapping its decoding).
if TYPE_CHECKING:
    import pyarrow as pa

    from indextables_spark.api.inspect import InspectTable
    from indextables_spark.api.maintenance import MaintenanceTable
    from indextables_spark.core.log.actions import AddFile
    from indextables_spark.core.log.changes import ChangeSet
    from indextables_spark.core.log.snapshot import Snapshot
    from indextables_spark.core.log.transaction import Transaction
    from indextables_spark.api.results import (
        CheckpointResult,
        DescribeStateResult,
        DropPartitionsResult,
        GcStateResult,
        HistoryEntry,
        MergeSplitsResult,
        PrewarmCacheResult,
        Progress,
        PurgeResult,
        RepairResult,
        SkippedFile,
        TruncateTimeTravelResult,
    )


_LOGS: "OrderedDict[tuple, TransactionLog]" = OrderedDict()
_LOGS_LOCK = threading.Lock()
_MAX_LOGS = 16


def _after_commit(log_: TransactionLog, version: int, operation: str | None = None) -> None:
    """maintenance.after_commit (the automatic checkpoint, compaction after MERGE SPLITS), the
    post-commit hook of the logs IndexTable opens, as maintenance.open_log installs it."""
    from indextables_spark.core.log.maintenance import (
        after_commit,
    )  # lazy: keeps `import indextables_spark.api.table` cheap

    after_commit(log_, version, operation)


def _open_log(storage: Storage, options: Options | None = None) -> TransactionLog:
    """maintenance.open_log without importing maintenance (and the state writer, pyarrow, ...)
    until a commit runs its hook."""
    return TransactionLog(storage, options, post_commit=(_after_commit,))


def _shared_log(path: str, options: Options) -> TransactionLog:
    """One TransactionLog per (path, options) in a process, so that IndexTable objects made per
    request or per Spark planning call reuse its last snapshot while the log is unchanged (it
    checks with one listing per snapshot(); see TransactionLog.snapshot)."""
    key = (path, tuple(sorted(options.items())))
    with _LOGS_LOCK:
        log = _LOGS.get(key)
        if log is not None:
            _LOGS.move_to_end(key)
            return log
    log = _open_log(open_storage(path, options), options)
    with _LOGS_LOCK:
        log = _LOGS.setdefault(key, log)
        _LOGS.move_to_end(key)
        while len(_LOGS) > _MAX_LOGS:
            _LOGS.popitem(last=False)
    return log


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"IndexTable.{old} is deprecated and goes in the next release; use IndexTable.{new}",
        DeprecationWarning,
        stacklevel=3,
    )


def forget_logs() -> None:
    """Drop the process's shared transaction logs (and so their last snapshots): the next
    IndexTable decodes its state afresh (benches measuring a first read use it)."""
    with _LOGS_LOCK:
        _LOGS.clear()


class IndexTable:
    """One table, without Spark: read (`snapshot`, `files`, `search`, `to_arrow`, `to_batches`,
    `count`, `aggregate`, `explain`, `changes_since`), write (`write`, `delete`, `transaction`),
    and the `maintenance` and `inspect` namespaces. Cheap to make: tables of the same path and
    options share one transaction log per process."""

    def __init__(
        self, path: str, options: Mapping[str, Any] | None = None, spark: Any = None, *, storage: Storage | None = None
    ):
        """spark: a SparkSession (classic or Spark Connect): its `spark.indextables.*` conf entries
        (credentials, endpoints, ...) are taken as options; explicit `options` win. Over Spark
        Connect the server withholds secret entries (aws.accessKey, aws.secretKey, azure.sasToken,
        ...; see util/sessions.py): give those as options."""
        self.options = Options.of(options) if spark is None else with_session_options(spark, options)
        self.path = path
        if storage is not None:
            self.storage = storage
            self.log = _open_log(storage, self.options)
        else:
            self.log = _shared_log(path, self.options)
            self.storage = self.log.storage

    def __repr__(self) -> str:
        return f"IndexTable({self.storage.uri!r})"

    def version(self) -> int:
        """Latest committed version; -1 when no table exists."""
        return self.log.latest_version()

    def exists(self) -> bool:
        return self.version() >= 0

    def snapshot(self, version: int | None = None, timestamp_ms: int | None = None) -> Snapshot:
        if version is not None and timestamp_ms is not None:
            from indextables_spark.errors import InvalidOptionError

            raise InvalidOptionError("give either version or timestamp_ms, not both")
        if timestamp_ms is not None:
            version = self.log.version_at_timestamp(timestamp_ms)
        return self.log.snapshot(version)

    def files(self, partition_filter: str | None = None, version: int | None = None) -> list[AddFile]:
        """Live files, optionally only those matching a partition filter; with a filter, only the
        manifests whose partition bounds may match are decoded."""
        return self.log.pruned_snapshot(partition_filter, version).files

    def scan(self, partition_filter: str | None = None, version: int | None = None):
        """(Snapshot holding only the files that match the partition filter, ScanStats with the
        number of manifests/entries decoded). The Spark reader's planning entry point."""
        return self.log.scan(partition_filter, version)

    def files_table(self, partition_filter: str | None = None, version: int | None = None):
        """Like files(), as a pyarrow Table with the FileEntry columns (no Python objects built)."""
        return self.log.pruned_snapshot(partition_filter, version).files_table

    # ---- change feed, transactions -------------------------------------------------------------
    def changes_since(self, version: int) -> ChangeSet:
        """ChangeSet(.adds, .removes, .version): files added after `version` still live now, and
        the removes committed after it."""
        from indextables_spark.core.log.changes import (
            changes_since,
        )  # lazy: keeps `import indextables_spark.api.table` cheap

        return changes_since(self.log, version)

    def changes_since_timestamp(self, timestamp_ms: int) -> ChangeSet:
        from indextables_spark.core.log.changes import changes_since_timestamp  # lazy

        return changes_since_timestamp(self.log, timestamp_ms)

    def transaction(self, resolver: str = "merge", version: int | None = None, operation: str = "WRITE") -> Transaction:
        """A transaction on the table read at `version` (latest by default); `commit()` it, or use
        it as a context manager (`with t.transaction() as tx:` commits on a clean exit, discards
        on an exception)."""
        from indextables_spark.core.log.transaction import (
            Transaction,
        )  # lazy: keeps `import indextables_spark.api.table` cheap

        return Transaction(self.log, resolver=resolver, read_version=version, operation=operation)

    # ---- maintenance and inspection (commands/, as pyiceberg's Table.maintenance / .inspect) ----
    @property
    def maintenance(self) -> MaintenanceTable:
        """checkpoint, compact, merge_splits, purge, truncate_time_travel, gc_state,
        drop_partitions, repair_transaction_log, convert, prewarm_cache: api/maintenance.py."""
        # commands/ sits above this module (it runs on TransactionLogs and never imports it):
        # imported on use, as pyiceberg's Table.maintenance does.
        from indextables_spark.api.maintenance import MaintenanceTable

        return MaintenanceTable(self.log)

    @property
    def inspect(self) -> InspectTable:
        """history, state, transaction_log, files, skipped_files: api/inspect.py."""
        from indextables_spark.api.inspect import InspectTable

        return InspectTable(self.log)

    def count(self, query: str | None = None, partition_filter: str | None = None) -> int:
        """Row count without deleted rows; from the log's numRecords when there is no query (splits
        with only positional deletes are not opened either)."""
        snap = self.log.pruned_snapshot(partition_filter)
        files = snap.files
        if query is None and not snap.delete_logs and all(f.num_records is not None for f in files):
            return sum(f.num_records or 0 for f in files)
        from indextables_spark.core.split.search import count_matches

        return count_matches(self.storage, snap, files, query, self.options)

    # ---- Spark-free search (core/split/search.py: the same pruning, filters and deletes as a Spark read) --
    def _search_plan(self, query: str | None, where: str | None, columns, snippets, version: int | None):
        from indextables_spark.core.split.search import SearchPlan

        from indextables_spark.expr.where import parse_where

        snap = self.snapshot(version)
        conjuncts = [] if where is None else parse_where(where, snap.schema_json)
        return SearchPlan(self.storage, snap, self.options, conjuncts, query, columns, snippets)

    def search(
        self,
        query: str,
        *,
        where: str | None = None,
        columns=None,
        limit: int | None = None,
        snippets=None,
        version: int | None = None,
    ):
        """Rows matching the Tantivy `query` (the `query` read option's syntax) as a pyarrow Table.
        where: SQL-like predicate over any columns (as delete()), Spark semantics; columns: a
        projection; limit: the global top n by relevance, then with a float `_score` column, best
        first; snippets: fields (the reader's snippetFields) → a `_snippet` column. Partition
        pruning, data skipping, Bloom filters and delete logs apply as in a Spark read."""
        from indextables_spark.core.split.search import search_table

        if query is None:
            from indextables_spark.errors import InvalidOptionError

            raise InvalidOptionError("search() needs a query (to_arrow() reads rows without one)")
        if isinstance(snippets, str):
            snippets = [snippets]
        return search_table(self._search_plan(query, where, columns, snippets, version), limit)

    def explain(self, query: str | None = None, where: str | None = None, version: int | None = None):
        """What a read with this query and `where` does (split/search.SearchExplanation; .to_dict()):
        the conditions the index answers, narrows (the rows re-check them) or leaves to the rows,
        the Tantivy query the splits run, and how many splits partition pruning, min/max
        statistics and Bloom filters kept, out of how many."""
        from indextables_spark.core.split.search_explain import explain

        return explain(self._search_plan(query, where, None, None, version))

    def to_arrow(self, where: str | None = None, columns=None, version: int | None = None):
        """The table's rows (those matching `where`) as a pyarrow Table."""
        from indextables_spark.core.split.search import search_table

        return search_table(self._search_plan(None, where, columns, None, version))

    def to_batches(self, query: str | None = None, where: str | None = None, columns=None, version: int | None = None):
        """The rows (matching `query`/`where`) as a pyarrow RecordBatchReader, split by split."""
        from indextables_spark.core.split.search import stream_table

        return stream_table(self._search_plan(query, where, columns, None, version))

    def aggregate(
        self,
        aggs: Mapping[str, Any] | str,
        *,
        query: str | None = None,
        partition_filter: str | None = None,
        spark: Any = None,
        execution: str = "auto",
        version: int | None = None,
    ) -> dict[str, Any]:
        """Exact Tantivy aggregations (terms, stats, histogram, date_histogram, range, percentiles,
        cardinality, …; Elasticsearch's request and response shapes) over the rows matching
        `query` in the partitions matching `partition_filter`. execution: "driver" (threads of
        this process), "spark" (a job on `spark`), "auto" (see api/aggregate.py)."""
        from indextables_spark.api.aggregate import aggregate

        snap = self.log.pruned_snapshot(partition_filter, version)
        return aggregate(self.storage, snap, snap.files, self.options, aggs, query, spark, execution)

    # ---- writing -------------------------------------------------------------------------------
    def write(self, data: Any, *, mode: str = "append", partition_by: Sequence[str] | None = None) -> int:
        """Write a pyarrow Table / RecordBatchReader or pandas DataFrame (it.write_table); returns
        the committed version. mode: "append" | "overwrite" | "error"."""
        from indextables_spark.api.write import write_table

        return write_table(self.path, data, mode=mode, partition_by=partition_by, options=self.options)

    def delete(
        self, where: str | None = None, query: str | None = None, *, kind: str = "auto", resolver: str = "merge"
    ) -> int:
        """Row-level DELETE of the rows matching `where` (SQL-like predicate over any columns, e.g.
        "region = 'eu' AND views < 10"; `_indexall = '<query>'` for a full-text condition) and/or
        the full-text `query`; returns the new version (the current one when nothing matched).
        kind: "auto" (positional, or primary_key for `<key> = / IN` on the declared key column
        spark.indextables.indexing.primaryKey), "positional", "equality", "primary_key".
        See ops/delete.py."""
        from indextables_spark.ops.delete import delete

        return delete(self.log, where, query, kind, resolver).version

    # ---- deprecated: the flat names of t.maintenance / t.inspect (kept for one release) ---------
    def checkpoint(self) -> CheckpointResult:
        _deprecated("checkpoint()", "maintenance.checkpoint()")
        return self.maintenance.checkpoint()

    def compact(self) -> CheckpointResult:
        _deprecated("compact()", "maintenance.compact()")
        return self.maintenance.compact()

    def truncate_time_travel(self, dry_run: bool = False) -> TruncateTimeTravelResult:
        _deprecated("truncate_time_travel()", "maintenance.truncate_time_travel()")
        return self.maintenance.truncate_time_travel(dry_run=dry_run)

    def gc_state(self, dry_run: bool = False) -> GcStateResult:
        _deprecated("gc_state()", "maintenance.gc_state()")
        return self.maintenance.gc_state(dry_run=dry_run)

    def merge_splits(
        self,
        where: str | None = None,
        target_size: int | str | None = None,
        max_dest_splits: int | None = None,
        max_source_splits_per_merge: int | None = None,
        spark: Any = None,
        progress: Progress | None = None,
    ) -> MergeSplitsResult:
        _deprecated("merge_splits()", "maintenance.merge_splits()")
        return self.maintenance.merge_splits(
            where,
            target_size=target_size,
            max_dest_splits=max_dest_splits,
            max_source_splits_per_merge=max_source_splits_per_merge,
            spark=spark,
            progress=progress,
        )

    def purge(
        self,
        older_than_hours: float | None = None,
        tx_log_retention_hours: float | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> PurgeResult:
        _deprecated("purge()", "maintenance.purge()")
        return self.maintenance.purge(
            older_than_hours=older_than_hours,
            tx_log_retention_hours=tx_log_retention_hours,
            dry_run=dry_run,
            progress=progress,
        )

    def drop_partitions(self, where: str) -> DropPartitionsResult:
        _deprecated("drop_partitions()", "maintenance.drop_partitions()")
        return self.maintenance.drop_partitions(where)

    def repair_transaction_log(self, target: str, progress: Progress | None = None) -> RepairResult:
        _deprecated("repair_transaction_log()", "maintenance.repair_transaction_log()")
        return self.maintenance.repair_transaction_log(target, progress=progress)

    def prewarm_cache(self, where: str | None = None, spark: Any = None) -> list[PrewarmCacheResult]:
        _deprecated("prewarm_cache()", "maintenance.prewarm_cache()")
        return self.maintenance.prewarm_cache(where, spark=spark)

    def history(self) -> list[HistoryEntry]:
        _deprecated("history()", "inspect.history()")
        return self.inspect.history()

    def describe_state(self) -> DescribeStateResult:
        _deprecated("describe_state()", "inspect.state()")
        return self.inspect.state()

    def describe_transaction_log(self, include_all: bool = False) -> pa.Table:
        _deprecated("describe_transaction_log()", "inspect.transaction_log()")
        return self.inspect.transaction_log(include_all=include_all)

    def skipped_files(self) -> list[SkippedFile]:
        _deprecated("skipped_files()", "inspect.skipped_files()")
        return self.inspect.skipped_files()

    @classmethod
    def create(cls, path: str, schema, partition_by=None, options=None) -> "IndexTable":
        """Create an empty table at `path` from a pyarrow.Schema (version 0: protocol + metadata, what a
        Spark write of an empty DataFrame commits); TableExistsError if a table exists there."""
        from indextables_spark.api.write import create_table

        create_table(path, schema, partition_by=partition_by, options=options)
        return cls(path, options)
