"""BUILD INDEXTABLES COMPANION: a search index over a Delta, Iceberg or Parquet table's own files.

1. Plan (driver): list the source's data files at the version asked for (companion_sources.py),
   keep those the WHERE partition predicate selects, and compare with the companion table's live
   splits (their `companionSourceFiles`): files not indexed yet are indexed; splits holding a file
   the source no longer has (Delta remove/OPTIMIZE/VACUUM, Iceberg overwrite/expire, a deleted
   Parquet file) are removed and their still-valid files indexed again.
2. Index: the files are grouped per partition into groups of about `TARGET INPUT SIZE` source
   bytes; each group becomes one companion split (core/split/companion.py: the index, no rows) written
   by one task — a Spark job when a session is given, else local processes.
3. Commit: one version with the metadata (schema, partitioning, the source's format, location and
   version), the new splits and the removes. Splits written by a failed build are deleted.

The companion table refuses writes of rows (writer.plan_write); MERGE SPLITS re-indexes the
source files of the splits it merges (merge.py).
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping, Sequence

from indextables_spark.errors import CompanionSourceError, InvalidOptionError
from indextables_spark.config.options import PREFIX, Options, parse_size
from indextables_spark.api.results import CompanionBuildResult
from indextables_spark.core.split.companion import (
    CONFIG_FORMAT,
    CONFIG_ROOT,
    CONFIG_SOURCE,
    CONFIG_VERSION,
    companion_of,
)
from indextables_spark.ops.companion_sources import FORMATS, SourceFile, SourceSnapshot, open_source

log = logging.getLogger(__name__)


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
    schema_json: dict
    partition_columns: list[str]
    format: str
    source: str
    version: int | None


def indexing_options(indexing: Mapping[str, str] | None) -> dict[str, str]:
    """INDEXING MODES ('col':'text', …) as the table's options (indexing.typemap.<col>)."""
    return {f"indexing.typemap.{col}": str(mode) for col, mode in (indexing or {}).items()}


def plan_groups(files: Sequence[SourceFile], partition_columns: Sequence[str], target_bytes: int) -> list[IndexGroup]:
    """Files grouped per partition, in source order, into groups of about target_bytes."""
    by_partition: dict[tuple, list[SourceFile]] = {}
    for f in files:
        by_partition.setdefault(tuple(f.partition_values.get(c) for c in partition_columns), []).append(f)
    groups = []
    for key, members in by_partition.items():
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


def index_group(job: IndexJob, group: IndexGroup) -> dict:
    """Task side: index the group's files into one companion split: {"adds": [AddFile JSON],
    "stats": {key: [per-split stats files, e.g. Bloom filters]}}."""
    from indextables_spark.core.split.builder import SplitWriter
    from indextables_spark.core.split.companion import CompanionSource, open_source_parquet
    from indextables_spark.core.storage import open_storage

    opts = Options.of(job.options)
    storage = open_storage(job.location, opts)
    writer = SplitWriter(
        storage,
        job.schema_json,
        job.partition_columns,
        opts,
        None,
        companion=CompanionSource(job.format, job.source, job.version),
    )
    try:
        columns = [f.name for f in writer.stored_schema]
        for f in group.files:
            pf = open_source_parquet(f.uri, f.size, opts, f"{job.format} table {job.source}")
            writer.write_source_file(f.key, f.uri, f.size, f.partition_values, row_groups(pf, columns))
        adds = writer.finish()
    except BaseException:
        writer.abort()
        storage.delete([a.path for a in writer.written] + [f for fs in writer.stats_files.values() for f in fs])
        raise
    return {"adds": [a.to_json() for a in adds], "stats": dict(writer.stats_files)}


def row_groups(pf: Any, columns: Sequence[str]) -> Iterator[tuple[int, Any]]:
    """(index, rows) of each non-empty row group of a Parquet file, only the columns it has of these."""
    present = [c for c in columns if c in pf.schema_arrow.names]
    for g in range(pf.num_row_groups):
        if pf.metadata.row_group(g).num_rows:
            # (a table of no columns still has the row group's rows: missing columns become NULL)
            yield g, pf.read_row_group(g, columns=present).combine_chunks().to_batches()[0]


