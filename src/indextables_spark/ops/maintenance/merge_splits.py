"""MERGE SPLITS: bin-pack small splits of each partition into bigger ones.

1. Plan (driver, pure; merge_plan.py): the live splits of each partition bin-packed into merge
   groups, oldest first, up to the target size.
2. Merge (merge_rewrite.py; one task per group, a Spark job or threads in this process without
   Spark): each group's rows written as one new split; a source that cannot be read is left out
   of its group and reported.
3. Commit (driver): one version with removes (dataChange=false) of every merged source, adds
   (dataChange=false, numMergeOps + 1) of the merged splits and a `mergeskip` action per failed
   source (cooldown `merge.skipCooldownHours`, skipCount + 1). The transaction's resolver rebases
   over concurrent appends (retrying lost races under the commit policy, core/log/commit/policy.py)
   but fails at once when a source was removed concurrently; the merged splits are then deleted
   again (only orphans remain if even that fails). The log's post-commit hook compacts the state
   afterwards (`state.compaction.afterMerge`).

Queries return the same rows before and after: a merged split holds exactly its sources' rows.
"""

from __future__ import annotations

import time
from dataclasses import KW_ONLY, dataclass, replace
from typing import Any, ClassVar

from indextables_spark.config.options import parse_size
from indextables_spark.core.log.commit.transaction import Transaction
from indextables_spark.core.log.model.actions import RemoveFile, SkipAction
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.errors import ConcurrentModificationError
from indextables_spark.ops.command import CommandParser, Context, Target, size
from indextables_spark.ops.maintenance.merge_plan import OPERATION, MergeConfig, MergePlan, plan_merge
from indextables_spark.ops.maintenance.merge_rewrite import LocalRunner, Runner, SparkRunner, run_groups
from indextables_spark.results.maintenance import MergeSplitsResult
from indextables_spark.results.record import ProgressCallback, elapsed_ms
from indextables_spark.results.state import SkippedFile

HOUR_MS = 3600 * 1000


def _skip_actions(plan: MergePlan, failures: list[tuple[str, str]]) -> list[SkipAction]:
    out = []
    for path, reason in failures:
        prev = plan.skips.get(path)
        out.append(
            SkipAction(
                path=path,
                skip_timestamp=plan.now_ms,
                reason=reason[:1000],
                operation="merge",
                retry_after=plan.now_ms + int(plan.config.skip_cooldown_hours * HOUR_MS),
                skip_count=(prev.skip_count + 1) if prev is not None else 1,
            )
        )
    return out


def execute_merge(
    plan: MergePlan, runner: Runner | None = None, progress: ProgressCallback | None = None
) -> MergeSplitsResult:
    started = time.perf_counter()
    g = plan.groups
    planned = MergeSplitsResult(
        table_path=plan.log.storage.uri,
        status="NO_ACTION",
        read_version=plan.read_version,
        predicate=plan.predicate,
        target_size=plan.config.target_size,
        merge_groups=len(g.groups),
        splits_cooling_down=len(g.cooling_down),
        splits_other_mapping=len(g.other_mapping),
        splits_index_only=len(g.index_only),
    )
    if not g.groups:
        return replace(planned, duration_ms=elapsed_ms(started))
    runner = runner or LocalRunner(plan.config.local_parallelism)
    outcomes = run_groups(runner, plan.job, g.groups, progress)
    adds = [o.add for o in outcomes if o.add is not None]
    merged = [s for o in outcomes for s in o.merged]
    skips = _skip_actions(plan, [f for o in outcomes for f in o.failures])
    version = None
    if merged or skips:
        now = int(time.time() * 1000)
        removes = [RemoveFile(s.path, now, False, dict(s.partition_values or {}), s.size) for s in merged]
        txn = Transaction(
            plan.log,
            resolver="merge",
            read_version=plan.read_version,
            operation=OPERATION,
            operation_parameters={
                "predicate": plan.predicate,
                "targetSize": plan.config.target_size,
                "mergeGroups": len(adds),
                "skippedSplits": len(skips),
            },
        )
        txn.remove_files(removes).add_files(adds).add_skips(skips)
        stats: dict[str, list[str]] = {}
        for o in outcomes:
            for key, files in o.stats_files.items():
                stats.setdefault(key, []).extend(files)
        for key, files in stats.items():
            txn.update_stat(key, files)
        try:
            version = txn.commit()
        except ConcurrentModificationError:
            # Never committed (a source removed concurrently, or the commit policy's budget spent):
            # the merged splits are unreferenced.
            plan.log.storage.delete([a.path for a in adds] + [f for fs in stats.values() for f in fs])
            raise
    return replace(
        planned,
        status="NO_ACTION" if version is None else "SUCCESS",
        version=version,
        merged_groups=len(adds),
        source_splits_merged=len(merged),
        splits_created=len(adds),
        bytes_merged=sum(s.size for s in merged),
        bytes_created=sum(a.size for a in adds),
        records_merged=sum(a.num_records or 0 for a in adds),
        splits_skipped=len(skips),
        skipped_files=[SkippedFile.of(s) for s in skips],
        duration_ms=elapsed_ms(started),
    )


