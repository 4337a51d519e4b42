"""The driver side of BUILD INDEXTABLES COMPANION around its index tasks: which source files a
build indexes (those the WHERE partition predicate selects that are not indexed yet), the splits
that go (none of their files is left in the source), grouped per partition into tasks, and the one
commit of what the tasks wrote."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from indextables_spark.config.options import Options
from indextables_spark.core.split.format.companion import CONFIG_FORMAT, CONFIG_ROOT, CONFIG_SOURCE, CONFIG_VERSION
from indextables_spark.errors import InvalidOptionError

if TYPE_CHECKING:
    from indextables_spark.core.log.model.actions import AddFile, DeleteLog
    from indextables_spark.core.log.read.table_log import TransactionLog
    from indextables_spark.ops.companion.nested_fields import SourceNesting
    from indextables_spark.ops.companion.sources import SourceFile, SourceSnapshot


@dataclass(frozen=True)
class IndexGroup:
    """One task: source files of one partition, indexed into one companion split."""

    partition_values: dict[str, str | None]
    files: list[SourceFile]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class IndexJob:
    """What every task needs (pickled to executors)."""

    location: str
    options: dict[str, str]
    schema_json: dict[str, Any]
    partition_columns: list[str]
    format: str
    source: str
    version: int | None
    # how the files name the columns (ops/companion/rows.py): {column: physical name} (Delta
    # column mapping), {column: Parquet field id} (Iceberg; Delta column mapping mode `id`)
    physical_names: dict[str, str] = field(default_factory=dict)
    field_ids: dict[str, int] = field(default_factory=dict)
    nested: dict[str, SourceNesting] = field(default_factory=dict)  # nested fields (ops/companion/nested_fields.py)


@dataclass(frozen=True)
class SyncPlan:
    """What a build changes: files to index, splits to remove."""

    todo: list[SourceFile]
    stale: list[AddFile]  # splits to remove: none of their source files is left, or indexed again
    files_removed: int  # indexed source files that are gone (and not yet known gone)


def indexing_options(indexing: Mapping[str, str] | None) -> dict[str, str]:
    """INDEXING MODES ('col':'text', …) as the table's options (indexing.typemap.<col>)."""
    return {f"indexing.typemap.{col}": str(mode) for col, mode in (indexing or {}).items()}


def plan_sync(snapshot: SourceSnapshot, live: Sequence[AddFile], where: str | None) -> SyncPlan:
    """Compare the source's files with the companion table's live splits (their
    `companionSourceFiles`): new files of the partitions WHERE selects are indexed; a split none of
    whose files the source still has goes. (A split that lost only some files stays: their rows
    are logged as deleted, ops/companion/deletes.py.)"""
    in_source = {f.key for f in snapshot.files}
    indexed = {k for a in live for k in a.companion_source_files or ()}
    stale = [a for a in live if a.companion_source_files and not any(k in in_source for k in a.companion_source_files)]
    todo = [f for f in select_files(snapshot, where) if f.key not in indexed]
    return SyncPlan(todo, stale, len({k for a in stale for k in a.companion_source_files or ()}))


def reindexing(sync: SyncPlan, snapshot: SourceSnapshot, splits: Sequence[AddFile]) -> SyncPlan:
    """`sync` with these live splits going and their source files indexed again (the source's
    changes to them cannot be logged as deleted rows: rows came back, columns were renamed)."""
    stale = {a.path for a in sync.stale}
    going = [a for a in splits if a.path not in stale]
    keys = {k for a in going for k in a.companion_source_files or ()}
    queued = {f.key for f in sync.todo}
    todo = list(sync.todo) + [f for f in snapshot.files if f.key in keys and f.key not in queued]
    return replace(sync, todo=todo, stale=list(sync.stale) + going)


def plan_groups(files: Sequence[SourceFile], partition_columns: Sequence[str], target_bytes: int) -> list[IndexGroup]:
    """Files grouped per partition, in source order, into groups of about target_bytes."""
    by_partition: dict[tuple[str | None, ...], list[SourceFile]] = {}
    for f in files:  # (and per cluster: an Iceberg partition tuple, transforms included)
        by_partition.setdefault((*(f.partition_values.get(c) for c in partition_columns), f.cluster), []).append(f)
    groups = []
    for full_key, members in by_partition.items():
        key = full_key[:-1]
        current: list[SourceFile] = []
        size = 0
        for f in members:
            if current and size + f.size > target_bytes:
                groups.append(IndexGroup(dict(zip(partition_columns, key)), current))
                current, size = [], 0
            current.append(f)
            size += f.size
        if current:
            groups.append(IndexGroup(dict(zip(partition_columns, key)), current))
    return groups