def _in_subprocess(job: IndexJob, group: IndexGroup) -> dict:
    """index_group in a fresh Python process (`python -m indextables_spark.ops.companion`):
    no fork of a process holding Arrow/Tantivy threads, and unlike multiprocessing's spawn, no
    re-import of the caller's __main__ (a script without a __main__ guard would run again)."""
    import pickle
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", __name__], input=pickle.dumps((job, group)), capture_output=True, check=False
    )
    try:
        ok, value = pickle.loads(proc.stdout)
    except Exception:
        raise CompanionSourceError(
            f"indexing process for {len(group.files)} files of {job.format} table "
            f"{job.source} exited with {proc.returncode}: "
            f"{proc.stderr.decode(errors='replace')[-2000:]}"
        ) from None
    if not ok:
        raise value
    return value


def _run_local(job: IndexJob, groups: list[IndexGroup], workers: int) -> list[dict]:
    """Groups indexed in local processes, `workers` at a time (one group: in this process)."""
    if len(groups) <= 1 or workers <= 1:
        return [index_group(job, g) for g in groups]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(workers, len(groups))) as pool:
        futures = [pool.submit(_in_subprocess, job, g) for g in groups]
        results, failure = [], None
        for fut in futures:
            try:
                results.append(fut.result())
            except BaseException as e:  # keep collecting: every written split must be known
                failure = failure or e
        if failure is not None:
            _delete_written(job, results)
            raise failure
        return results


def _run_spark(spark: Any, job: IndexJob, groups: list[IndexGroup]) -> list[dict]:
    from indextables_spark.util.sessions import run_tasks

    return run_tasks(
        spark,
        lambda g: index_group(job, g),
        groups,
        description=f"BUILD INDEXTABLES COMPANION FOR {job.format.upper()} '{job.source}'",
    )


def _delete_written(job: IndexJob, written: list[dict]) -> None:
    """Delete the splits (and their stats files) of tasks whose build is not committed."""
    keys = [a["path"] for w in written for a in w["adds"]] + [
        f for w in written for fs in w["stats"].values() for f in fs
    ]
    if keys:
        from indextables_spark.core.storage import open_storage

        open_storage(job.location, job.options).delete(keys)


def _select(snapshot: SourceSnapshot, where: str | None) -> list[SourceFile]:
    """The source files the WHERE partition predicate selects (exactly, on partition values)."""
    if not where:
        return list(snapshot.files)
    from indextables_spark.core.log.actions import AddFile
    from indextables_spark.core.log.file_entries import add_files_to_table
    from indextables_spark.expr.partition_filter import filter_mask, parse_partition_filter
    from indextables_spark.core.split.arrow_types import spark_schema_json

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
    table = add_files_to_table(
        [AddFile(f.key, {k: v for k, v in f.partition_values.items()}, f.size, 0) for f in snapshot.files]
    )
    mask = filter_mask(table, predicate).to_pylist()
    return [f for f, keep in zip(snapshot.files, mask) if keep]


