"""MERGE SPLITS, rewriting (ops/maintenance/merge_splits.py runs the whole command): one task per
merge group, a Spark job or threads in this process without Spark. The sources' rows are read in
row order and written with `SplitWriter` (the table's doc mapping) as one new split; a merge of
companion splits indexes their source files again. A source that cannot be read (missing,
truncated, corrupt, row count not what the log says) is left out of its group and reported; the
group is merged without it.
"""

from __future__ import annotations

import functools
import logging
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterator, Protocol

import pyarrow as pa

from indextables_spark.core.log.model.actions import AddFile, DeleteLog
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.schema.partitions import partition_value_array
from indextables_spark.core.split.cache.companion_rows import open_source_parquet
from indextables_spark.core.split.format.bundle import load_extracted_footer
from indextables_spark.core.split.format.companion import CompanionSource, companion_info
from indextables_spark.core.storage import Storage, open_storage
from indextables_spark.errors import IndexTablesError, SplitFormatError
from indextables_spark.ops.companion.rows import row_groups
from indextables_spark.ops.maintenance.merge_plan import MergeGroup, MergeJob
from indextables_spark.results.record import ProgressCallback, report

if TYPE_CHECKING:
    from indextables_spark.core.split.format.companion import CompanionInfo
    from indextables_spark.core.split.write.builder import SplitWriter

log = logging.getLogger(__name__)

READ_BATCH_ROWS = 65_536
NO_ROLL = 1 << 62  # one output split per group, whatever the write target size options say


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
        load_split_deletes,  # lazy: keeps `import indextables_spark.ops.maintenance.merge_rewrite` free of numpy
    )
    from indextables_spark.core.split.cache.cache import (
        get_cache,  # lazy: keeps `import indextables_spark.ops.maintenance.merge_rewrite` free of numpy
    )
    from indextables_spark.core.split.read.reader import (
        SplitReader,  # lazy: keeps `import indextables_spark.ops.maintenance.merge_rewrite` free of numpy
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
        get_cache,  # lazy: keeps `import indextables_spark.ops.maintenance.merge_rewrite` free of numpy
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
                names = dict(f.columns)  # renamed columns, as the source split recorded them
                rows = row_groups(pf, columns, names)
                nested = dict(f.nested)  # and nested fields, renamed as the source split read them
                writer.write_source_file(f.key, f.uri, f.size, group.partition_values, rows, names, nested)
            except _SOURCE_ERRORS as e:
                raise SourceSplitError(src.path, str(e) or type(e).__name__) from e


def _write_merged(
    job: MergeJob, storage: Storage, group: MergeGroup, sources: list[AddFile]
) -> tuple[AddFile | None, dict[str, list[str]]]:
    from indextables_spark.core.split.write.builder import (
        SplitWriter,  # lazy: keeps `import indextables_spark.ops.maintenance.merge_rewrite` free of numpy
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
    def finish(self, job: MergeJob, groups: list[MergeGroup]) -> Iterator[list[GroupOutcome]]:
        """Merge the groups; yields their outcomes as they finish (one by one, or all at once)."""
        ...


@dataclass
class LocalRunner:
    """Merge groups in this process (threads: Tantivy and Arrow release the GIL for the heavy work)."""

    parallelism: int = 2

    def finish(self, job: MergeJob, groups: list[MergeGroup]) -> Iterator[list[GroupOutcome]]:
        with ThreadPoolExecutor(max_workers=max(1, min(self.parallelism, len(groups)))) as pool:
            futures = [pool.submit(merge_group, job, g) for g in groups]
            for fut in as_completed(futures):
                yield [fut.result()]


@dataclass
class SparkRunner:
    """One Spark task per merge group; the tasks need no session (the commit is on the driver)."""

    spark: Any

    def finish(self, job: MergeJob, groups: list[MergeGroup]) -> Iterator[list[GroupOutcome]]:
        from indextables_spark.config.sessions import run_tasks  # a DataFrame job: classic and Spark Connect sessions

        description = f"MERGE SPLITS {job.table_uri}: {len(groups)} groups"
        yield run_tasks(self.spark, functools.partial(merge_group, job), groups, description=description)


def run_groups(
    runner: Runner, job: MergeJob, groups: list[MergeGroup], progress: ProgressCallback | None
) -> list[GroupOutcome]:
    """The groups' outcomes in group order, merged by `runner`; `progress` hears of the splits of
    each group that finishes ("merging", splits merged of the groups' splits)."""
    out: list[GroupOutcome] = []
    sizes = {g.index: len(g.sources) for g in groups}
    total, done = sum(sizes.values()), 0
    report(progress, "merging", 0, total, "splits")
    for finished in runner.finish(job, groups):
        out.extend(finished)
        done += sum(sizes.get(o.index, 0) for o in finished)
        report(progress, "merging", done, total, "splits")
    return sorted(out, key=lambda o: o.index)
