"""MERGE SPLITS, planning (driver, pure; ops/maintenance/merge_splits.py runs the whole command):
the live splits (optionally only those matching a partition predicate) are grouped by partition
values (splits of older doc mappings are re-indexed with the table's); splits at or above
`skipSplitThreshold` of the target size, and splits whose SkipAction's `retryAfter` is still in
the future, stay out. Each group is filled oldest first up to the target size and
`maxSourceSplitsPerMerge`; groups of one split are dropped; `MAX DEST SPLITS` keeps the oldest
groups. The plan also decides the job every merge task is given (MergeJob).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from indextables_spark.config.options import Options
from indextables_spark.core.log.commit.reference_splits import (
    may_hold_reference_splits,
    refuse_reference_writes,
    snapshot_registry,
)
from indextables_spark.core.log.model.actions import AddFile, SkipAction
from indextables_spark.core.log.model.doc_mapping import doc_mapping_hash
from indextables_spark.core.log.model.protocol_gate import check_writable
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.split.format.column_specs import column_specs
from indextables_spark.core.split.format.doc_mapping import doc_mapping_from_specs
from indextables_spark.core.split.format.indexing import recorded_settings
from indextables_spark.core.split.format.setting_changes import recorded_changes
from indextables_spark.errors import InvalidOptionError

if TYPE_CHECKING:
    from indextables_spark.core.log.read.snapshot import Snapshot

log = logging.getLogger(__name__)

OPERATION = "MERGE SPLITS"


@dataclass(frozen=True)
class MergeConfig:
    target_size: int = 5 << 30  # merge.targetSize / TARGET SIZE
    max_source_splits_per_merge: int = 1000  # merge.maxSourceSplitsPerMerge / MAX SOURCE SPLITS PER MERGE
    max_dest_splits: int | None = None  # MAX DEST SPLITS (no option: per command)
    skip_split_threshold: float = 0.45  # merge.skipSplitThreshold: splits >= this share of the target stay
    skip_cooldown_hours: float = 24.0  # merge.skipCooldownHours: retryAfter of a new SkipAction
    local_parallelism: int = 2  # merge.localParallelism: groups merged at once without Spark

    @classmethod
    def from_options(
        cls,
        opts: Options,
        target_size: int | None = None,
        max_dest_splits: int | None = None,
        max_source_splits_per_merge: int | None = None,
        target_option: str = "merge.targetSize",
        default_target: int = 5 << 30,
    ) -> "MergeConfig":
        target = target_size if target_size is not None else opts.get_size(target_option, default_target)
        max_src = (
            max_source_splits_per_merge
            if max_source_splits_per_merge is not None
            else opts.get_int("merge.maxSourceSplitsPerMerge")
        )
        threshold = opts.get_float("merge.skipSplitThreshold")
        cooldown = opts.get_float("merge.skipCooldownHours")
        par = opts.get_int("merge.localParallelism", min(2, os.cpu_count() or 1))
        if target <= 0:
            raise InvalidOptionError(
                f"MERGE SPLITS: target size must be positive, got {target} "
                f"(TARGET SIZE / spark.indextables.{target_option})"
            )
        if max_src < 2:
            raise InvalidOptionError(
                f"MERGE SPLITS: max source splits per merge must be at least 2, got {max_src} "
                f"(MAX SOURCE SPLITS PER MERGE / spark.indextables.merge.maxSourceSplitsPerMerge)"
            )
        if max_dest_splits is not None and max_dest_splits < 1:
            raise InvalidOptionError(f"MERGE SPLITS: MAX DEST SPLITS must be at least 1, got {max_dest_splits}")
        if not 0.0 < threshold <= 1.0:
            raise InvalidOptionError(
                f"option 'spark.indextables.merge.skipSplitThreshold': expected a number in (0, 1], got {threshold}"
            )
        if cooldown < 0:
            raise InvalidOptionError(
                f"option 'spark.indextables.merge.skipCooldownHours': must be >= 0, got {cooldown}"
            )
        if par < 1:
            raise InvalidOptionError(f"option 'spark.indextables.merge.localParallelism': must be >= 1, got {par}")
        return cls(target, max_src, max_dest_splits, threshold, cooldown, par)


@dataclass
class MergeGroup:
    index: int
    partition_values: dict[str, str | None]
    doc_mapping_ref: str | None
    sources: list[AddFile]
    # source path -> its delete logs (deleteLog wire JSON): the merged split is written without
    # the deleted rows ("rewrite away applied deletes"); see core/log/deletes/delete_logs.py
    deletes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.sources)


@dataclass
class GroupPlan:
    groups: list[MergeGroup]
    cooling_down: list[str] = field(default_factory=list)  # active SkipAction: not retried yet
    other_mapping: list[str] = field(default_factory=list)  # doc mapping differs from the table's
    # splits with index-only columns (indexing.indexonlyfields): a merge rebuilds a split from its
    # rows, which do not hold those columns, so it would lose their index
    index_only: list[str] = field(default_factory=list)
    too_large: int = 0  # already >= skipSplitThreshold × target


def _age_key(f: AddFile) -> tuple[int, int, str]:
    return (f.added_at_version if f.added_at_version is not None else -1, f.modification_time, f.path)


def plan_groups(
    files: Sequence[AddFile],
    skips: dict[str, SkipAction],
    now_ms: int,
    cfg: MergeConfig,
    mergeable_ref: str | None,
    index_only: bool = False,
    rewritable_refs: frozenset[str] = frozenset(),
) -> GroupPlan:
    """Bin-pack the merge candidates among `files` (see the module doc): splits of the table's doc
    mapping `mergeable_ref` and of the mappings `rewritable_refs` (older mappings of the table,
    and those CONVERT kept of another implementation's index: a merge re-indexes their rows with
    the table's settings)."""
    plan = GroupPlan([])
    limit = cfg.skip_split_threshold * cfg.target_size
    buckets: dict[tuple[Any, ...], list[AddFile]] = {}
    for f in files:
        s = skips.get(f.path)
        if s is not None and s.retry_after is not None and s.retry_after > now_ms:
            plan.cooling_down.append(f.path)
            continue
        if f.size >= limit:
            plan.too_large += 1
            continue
        if f.doc_mapping_ref != mergeable_ref and f.doc_mapping_ref not in rewritable_refs:
            plan.other_mapping.append(f.path)
            continue
        if index_only:
            plan.index_only.append(f.path)
            continue
        key = tuple(sorted((f.partition_values or {}).items(), key=lambda kv: kv[0]))
        buckets.setdefault(key, []).append(f)
    groups: list[tuple[tuple[Any, ...], list[AddFile]]] = []
    for key, members in buckets.items():
        current: list[AddFile] = []
        size = 0
        for f in sorted(members, key=_age_key):
            if current and (size + f.size > cfg.target_size or len(current) >= cfg.max_source_splits_per_merge):
                groups.append((key, current))
                current, size = [], 0
            current.append(f)
            size += f.size
        groups.append((key, current))
    groups = [(k, g) for k, g in groups if len(g) >= 2]
    groups.sort(key=lambda kg: min(_age_key(f) for f in kg[1]))  # oldest first
    if cfg.max_dest_splits is not None:
        groups = groups[: cfg.max_dest_splits]
    plan.groups = [MergeGroup(i, dict(k), mergeable_ref, g) for i, (k, g) in enumerate(groups)]
    return plan


@dataclass(frozen=True)
class MergeJob:
    """Decided once on the driver, shipped to every task (picklable)."""

    table_uri: str
    options: Options  # the user's options (storage credentials, cache) over the table settings
    schema_json: dict[str, Any]
    partition_columns: list[str]


@dataclass
class MergePlan:
    """Everything decided before merging: the snapshot read, the groups, the job."""

    log: TransactionLog
    read_version: int
    predicate: str | None
    config: MergeConfig
    job: MergeJob
    groups: GroupPlan
    skips: dict[str, SkipAction]
    now_ms: int


def _writer_options(snapshot: Snapshot, options: Options, uri: str) -> Options:
    """The table's recorded settings (indexing.*, stats.*) with the user's options on top, as for a
    write: indexing options that differ from the table's are refused as a write's are (merged
    splits are indexed again: core/split/format/setting_changes.py)."""
    configuration = snapshot.metadata_action.configuration
    fields = snapshot.schema_json["fields"]
    recorded_changes(uri, configuration, options, fields, fields, "MERGE SPLITS")
    return Options.of(recorded_settings(configuration), options)


def plan_merge(
    log_: TransactionLog, where: str | None = None, config: MergeConfig | None = None, now_ms: int | None = None
) -> MergePlan:
    cfg = config or MergeConfig.from_options(log_.options)
    if where is not None and not where.strip():
        raise InvalidOptionError("MERGE SPLITS: the WHERE predicate is empty")
    snap = log_.pruned_snapshot(where)
    check_writable(snap.protocol_action, f"table {log_.storage.uri}")
    # The whole table counts, not only the partitions of `where` (decoded only when the table
    # knows a reference doc mapping at all).
    partial = where is not None and may_hold_reference_splits(snapshot_registry(snap))
    refuse_reference_writes(log_.snapshot(snap.version) if partial else snap, log_.storage.uri, OPERATION)
    opts = _writer_options(snap, log_.options, log_.storage.uri)
    parts = snap.partition_columns
    specs = column_specs(snap.schema_json, parts, opts)
    mapping_ref = doc_mapping_hash(doc_mapping_from_specs(specs))
    now = int(time.time() * 1000) if now_ms is None else now_ms
    index_only = any(s.index_only for s in specs)
    registry = snapshot_registry(snap)
    # splits of the table's older doc mappings (written before a column was added, or declared a
    # vector) and converted ones are re-indexed with the table's settings; the reference's own
    # splits were refused above
    rewritable = frozenset(registry)
    groups = plan_groups(snap.files, snap.skips, now, cfg, mapping_ref, index_only, rewritable)
    if groups.index_only:
        log.warning(
            "MERGE SPLITS %s: %d splits left as they are: the table has index-only columns "
            "(indexing.indexonlyfields), whose values only the index holds, and a merge rebuilds splits from rows",
            log_.storage.uri,
            len(groups.index_only),
        )
    from indextables_spark.core.log.deletes.delete_logs import (
        deletes_json,  # lazy: keeps `import indextables_spark.ops.maintenance.merge_plan` free of numpy
    )

    for g in groups.groups:
        g.deletes = deletes_json(snap, g.sources)
    job = MergeJob(log_.storage.uri, opts, snap.schema_json, list(parts))
    return MergePlan(log_, snap.version, where, cfg, job, groups, dict(snap.skips), now)