def merge_splits(
    log_: TransactionLog,
    where: str | None = None,
    target_size: int | str | None = None,
    max_dest_splits: int | None = None,
    max_source_splits_per_merge: int | None = None,
    runner: Runner | None = None,
    progress: ProgressCallback | None = None,
) -> MergeSplitsResult:
    """MERGE SPLITS '<path>' [WHERE …] [TARGET SIZE …] [MAX DEST SPLITS n] [MAX SOURCE SPLITS PER MERGE n]."""
    if isinstance(target_size, str):
        target_size = parse_size(target_size, "TARGET SIZE")
    cfg = MergeConfig.from_options(log_.options, target_size, max_dest_splits, max_source_splits_per_merge)
    return execute_merge(plan_merge(log_, where, cfg), runner, progress)


@dataclass(frozen=True)
class MergeSplits:
    """MERGE SPLITS <table> [WHERE …] [TARGET SIZE …] [MAX DEST SPLITS n] [MAX SOURCE SPLITS PER MERGE n]:
    bin-pack small splits per partition into merged splits, one atomic version. where: partition
    predicate; target_size: bytes or "100M"/"2G" (default merge.targetSize, 5G). Merges in this
    process, or as a Spark job when a SparkSession is given."""

    result: ClassVar[type[MergeSplitsResult]] = MergeSplitsResult
    path: Target
    where: str | None = None
    _: KW_ONLY
    target_size: int | None = size()
    max_dest_splits: int | None = None
    max_source_splits_per_merge: int | None = None

    @classmethod
    def parse(cls, p: CommandParser) -> MergeSplits:
        path = p.target()
        seen: set[str] = set()
        args: dict[str, Any] = {}
        stops = (("TARGET", "SIZE"), ("MAX", "DEST"), ("MAX", "SOURCE"))
        while p.peek().kind == "word":
            t = p.peek()
            if t.is_word("WHERE"):
                p.once(seen, "WHERE", p.next())
                args["where"] = p.predicate(stops)
            elif t.is_word("TARGET"):
                p.once(seen, "TARGET SIZE", p.next())
                p.expect("SIZE")
                args["target_size"] = p.size("TARGET SIZE")
            elif t.is_word("MAX"):
                p.next()
                kind = p.expect("DEST", "SOURCE", what="DEST SPLITS or SOURCE SPLITS PER MERGE after MAX")
                p.expect("SPLITS")
                if kind.value == "DEST":
                    p.once(seen, "MAX DEST SPLITS", t)
                    args["max_dest_splits"] = p.positive_int("MAX DEST SPLITS")
                else:
                    p.once(seen, "MAX SOURCE SPLITS PER MERGE", t)
                    p.expect("PER")
                    p.expect("MERGE")
                    args["max_source_splits_per_merge"] = n = p.positive_int("MAX SOURCE SPLITS PER MERGE")
                    if n < 2:
                        raise p.error("MAX SOURCE SPLITS PER MERGE must be at least 2 (a merge needs two splits)", t)
            else:
                raise p.error(
                    f"expected WHERE, TARGET SIZE, MAX DEST SPLITS or MAX SOURCE SPLITS PER MERGE, "
                    f"found {t.describe()}",
                    t,
                )
        return cls(path, **args)

    def run(self, ctx: Context) -> MergeSplitsResult:
        return merge_splits(
            ctx.log(self.path),
            self.where,
            self.target_size,
            self.max_dest_splits,
            self.max_source_splits_per_merge,
            runner=SparkRunner(ctx.spark) if ctx.spark is not None else None,
            progress=ctx.progress,
        )
