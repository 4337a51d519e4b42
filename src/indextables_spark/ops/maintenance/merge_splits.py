"""MERGE SPLITS: bin-pack small splits of each partition into bigger ones.

(Over 500 lines: one algorithm — plan, per-group merge, local and Spark runners, the commit, and
its command — whose parts share the plan and job types.)

1. Plan (driver, pure): the live splits (optionally only those matching a partition predicate)
   are grouped by partition values (splits of older doc mappings are re-indexed with the table's); splits at or above `skipSplitThreshold` of the
   target size, and splits whose SkipAction's `retryAfter` is still in the future, stay out. Each
   group is filled oldest first up to the target size and `maxSourceSplitsPerMerge`; groups of one
   split are dropped; `MAX DEST SPLITS` keeps the oldest groups.
2. Merge (one task per group; a Spark job, or threads in this process without Spark): the source
   splits' rows are read in row order and written with `SplitWriter` (the table's doc mapping) as
   one new split. A source that cannot be read (missing, truncated, corrupt, row count not what the
   log says) is left out of its group and reported; the group is merged without it.
3. Commit (driver): one version with removes (dataChange=false) of every merged source, adds
   (dataChange=false, numMergeOps + 1) of the merged splits and a `mergeskip` action per failed
   source (cooldown `merge.skipCooldownHours`, skipCount + 1). The transaction's resolver rebases
   over concurrent appends but fails when a source was removed concurrently; the merged splits are
   then deleted again (only orphans remain if even that fails). The log's post-commit hook compacts
   the state afterwards (`state.compaction.afterMerge`).

Queries return the same rows before and after: a merged split holds exactly its sources' rows.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Protocol, Sequence

import pyarrow as pa

from indextables_spark.config.options import Options, parse_size
from indextables_spark.core.log.model.actions import AddFile, DeleteLog, RemoveFile, SkipAction
from indextables_spark.core.log.model.doc_mapping import doc_mapping_hash
from indextables_spark.core.log.model.protocol_gate import check_writable
from indextables_spark.core.log.commit.reference_splits import (
    may_hold_reference_splits,
    refuse_reference_writes,
    snapshot_registry,
)
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.log.commit.transaction import Transaction
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.schema.partitions import partition_value_array
from indextables_spark.core.split.cache.companion_rows import open_source_parquet
from indextables_spark.core.split.format.companion import CompanionSource, companion_info
from indextables_spark.core.split.format.bundle import load_extracted_footer
from indextables_spark.core.split.format.column_specs import column_specs
from indextables_spark.core.split.format.doc_mapping import doc_mapping_from_specs
from indextables_spark.core.split.format.indexing import recorded_settings
from indextables_spark.core.storage import Storage, open_storage
from indextables_spark.errors import ConcurrentModificationError, IndexTablesError, InvalidOptionError, SplitFormatError
from indextables_spark.ops.companion.build import row_groups
from indextables_spark.ops.registry import CommandParser, Context, Target, size
from indextables_spark.results import MergeSplitsResult, Progress, SkippedFile, elapsed_ms

if TYPE_CHECKING:
    from indextables_spark.core.log.read.snapshot import Snapshot
    from indextables_spark.core.split.format.companion import CompanionInfo
    from indextables_spark.core.split.write.builder import SplitWriter

log = logging.getLogger(__name__)

HOUR_MS = 3600 * 1000
OPERATION = "MERGE SPLITS"
READ_BATCH_ROWS = 65_536
NO_ROLL = 1 << 62  # one output split per group, whatever the write target size options say


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


# ---- planning (pure) ------------------------------------------------------------------------------


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


# ---- what every task needs -------------------------------------------------------------------------


@dataclass(frozen=True)
class MergeJob:
    """Decided once on the driver, shipped to every task (picklable)."""

    table_uri: str
    options: Options  # the user's options (storage credentials, cache) over the table settings
    schema_json: dict[str, Any]
    partition_columns: list[str]


@dataclass
class GroupOutcome:
    index: int
    add: AddFile | None  # the merged split (None: nothing to merge)
    merged: list[AddFile] = field(default_factory=list)  # sources now in `add`
    failures: list[tuple[str, str]] = field(default_factory=list)  # (source path, reason)
    stats_files: dict[str, list[str]] = field(default_factory=dict)  # written with `add` (e.g. Bloom filters)


class SourceSplitError(IndexTablesError):
    """A source split of a merge group cannot be read; the group is merged without it."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"source split {path}: {reason}")
        self.path = path
        self.reason = reason


# Errors that mean "this source split is unreadable" (missing, truncated, corrupt index or rows).
_SOURCE_ERRORS = (IndexTablesError, pa.ArrowException, OSError)