def build_companion(
    source: str,
    location: str,
    format: str = "delta",
    indexing: Mapping[str, str] | None = None,
    where: str | None = None,
    spark: Any = None,
    options: Mapping[str, Any] | None = None,
    *,
    from_version: int | None = None,
    from_snapshot: int | None = None,
    catalog: str | None = None,
    catalog_type: str | None = None,
    target_input_size: int | str | None = None,
    dry_run: bool = False,
) -> CompanionBuildResult:
    """Build or sync the companion index at `location` of the `format` table `source` (see the
    module doc). Returns what was (or, with dry_run, would be) done."""
    from indextables_spark.core.log.maintenance import log_with_maintenance
    from indextables_spark.core.split.arrow_types import spark_schema_json
    from indextables_spark.core.split.column_specs import validate_schema
    from indextables_spark.core.storage import normalize_uri, open_storage

    t0 = time.perf_counter()
    fmt = str(format).lower()
    if fmt not in FORMATS:
        raise InvalidOptionError(f"companion source format {format!r} is not one of {', '.join(FORMATS)}")
    if fmt != "iceberg" or catalog is None:
        source = normalize_uri(source)  # the same table whatever trailing slashes it is named with
    if from_version is not None and from_snapshot is not None:
        raise InvalidOptionError("give FROM VERSION (Delta) or FROM SNAPSHOT (Iceberg), not both")
    from indextables_spark.util.sessions import with_session_options

    opts = Options.of(with_session_options(spark, options), indexing_options(indexing))
    target = (
        parse_size(target_input_size)
        if isinstance(target_input_size, str)
        else int(target_input_size)
        if target_input_size is not None
        else opts.get_size("companion.targetInputSize")
    )
    if target <= 0:
        raise InvalidOptionError(f"TARGET INPUT SIZE must be positive, got {target_input_size!r}")

    snapshot = open_source(
        fmt,
        source,
        options=opts,
        version=from_version if from_version is not None else from_snapshot,
        catalog=catalog,
        catalog_type=catalog_type,
    )
    schema_json = spark_schema_json(snapshot.schema)
    table_log = log_with_maintenance(open_storage(location, opts), opts)
    read_version = table_log.latest_version()
    live = []
    from indextables_spark.config.registry import registered_default
    from indextables_spark.core.split.indexing import TOKEN_LENGTH_KEY

    # a new companion index records its token length (as a new table does: writer.plan_write)
    settings = Options.of({TOKEN_LENGTH_KEY: str(registered_default(TOKEN_LENGTH_KEY))}, opts)
    if read_version >= 0:
        snap = table_log.snapshot(read_version)
        config = snap.metadata_action.configuration
        of = companion_of(config)
        if of is None:
            raise CompanionSourceError(
                f"{location} holds an indextables table that is not a companion index; "
                f"choose another location for the companion of {fmt} table {source}"
            )
        if of != (fmt, source):
            raise CompanionSourceError(
                f"{location} is the companion index of {of[0]} table {of[1]}, not of {fmt} table {source}"
            )
        if [c.lower() for c in snap.partition_columns] != [c.lower() for c in snapshot.partition_columns]:
            raise CompanionSourceError(
                f"{fmt} table {source} is now partitioned by {snapshot.partition_columns}, its companion index at "
                f"{location} by {snap.partition_columns}: build a new companion index at another location"
            )
        # the table's recorded indexing settings win over the session's (as for appends)
        from indextables_spark.core.split.indexing import recorded_settings

        recorded = recorded_settings(config)
        settings = Options.of(opts, {k: v for k, v in recorded.items() if k.startswith(PREFIX + "indexing.")})
        live = snap.files
    validate_schema(schema_json, snapshot.partition_columns, settings)

    selected = _select(snapshot, where)
    in_source = {f.key for f in snapshot.files}
    indexed: dict[str, Any] = {}
    for a in live:
        for k in a.companion_source_files or ():
            indexed[k] = a
    stale = [a for a in live if any(k not in in_source for k in (a.companion_source_files or ()))]
    stale_paths = {a.path for a in stale}
    reindex_keys = {k for a in stale for k in (a.companion_source_files or ()) if k in in_source}
    # new files (of the partitions WHERE selects), and the still-valid files of removed splits
    # (whatever WHERE says: their split goes away)
    todo = [f for f in selected if f.key not in indexed]
    todo += [f for f in snapshot.files if f.key in reindex_keys]
    groups = plan_groups(todo, snapshot.partition_columns, target)
    planned = CompanionBuildResult(
        table_path=location,
        source_format=fmt,
        source=source,
        source_version=snapshot.version,
        source_files=len(snapshot.files),
        files_indexed=len(todo),
        files_removed=len([k for k in indexed if k not in in_source]),
        bytes_indexed=sum(f.size for f in todo),
        splits_removed=len(stale),
        dry_run=bool(dry_run),
    )
    if dry_run:
        return replace(planned, status="DRY_RUN", splits_added=len(groups), duration_ms=_ms_since(t0))
    if not groups and not stale and read_version >= 0:
        return replace(planned, status="NO_ACTION", duration_ms=_ms_since(t0))

    job = IndexJob(
        location, dict(settings.items()), schema_json, list(snapshot.partition_columns), fmt, source, snapshot.version
    )
    workers = max(1, opts.get_int("companion.parallelism", os.cpu_count() or 1))
    written = _run_spark(spark, job, groups) if spark is not None and groups else _run_local(job, groups, workers)
    adds_json = [a for w in written for a in w["adds"]]
    stats: dict[str, list[str]] = {}
    for w in written:
        for key, files in w["stats"].items():
            stats.setdefault(key, []).extend(files)
    try:
        version = _commit(table_log, read_version, job, settings, snapshot, adds_json, sorted(stale_paths), stats)
    except BaseException:
        _delete_written(job, written)
        raise
    return replace(
        planned,
        splits_added=len(adds_json),
        rows_indexed=sum(int(a.get("numRecords") or 0) for a in adds_json),
        version=version,
        duration_ms=_ms_since(t0),
    )


