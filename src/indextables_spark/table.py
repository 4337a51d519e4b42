"""`IndexTable`: the Spark-free entry point to one table (log, snapshots, transactions)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Mapping

from .log.actions import AddFile, CommitInfo, Metadata, Protocol, RemoveFile
from .log.snapshot import Snapshot
from .log.maintenance import open_log
from .log.table_log import TransactionLog
from .log.transaction import Transaction
from .options import Options
from .sessions import with_session_options
from .storage import Storage, open_storage


_LOGS: "OrderedDict[tuple, TransactionLog]" = OrderedDict()
_LOGS_LOCK = threading.Lock()
_MAX_LOGS = 16


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
    log = open_log(open_storage(path, options), options)
    with _LOGS_LOCK:
        log = _LOGS.setdefault(key, log)
        _LOGS.move_to_end(key)
        while len(_LOGS) > _MAX_LOGS:
            _LOGS.popitem(last=False)
    return log


def forget_logs() -> None:
    """Drop the process's shared transaction logs (and so their last snapshots): the next
    IndexTable decodes its state afresh (benches measuring a first read use it)."""
    with _LOGS_LOCK:
        _LOGS.clear()


class IndexTable:
    def __init__(
        self, path: str, options: Mapping[str, Any] | None = None, spark: Any = None, *, storage: Storage | None = None
    ):
        """spark: a SparkSession (classic or Spark Connect): its `spark.indextables.*` conf entries
        (credentials, endpoints, ...) are taken as options; explicit `options` win. Over Spark
        Connect the server withholds secret entries (aws.accessKey, aws.secretKey, azure.sasToken,
        ...; see sessions.py): give those as options."""
        self.options = Options.of(options) if spark is None else with_session_options(spark, options)
        self.path = path
        if storage is not None:
            self.storage = storage
            self.log = open_log(storage, self.options)
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
            from .errors import InvalidOptionError

            raise InvalidOptionError("give either version or timestamp_ms, not both")
        if timestamp_ms is not None:
            version = self.log.version_at_timestamp(timestamp_ms)
        return self.log.snapshot(version)

    def files(self, partition_filter: str | None = None, version: int | None = None) -> list[AddFile]:
        """Live files, optionally only those matching a partition filter; with a filter, only the
        manifests whose partition bounds may match are decoded."""
        if not partition_filter:
            return self.snapshot(version).files
        snap, _stats = self.log.scan(partition_filter, version)
        return snap.files

    def scan(self, partition_filter: str | None = None, version: int | None = None):
        """(Snapshot holding only the files that match the partition filter, ScanStats with the
        number of manifests/entries decoded). The Spark reader's planning entry point."""
        return self.log.scan(partition_filter, version)

    def files_table(self, partition_filter: str | None = None, version: int | None = None):
        """Like files(), as a pyarrow Table with the FileEntry columns (no Python objects built)."""
        if not partition_filter:
            return self.snapshot(version).files_table
        return self.log.scan(partition_filter, version)[0].files_table

    # ---- state layer (checkpoints, compaction, change feed, retention) -----------------------
    def checkpoint(self) -> dict:
        """CHECKPOINT: write the V4 Avro state at the latest version (a JSON checkpoint with
        state.format=json); upgrades V1–V3 tables to protocol V4 first."""
        from .commands import state

        return state.checkpoint(self.log)

    def compact(self) -> dict:
        """COMPACT: rewrite the state cleanly (partition-sorted manifests, no tombstones)."""
        from .commands import state

        return state.compact(self.log)

    def describe_state(self) -> dict:
        """format, version, numFiles, totalBytes, numManifests, numTombstones, tombstoneRatio,
        createdAt, protocolVersion, needsCompaction (and a few more), plus the SkipAction state:
        numSkippedFiles, numSkipsCoolingDown, skippedFiles."""
        from .commands import describe

        return describe.describe_state(self.log)

    def changes_since(self, version: int):
        """ChangeSet(.adds, .removes, .version): files added after `version` still live now, and
        the removes committed after it."""
        from .log.changes import changes_since

        return changes_since(self.log, version)

    def changes_since_timestamp(self, timestamp_ms: int):
        from .log.changes import changes_since_timestamp

        return changes_since_timestamp(self.log, timestamp_ms)

    def truncate_time_travel(self, dry_run: bool = False) -> dict:
        """Checkpoint at the latest version, then delete older version files, checkpoints and
        states (irreversible: run with dry_run=True first)."""
        from .commands import state

        return state.truncate_time_travel(self.log, dry_run=dry_run)

    def gc_state(self, dry_run: bool = False) -> dict:
        """Old state directories beyond retention and orphan manifests (used by PURGE)."""
        from .commands import state

        return state.gc_state(self.log, dry_run=dry_run)

    def transaction(self, resolver: str = "merge", version: int | None = None, operation: str = "WRITE") -> Transaction:
        return Transaction(self.log, resolver=resolver, read_version=version, operation=operation)

    def history(self) -> list[dict]:
        """One row per retained version, newest first."""
        rows = []
        for v in reversed(self.log.list_versions()):
            actions = self.log.read_actions(v)
            info = next((a for a in actions if isinstance(a, CommitInfo)), None)
            adds = [a for a in actions if isinstance(a, AddFile)]
            removes = [a for a in actions if isinstance(a, RemoveFile)]
            rows.append(
                {
                    "version": v,
                    "timestamp": self.log.commit_timestamp(v, actions),
                    "operation": info.operation if info else ("CREATE TABLE" if v == 0 else "UNKNOWN"),
                    "operationParameters": info.operation_parameters if info else {},
                    "numAddedFiles": len(adds),
                    "numRemovedFiles": len(removes),
                    "numAddedRecords": sum(a.num_records or 0 for a in adds),
                    "addedBytes": sum(a.size for a in adds),
                    "metadataChanged": any(isinstance(a, (Metadata, Protocol)) for a in actions),
                }
            )
        return rows

    def count(self, query: str | None = None, partition_filter: str | None = None) -> int:
        """Row count without deleted rows; from the log's numRecords when there is no query (splits
        with only positional deletes are not opened either)."""
        snap = self.log.scan(partition_filter)[0] if partition_filter else self.snapshot()
        files = snap.files
        if query is None and not snap.delete_logs and all(f.num_records is not None for f in files):
            return sum(f.num_records or 0 for f in files)
        from .split.search import count_matches

        return count_matches(self.storage, snap, files, query, self.options)

    # ---- Spark-free search (split/search.py: the same pruning, filters and deletes as a Spark read) --
    def _search_plan(self, query: str | None, where: str | None, columns, snippets, version: int | None):
        from .split.search import SearchPlan

        snap = self.snapshot(version)
        return SearchPlan(
            self.storage, snap, self.options, self._where_conjuncts(where, snap.schema_json), query, columns, snippets
        )

    @staticmethod
    def _where_conjuncts(where: str | None, schema_json: Mapping[str, Any]) -> list:
        """The AND-ed conditions of a search/read predicate (the delete() grammar), literals typed."""
        if where is None:
            return []
        from .commands import delete as d
        from .errors import InvalidOptionError
        from .log.partition_filter import parse_predicate

        if not isinstance(where, str) or not where.strip():
            raise InvalidOptionError("where: the predicate is empty")
        types = d.column_types(schema_json)
        expr = parse_predicate(where, types, what="where predicate")
        try:
            return [d._typed(c, types) for c in d._conjuncts(expr)]
        except d.DeletePredicateError as e:
            raise InvalidOptionError(str(e).replace("DELETE predicate", "where predicate")) from None

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
        from .split.search import search_table

        if query is None:
            from .errors import InvalidOptionError

            raise InvalidOptionError("search() needs a query (to_arrow() reads rows without one)")
        if isinstance(snippets, str):
            snippets = [snippets]
        return search_table(self._search_plan(query, where, columns, snippets, version), limit)

    def explain(self, query: str | None = None, where: str | None = None, version: int | None = None):
        """What a read with this query and `where` does (split/search.SearchExplanation; .to_dict()):
        the conditions the index answers, narrows (the rows re-check them) or leaves to the rows,
        the Tantivy query the splits run, and how many splits partition pruning, min/max
        statistics and Bloom filters kept, out of how many."""
        from .split.search import explain

        return explain(self._search_plan(query, where, None, None, version))

    def to_arrow(self, where: str | None = None, columns=None, version: int | None = None):
        """The table's rows (those matching `where`) as a pyarrow Table."""
        from .split.search import search_table

        return search_table(self._search_plan(None, where, columns, None, version))

    def to_batches(self, query: str | None = None, where: str | None = None, columns=None, version: int | None = None):
        """The rows (matching `query`/`where`) as a pyarrow RecordBatchReader, split by split."""
        from .split.search import stream_table

        return stream_table(self._search_plan(query, where, columns, None, version))

    def delete(
        self, where: str | None = None, query: str | None = None, kind: str = "auto", resolver: str = "merge"
    ) -> int:
        """Row-level DELETE of the rows matching `where` (SQL-like predicate over any columns, e.g.
        "region = 'eu' AND views < 10"; `_indexall = '<query>'` for a full-text condition) and/or
        the full-text `query`; returns the new version (the current one when nothing matched).
        kind: "auto" (positional, or primary_key for `<key> = / IN` on the declared key column
        spark.indextables.indexing.primaryKey), "positional", "equality", "primary_key".
        See commands/delete.py."""
        from .commands import delete

        return delete.delete(self.log, where, query, kind, resolver).version

    # ---- maintenance commands (commands/; the same operations as the SQL texts and the CLI) -----
    def merge_splits(
        self,
        where: str | None = None,
        target_size: int | str | None = None,
        max_dest_splits: int | None = None,
        max_source_splits_per_merge: int | None = None,
        spark=None,
        progress=None,
    ) -> dict:
        """MERGE SPLITS: bin-pack small splits per partition into merged splits, one atomic version.
        where: partition predicate; target_size: bytes or "100M"/"2G" (default merge.targetSize, 5G).
        Merges in this process, or as a Spark job when a SparkSession is given."""
        from .commands import merge

        runner = merge.SparkRunner(spark) if spark is not None else None
        return merge.merge_splits(
            self.log, where, target_size, max_dest_splits, max_source_splits_per_merge, runner=runner, progress=progress
        )

    def purge(
        self,
        older_than_hours: float | None = None,
        tx_log_retention_hours: float | None = None,
        dry_run: bool = False,
        progress=None,
    ) -> dict:
        """PURGE INDEXTABLE: delete orphaned splits older than the retention (default 168 h), version
        files covered by a checkpoint and older than the log retention (default 720 h), old states
        and orphan manifests. Retentions under 24 h need purge.retentionCheckEnabled=false."""
        from .commands import purge

        return purge.purge(self.log, older_than_hours, tx_log_retention_hours, dry_run, progress)

    def drop_partitions(self, where: str) -> dict:
        """DROP INDEXTABLES PARTITIONS: remove (logically) every split of the partitions matching `where`."""
        from .commands import partitions

        return partitions.drop_partitions(self.log, where)

    def prewarm_cache(self, where: str | None = None, spark=None) -> list[dict]:
        """PREWARM INDEXTABLES CACHE: fetch the splits (of the partitions matching `where`) into the
        split cache — of every executor, as a Spark job, when a SparkSession is given; else of this
        process's machine. One dict per host and cache directory."""
        from .commands import cache

        return cache.run("prewarm", self.options, spark, self.path, where)

    def describe_transaction_log(self, include_all: bool = False):
        """DESCRIBE INDEXTABLES TRANSACTION LOG: a pyarrow Table, one row per action."""
        from .commands import describe

        return describe.describe_transaction_log(self.log, include_all)

    def skipped_files(self) -> list:
        """The SkipActions (mergeskip) in force at the latest version."""
        from .commands import describe

        return describe.current_skips(self.log)

    def repair_transaction_log(self, target: str, progress=None) -> dict:
        """REPAIR INDEXFILES TRANSACTION LOG: write a clean log of this table's existing splits into
        the empty directory `target` (this table is only read)."""
        from .commands import repair

        return repair.repair_transaction_log(self.storage.full_uri("_transaction_log"), target, self.options, progress)

    @classmethod
    def create(cls, path: str, schema, partition_by=None, options=None) -> "IndexTable":
        """Create an empty table at `path` from a pyarrow.Schema (version 0: protocol + metadata, what a
        Spark write of an empty DataFrame commits); TableExistsError if a table exists there."""
        from .writer import create_table

        create_table(path, schema, partition_by=partition_by, options=options)
        return cls(path, options)
