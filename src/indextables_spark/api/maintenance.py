"""`IndexTable.maintenance`: the table's maintenance operations (as pyiceberg's `Table.maintenance`).

One method per operation of ops/registry.py with a `method` (tests/test_maintenance_methods.py
checks that they agree): it takes the operation's command fields after the table (the table fills
the first; the command class's keyword-only fields stay keyword-only), plus `spark=` (operations
that can run as a Spark job use it) and `progress=` (a callback taking a results.Progress; by
default a bar on stderr when it is a terminal; False: none; api/progress.py), and returns the operation's typed result
(results.py). The same operations as the SQL texts (`MERGE SPLITS …`, `PURGE INDEXTABLE …`), the
SQL table functions and the command line. `gc_state` is this API's alone (PURGE runs it too).

Each method imports its command class on call: `t.maintenance.checkpoint()` does not import the
merge, conversion or partition-filter code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from indextables_spark.core.log.maintenance import gc
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.results.cluster import PrewarmCacheResult
from indextables_spark.results.maintenance import (
    ConvertResult,
    DropPartitionsResult,
    MergeSplitsResult,
    PurgeResult,
    RepairResult,
)
from indextables_spark.api.progress import progress_to
from indextables_spark.results.record import ProgressArg
from indextables_spark.results.state import CheckpointResult, GcStateResult, TruncateTimeTravelResult

if TYPE_CHECKING:
    from indextables_spark.ops.command import Context

_R = TypeVar("_R", covariant=True)


class _Command(Protocol[_R]):
    """A command class of ops/ (ops/registry.py's Command) whose `run` returns `_R`."""

    def run(self, ctx: Context) -> _R: ...


class MaintenanceTable:
    """Checkpoints, compaction, merges, purges, time-travel truncation, partition drops, repair,
    conversion of the reference implementation's splits, the split cache (ops/registry.py)."""

    def __init__(self, log: TransactionLog):
        self.log = log

    def _run(self, command: type[_Command[_R]], spark: Any, progress: ProgressArg, **fields: Any) -> _R:
        """Run `command` on this table: built by its `for_table` when it has one (the table is not
        its first field), else with the table's URI first and `fields` as the command takes them
        (sizes given as text parsed, bools from 0/1). `progress`: api/progress.py's progress_to."""
        from indextables_spark.ops.command import Context, coerced  # lazy, as the command classes

        build = getattr(command, "for_table", None)
        cmd: _Command[_R]
        if build is not None:
            cmd = build(self.log, **fields)
        else:
            cmd = command(self.log.storage.uri, **coerced(command, fields))  # type: ignore[call-arg]
        with progress_to(progress) as callback:
            return cmd.run(Context(self.log.options, spark, callback, table=self.log))

    def checkpoint(self, *, spark: Any = None, progress: ProgressArg = None) -> CheckpointResult:
        """CHECKPOINT: write the V4 Avro state at the latest version (a JSON checkpoint with
        state.format=json); upgrades V1–V3 tables to protocol V4 first."""
        from indextables_spark.ops.maintenance.checkpoint import Checkpoint  # lazy: only the command called

        return self._run(Checkpoint, spark, progress)

    def compact(self, *, spark: Any = None, progress: ProgressArg = None) -> CheckpointResult:
        """COMPACT: rewrite the state cleanly (partition-sorted manifests, no tombstones)."""
        from indextables_spark.ops.maintenance.checkpoint import Compact  # lazy: only the command called

        return self._run(Compact, spark, progress)

    def merge_splits(
        self,
        where: str | None = None,
        *,
        target_size: int | str | None = None,
        max_dest_splits: int | None = None,
        max_source_splits_per_merge: int | None = None,
        spark: Any = None,
        progress: ProgressArg = None,
    ) -> MergeSplitsResult:
        """MERGE SPLITS: bin-pack small splits per partition into merged splits, one atomic version.

        `where`: a partition predicate; `target_size`: bytes or a text such as "100M", "2G" (default
        merge.targetSize, 5G); `max_dest_splits`: at most this many merged splits;
        `max_source_splits_per_merge`: at most this many sources per merged split (at least 2).
        Merges in this process, or as a Spark job when `spark` (a SparkSession) is given."""
        from indextables_spark.ops.maintenance.merge_splits import MergeSplits  # lazy: only the command called

        return self._run(
            MergeSplits,
            spark,
            progress,
            where=where,
            target_size=target_size,
            max_dest_splits=max_dest_splits,
            max_source_splits_per_merge=max_source_splits_per_merge,
        )

    def purge(
        self,
        *,
        older_than_hours: float | None = None,
        tx_log_retention_hours: float | None = None,
        dry_run: bool = False,
        spark: Any = None,
        progress: ProgressArg = None,
    ) -> PurgeResult:
        """PURGE: delete orphaned splits older than `older_than_hours` (None: purge.defaultRetentionHours,
        168), version files covered by a checkpoint and older than `tx_log_retention_hours` (None:
        purge.txLogRetentionHours, 720), old states and orphan manifests. Retentions under 24 h need
        purge.retentionCheckEnabled=false; `dry_run` only reports what would be deleted."""
        from indextables_spark.ops.maintenance.purge import Purge  # lazy: only the command called

        return self._run(
            Purge,
            spark,
            progress,
            older_than_hours=older_than_hours,
            tx_log_retention_hours=tx_log_retention_hours,
            dry_run=dry_run,
        )

    def truncate_time_travel(
        self, *, dry_run: bool = False, spark: Any = None, progress: ProgressArg = None
    ) -> TruncateTimeTravelResult:
        """TRUNCATE TIME TRAVEL: checkpoint at the latest version, then delete older version files,
        checkpoints and states (irreversible: run with dry_run=True first)."""
        from indextables_spark.ops.maintenance.truncate_time_travel import (  # lazy: only the command called
            TruncateTimeTravel,
        )

        return self._run(TruncateTimeTravel, spark, progress, dry_run=dry_run)

    def drop_partitions(self, where: str, *, spark: Any = None, progress: ProgressArg = None) -> DropPartitionsResult:
        """DROP PARTITIONS: remove (logically) every split of the partitions matching the partition
        predicate `where`."""
        from indextables_spark.ops.maintenance.drop_partitions import DropPartitions  # lazy: only the command called

        return self._run(DropPartitions, spark, progress, where=where)

    def repair_transaction_log(self, target: str, *, spark: Any = None, progress: ProgressArg = None) -> RepairResult:
        """REPAIR TRANSACTION LOG: write a clean log of the table's existing splits into the empty
        directory `target` (the table is only read)."""
        from indextables_spark.ops.maintenance.repair import RepairTransactionLog  # lazy: only the command called

        return self._run(RepairTransactionLog, spark, progress, target=target)

    def convert(self, *, dry_run: bool = False, spark: Any = None, progress: ProgressArg = None) -> ConvertResult:
        """CONVERT: rewrite the splits the reference implementation (IndexTables4Spark) wrote into
        ours, in one commit (history and time travel kept), so the table takes writes again;
        `dry_run` reports what would be converted. A table without reference splits gives NO_ACTION."""
        from indextables_spark.ops.maintenance.convert import Convert  # lazy: only the command called

        return self._run(Convert, spark, progress, dry_run=dry_run)

    def prewarm_cache(
        self, where: str | None = None, *, spark: Any = None, progress: ProgressArg = None
    ) -> list[PrewarmCacheResult]:
        """PREWARM CACHE: fetch the splits (of the partitions matching `where`) into the split cache —
        of every executor, as a Spark job, when `spark` is given; else of this machine. One result
        per host and cache directory."""
        from indextables_spark.ops.cluster.cache import PrewarmCache  # lazy: only the command called

        return self._run(PrewarmCache, spark, progress, where=where)

    def gc_state(self, *, dry_run: bool = False, spark: Any = None, progress: ProgressArg = None) -> GcStateResult:
        """Delete old state directories beyond retention and orphan manifests (PURGE runs it too);
        `dry_run` only reports them. `spark` and `progress` are taken as by every method, unused."""
        return gc.gc_state(self.log, dry_run=dry_run)