def _ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


def _commit(
    table_log,
    read_version: int,
    job: IndexJob,
    settings: Options,
    snapshot: SourceSnapshot,
    adds_json: list[dict],
    removes: list[str],
    stats: dict[str, list[str]],
) -> int:
    from indextables_spark.core.log.actions import AddFile, Metadata
    from indextables_spark.core.log.doc_mapping import doc_mapping_hash, registry_key
    from indextables_spark.core.log.protocol_gate import CURRENT_PROTOCOL
    from indextables_spark.core.log.transaction import Transaction, new_table_id, now_ms
    from indextables_spark.core.split.doc_mapping import doc_mapping_json
    from indextables_spark.api.write import table_settings

    mapping = doc_mapping_json(job.schema_json, job.partition_columns, settings)
    ref = doc_mapping_hash(mapping)
    source_config = {
        CONFIG_FORMAT: job.format,
        CONFIG_SOURCE: job.source,
        CONFIG_ROOT: snapshot.root,
        CONFIG_VERSION: "" if snapshot.version is None else str(snapshot.version),
    }
    txn = Transaction(table_log, resolver="fail", read_version=read_version, operation="BUILD COMPANION")
    schema_string = json.dumps(job.schema_json, separators=(",", ":"))
    if read_version < 0:
        txn.set_protocol(CURRENT_PROTOCOL)
        meta = Metadata(
            id=new_table_id(),
            schema_string=schema_string,
            partition_columns=job.partition_columns,
            configuration={**table_settings(settings), registry_key(ref): mapping, **source_config},
            created_time=now_ms(),
        )
    else:
        old = txn.snapshot().metadata_action
        meta = Metadata(
            id=old.id,
            schema_string=schema_string,
            partition_columns=job.partition_columns,
            configuration={**old.configuration, registry_key(ref): mapping, **source_config},
            format=old.format,
            name=old.name,
            description=old.description,
            created_time=old.created_time,
        )
    txn.set_metadata(meta)
    adds = [AddFile.from_json(a) for a in adds_json]
    for a in adds:
        a.doc_mapping_ref = a.doc_mapping_ref or ref
    if removes:
        txn.remove_files(removes)
    for key, files in stats.items():
        txn.update_stat(key, files)
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
    return txn.commit()


def _worker_main() -> None:
    """A local indexing process: (job, group) pickled on stdin, (ok, result or error) on stdout."""
    import pickle
    import sys

    job, group = pickle.loads(sys.stdin.buffer.read())
    try:
        out = (True, index_group(job, group))
    except BaseException as e:  # handed to the parent, which raises it
        out = (False, e)
    sys.stdout.buffer.write(pickle.dumps(out))


if __name__ == "__main__":
    _worker_main()