def select_files(snapshot: SourceSnapshot, where: str | None) -> list[SourceFile]:
    """The source files the WHERE partition predicate selects (exactly, on partition values)."""
    if not where:
        return list(snapshot.files)
    # lazy, as every import below: the log and filter modules load when a build runs, not with
    # the command class (ops/registry.py loads it to parse SQL)
    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.core.log.state.file_entries import add_files_to_table  # lazy: see above
    from indextables_spark.core.schema.arrow_types import spark_schema_json  # lazy: see above
    from indextables_spark.expr.partition_filter import filter_mask, parse_partition_filter  # lazy: see above

    if not snapshot.partition_columns:
        raise InvalidOptionError(
            f"WHERE {where}: the {snapshot.format} table {snapshot.source} has no partition "
            f"columns (WHERE selects partitions to index)"
        )
    types = {
        f["name"]: f["type"] if isinstance(f["type"], str) else "struct"
        for f in spark_schema_json(snapshot.schema)["fields"]
    }
    predicate = parse_partition_filter(where, {c: types.get(c, "string") for c in snapshot.partition_columns})
    table = add_files_to_table([AddFile(f.key, dict(f.partition_values), f.size, 0) for f in snapshot.files])
    mask = filter_mask(table, predicate).to_pylist()
    return [f for f, keep in zip(snapshot.files, mask) if keep]


def commit_build(
    table_log: TransactionLog,
    read_version: int,
    job: IndexJob,
    settings: Options,
    snapshot: SourceSnapshot,
    adds_json: list[dict[str, Any]],
    removes: list[str],
    stats: dict[str, list[str]],
    recorded: Mapping[str, str] | None = None,
    delete_logs: Sequence[DeleteLog] = (),
) -> int:
    """One version: the metadata (schema, partitioning, the source's format, location and
    version; a new table's settings; `recorded`: the column selection, ops/companion/columns.py),
    the new splits, the removes, the stats files and `delete_logs` (the rows the source deleted
    without rewriting its files, ops/companion/deletes.py)."""
    from indextables_spark.core.log.model.actions import AddFile, Metadata  # lazy: see select_files
    from indextables_spark.core.log.model.doc_mapping import doc_mapping_hash, registry_key  # lazy: see select_files
    from indextables_spark.core.log.model.protocol_gate import CURRENT_PROTOCOL  # lazy: see select_files
    from indextables_spark.core.log.commit.transaction import (
        Transaction,
        new_table_id,
        now_ms,
    )  # lazy: see select_files
    from indextables_spark.core.split.format.doc_mapping import doc_mapping_json  # lazy: see select_files
    from indextables_spark.ops.write.write import table_settings  # lazy: see select_files

    mapping = doc_mapping_json(job.schema_json, job.partition_columns, settings)
    ref = doc_mapping_hash(mapping)
    configuration = {
        registry_key(ref): mapping,
        CONFIG_FORMAT: job.format,
        CONFIG_SOURCE: job.source,
        CONFIG_ROOT: snapshot.root,
        CONFIG_VERSION: "" if snapshot.version is None else str(snapshot.version),
        **(recorded or {}),
    }
    txn = Transaction(table_log, resolver="fail", read_version=read_version, operation="BUILD COMPANION")
    schema_string = json.dumps(job.schema_json, separators=(",", ":"))
    if read_version < 0:
        txn.set_protocol(CURRENT_PROTOCOL)
        config = {**table_settings(settings), **configuration}
        meta = Metadata(new_table_id(), schema_string, job.partition_columns, config, created_time=now_ms())
    else:
        current = txn.snapshot()
        assert current is not None  # read_version >= 0: the table exists
        old = current.metadata_action
        config = {**old.configuration, **configuration}
        meta = replace(old, schema_string=schema_string, partition_columns=job.partition_columns, configuration=config)
    txn.set_metadata(meta)
    adds = [AddFile.from_json(a) for a in adds_json]
    for a in adds:
        a.doc_mapping_ref = a.doc_mapping_ref or ref
    if removes:
        txn.remove_files(removes)
    for key, files in stats.items():
        txn.update_stat(key, files)
    for d in delete_logs:
        txn.add_delete_log(d)
    txn.add_files(adds).with_operation(
        "BUILD COMPANION",
        {
            "sourceFormat": job.format,
            "source": job.source,
            "sourceVersion": snapshot.version,
            "filesIndexed": sum(len(a.companion_source_files or ()) for a in adds),
            "splitsRemoved": len(removes),
        },
    )
    result: int = txn.commit()
    return result
