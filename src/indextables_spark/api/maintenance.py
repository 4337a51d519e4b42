"""`IndexTable.maintenance`: the table's maintenance operations (as pyiceberg's `Table.maintenance`).

The same operations as the SQL texts (`MERGE SPLITS …`, `PURGE INDEXTABLE …`), the SQL table
functions and the command line; each returns a typed result (api/results.py).
"""

from __future__ import annotations

from typing import Any, cast

from indextables_spark.core.log import gc, maintenance
from indextables_spark.core.log.table_log import TransactionLog
from indextables_spark.api.results import (
    CheckpointResult,
    ConvertResult,
    DropPartitionsResult,
    GcStateResult,
    MergeSplitsResult,
    PrewarmCacheResult,
    Progress,
    PurgeResult,
    RepairResult,
    TruncateTimeTravelResult,
)
from indextables_spark.ops import cache, convert, merge_splits as merge, drop_partitions as partitions, purge, repair


class MaintenanceTable:
    """Checkpoints, compaction, merges, purges, time-travel truncation, partition drops, repair,
    conversion of the reference implementation's splits."""

    def __init__(self, log: TransactionLog):
        self.log = log

    def checkpoint(self) -> CheckpointResult:
        """CHECKPOINT: the V4 Avro state at the latest version (a JSON checkpoint with
        state.format=json); upgrades V1–V3 tables to protocol V4 first."""
        return maintenance.checkpoint(self.log)

    def compact(self) -> CheckpointResult:
        """COMPACT: rewrite the state cleanly (partition-sorted manifests, no tombstones)."""
        return maintenance.compact(self.log)

    def merge_splits(
        self,
        where: str | None = None,
        *,
        target_size: int | str | None = None,
        max_dest_splits: int | None = None,
        max_source_splits_per_merge: int | None = None,
        spark: Any = None,
        progress: Progress | None = None,
    ) -> MergeSplitsResult:
        """MERGE SPLITS: bin-pack small splits per partition into merged splits, one atomic version.
        where: partition predicate; target_size: bytes or "100M"/"2G" (default merge.targetSize,
        5G). Merges in this process, or as a Spark job when a SparkSession is given."""
        runner = merge.SparkRunner(spark) if spark is not None else None
        return merge.merge_splits(
            self.log, where, target_size, max_dest_splits, max_source_splits_per_merge, runner=runner, progress=progress
        )

    def purge(
        self,
        *,
        older_than_hours: float | None = None,
        tx_log_retention_hours: float | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> PurgeResult:
        """PURGE INDEXTABLE: delete orphaned splits older than the retention (default 168 h),
        version files covered by a checkpoint and older than the log retention (default 720 h),
        old states and orphan manifests. Retentions under 24 h need
        purge.retentionCheckEnabled=false."""
        return purge.purge(self.log, older_than_hours, tx_log_retention_hours, dry_run, progress)

    def truncate_time_travel(self, *, dry_run: bool = False) -> TruncateTimeTravelResult:
        """Checkpoint at the latest version, then delete older version files, checkpoints and
        states (irreversible: run with dry_run=True first)."""
        return maintenance.truncate_time_travel(self.log, dry_run=dry_run)

    def gc_state(self, *, dry_run: bool = False) -> GcStateResult:
        """Old state directories beyond retention and orphan manifests (PURGE runs it too)."""
        return gc.gc_state(self.log, dry_run=dry_run)

    def drop_partitions(self, where: str) -> DropPartitionsResult:
        """DROP INDEXTABLES PARTITIONS: remove (logically) every split of the partitions matching `where`."""
        return partitions.drop_partitions(self.log, where)

    def repair_transaction_log(self, target: str, *, progress: Progress | None = None) -> RepairResult:
        """REPAIR INDEXFILES TRANSACTION LOG: write a clean log of this table's existing splits into
        the empty directory `target` (this table is only read)."""
        source = self.log.storage.full_uri("_transaction_log")
        return repair.repair_transaction_log(source, target, self.log.options, progress)

    def convert(self, *, dry_run: bool = False, progress: Progress | None = None) -> ConvertResult:
        """CONVERT INDEXTABLES TABLE: rewrite the splits the reference implementation
        (IndexTables4Spark) wrote into ours, in one commit (history and time travel kept), so the
        table takes writes again; dry_run reports what would be converted. Splits of ours are left
        alone; a table without reference splits gives NO_ACTION. See ops/convert.py."""
        return convert.convert_table(self.log, dry_run=dry_run, progress=progress)

    def prewarm_cache(self, where: str | None = None, *, spark: Any = None) -> list[PrewarmCacheResult]:
        """PREWARM INDEXTABLES CACHE: fetch the splits (of the partitions matching `where`) into the
        split cache — of every executor, as a Spark job, when a SparkSession is given; else of
        this process's machine. One result per host and cache directory."""
        rows = cache.run("prewarm", self.log.options, spark, self.log.storage.uri, where)
        return cast(list[PrewarmCacheResult], rows)