def _source_batches(
    job: MergeJob, storage: Storage, src: AddFile, delete_logs: list[dict[str, Any]] | None = None
) -> Iterator[pa.RecordBatch]:
    from indextables_spark.core.log.deletes.delete_logs import (
        load_split_deletes,  # lazy: keeps `import indextables_spark.ops.maintenance.merge_splits` free of numpy
    )
    from indextables_spark.core.split.cache.cache import (
        get_cache,  # lazy: keeps `import indextables_spark.ops.maintenance.merge_splits` free of numpy
    )
    from indextables_spark.core.split.read.reader import (
        SplitReader,  # lazy: keeps `import indextables_spark.ops.maintenance.merge_splits` free of numpy
    )

    reader = SplitReader(get_cache(job.options).local_dir(storage, src))
    deletes = load_split_deletes(
        storage, [DeleteLog.from_json(d) for d in delete_logs or ()], reader.num_rows, src.path
    )
    rows = 0
    for b in reader.read(batch_size=READ_BATCH_ROWS, deletes=deletes):
        rows += b.num_rows
        yield b
    if deletes is not None:
        if rows != reader.count(deletes=deletes):
            raise SplitFormatError(f"read {rows} rows, the split holds {reader.count(deletes=deletes)} live rows")
    elif rows != reader.num_rows or (src.num_records is not None and rows != src.num_records):
        raise SplitFormatError(
            f"read {rows} rows, the split footer says {reader.num_rows} and the log says {src.num_records}"
        )


def _with_partition_columns(
    batch: pa.RecordBatch, group: MergeGroup, full_schema: pa.Schema, partition_columns: list[str]
) -> pa.RecordBatch:
    """Splits do not store partition columns; SplitWriter wants every column of the table."""

    n = batch.num_rows
    names = list(batch.schema.names)
    cols = list(batch.columns)
    for c in partition_columns:
        cols.append(partition_value_array(group.partition_values.get(c), full_schema.field(c).type, n))
        names.append(c)
    return pa.RecordBatch.from_arrays(cols, names=names)


def _companion_sources(
    job: MergeJob, storage: Storage, group: MergeGroup, sources: list[AddFile]
) -> list[CompanionInfo]:
    """The companion sections of companion source splits (their source files, in order)."""
    from indextables_spark.core.split.cache.cache import (
        get_cache,  # lazy: keeps `import indextables_spark.ops.maintenance.merge_splits` free of numpy
    )

    infos: list[CompanionInfo] = []
    for src in sources:
        if group.deletes.get(src.path):
            raise SourceSplitError(src.path, "a companion split with deleted rows is not merged")
        try:
            local = get_cache(job.options).local_dir(storage, src)
            info = companion_info(load_extracted_footer(local).raw, src.path)
        except _SOURCE_ERRORS as e:
            raise SourceSplitError(src.path, str(e) or type(e).__name__) from e
        if info is None:
            raise SourceSplitError(src.path, "its footer has no companion section")
        infos.append(info)
    return infos


def _index_companion_files(
    job: MergeJob, writer: SplitWriter, group: MergeGroup, sources: list[AddFile], infos: list[CompanionInfo]
) -> None:
    """A merge of companion splits indexes their source files again into one companion split."""

    columns = writer.stored_schema.names
    for src, info in zip(sources, infos):
        for f in info.files:
            try:
                pf = open_source_parquet(f.uri, f.size, job.options, f"companion split {src.path}")
                writer.write_source_file(f.key, f.uri, f.size, group.partition_values, row_groups(pf, columns))
            except _SOURCE_ERRORS as e:
                raise SourceSplitError(src.path, str(e) or type(e).__name__) from e


def _write_merged(
    job: MergeJob, storage: Storage, group: MergeGroup, sources: list[AddFile]
) -> tuple[AddFile | None, dict[str, list[str]]]:
    from indextables_spark.core.split.write.builder import (
        SplitWriter,  # lazy: keeps `import indextables_spark.ops.maintenance.merge_splits` free of numpy
    )

    full_schema = arrow_schema(job.schema_json)
    companion = None
    if any(s.companion_source_files is not None for s in sources):
        infos = _companion_sources(job, storage, group, sources)
        versions = [i.version for i in infos if i.version is not None]
        companion = CompanionSource(infos[0].format, infos[0].source, max(versions) if versions else None)
    with SplitWriter(
        storage, job.schema_json, job.partition_columns, job.options, target_split_bytes=NO_ROLL, companion=companion
    ) as writer:
        if companion is not None:
            _index_companion_files(job, writer, group, sources, infos)
        for src in sources if companion is None else ():
            batches = _source_batches(job, storage, src, group.deletes.get(src.path))
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                except _SOURCE_ERRORS as e:
                    raise SourceSplitError(src.path, str(e) or type(e).__name__) from e
                writer.write_batch(_with_partition_columns(batch, group, full_schema, job.partition_columns))
        adds = writer.finish()
        stats_files = dict(writer.stats_files)
    if len(adds) > 1:
        raise IndexTablesError(f"internal: merge group {group.index} produced {len(adds)} splits instead of one")
    if not adds:
        return None, {}
    add = adds[0]
    if add.doc_mapping_ref != group.doc_mapping_ref:
        storage.delete([add.path, *(f for fs in stats_files.values() for f in fs)])
        raise IndexTablesError(
            f"internal: merged split of group {group.index} has doc mapping "
            f"{add.doc_mapping_ref}, its sources {group.doc_mapping_ref}"
        )
    tags = sorted({t for s in sources for t in (s.split_tags or [])})
    return replace(
        add,
        partition_values=dict(group.partition_values),  # the sources' exact strings, not a re-rendering
        data_change=False,
        num_merge_ops=max((s.num_merge_ops or 0) for s in sources) + 1,
        split_tags=tags or None,
    ), stats_files


def merge_group(job: MergeJob, group: MergeGroup) -> GroupOutcome:
    """Merge one group (runs in a Spark task or a local thread; needs no session)."""
    storage = open_storage(job.table_uri, job.options)
    sources = list(group.sources)
    failures: list[tuple[str, str]] = []
    while len(sources) >= 2:
        try:
            add, stats_files = _write_merged(job, storage, group, sources)
        except SourceSplitError as e:
            log.warning("MERGE SPLITS %s: leaving out %s", job.table_uri, e)
            failures.append((e.path, e.reason))
            sources = [s for s in sources if s.path != e.path]
            continue
        return GroupOutcome(group.index, add, sources, failures, stats_files)
    return GroupOutcome(group.index, None, [], failures)


# ---- runners ---------------------------------------------------------------------------------------


class Runner(Protocol):
    def run(self, job: MergeJob, groups: list[MergeGroup], progress: Progress | None) -> list[GroupOutcome]: ...


@dataclass
class LocalRunner:
    """Merge groups in this process (threads: Tantivy and Arrow release the GIL for the heavy work)."""

    parallelism: int = 2

    def run(self, job: MergeJob, groups: list[MergeGroup], progress: Progress | None) -> list[GroupOutcome]:
        out: list[GroupOutcome] = []
        if progress:
            progress("merging", 0, len(groups))
        with ThreadPoolExecutor(max_workers=max(1, min(self.parallelism, len(groups)))) as pool:
            futures = [pool.submit(merge_group, job, g) for g in groups]
            for fut in as_completed(futures):
                out.append(fut.result())
                if progress:
                    progress("merging", len(out), len(groups))
        return sorted(out, key=lambda o: o.index)


@dataclass
class SparkRunner:
    """One Spark task per merge group; the tasks need no session (the commit is on the driver)."""

    spark: Any

    def run(self, job: MergeJob, groups: list[MergeGroup], progress: Progress | None) -> list[GroupOutcome]:
        from indextables_spark.config.sessions import run_tasks  # a DataFrame job: classic and Spark Connect sessions

        if progress:
            progress("merging", 0, len(groups))
        out = run_tasks(
            self.spark,
            functools.partial(merge_group, job),
            groups,
            description=f"MERGE SPLITS {job.table_uri}: {len(groups)} groups",
        )
        if progress:
            progress("merging", len(groups), len(groups))
        return sorted(out, key=lambda o: o.index)


# ---- the command -------------------------------------------------------------------------------------


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


def _writer_options(snapshot: Snapshot, options: Options) -> Options:
    """The table's recorded settings (indexing.*, stats.*) with the user's options on top, as for a write."""

    return Options.of(recorded_settings(snapshot.metadata_action.configuration), options)


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
    opts = _writer_options(snap, log_.options)
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
        deletes_json,  # lazy: keeps `import indextables_spark.ops.maintenance.merge_splits` free of numpy
    )

    for g in groups.groups:
        g.deletes = deletes_json(snap, g.sources)
    job = MergeJob(log_.storage.uri, opts, snap.schema_json, list(parts))
    return MergePlan(log_, snap.version, where, cfg, job, groups, dict(snap.skips), now)


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


def execute_merge(plan: MergePlan, runner: Runner | None = None, progress: Progress | None = None) -> MergeSplitsResult:
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
    outcomes = runner.run(plan.job, g.groups, progress)
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
            # Never committed (every attempt lost a put-if-absent race): the merged splits are unreferenced.
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
    progress: Progress | None = None,
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
