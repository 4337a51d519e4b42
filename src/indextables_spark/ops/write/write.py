"""The write path shared by every writer (Spark's DataSource writer, streaming, `tx.write` of
api/transaction.py): plan a write against the table read at a version (schema checks), build splits
from Arrow batches, stage their adds on a log Transaction, commit one version.

Spark-free and path-free: every function takes the table's TransactionLog or Storage (an injected
storage is the one written to); spark/writer.py opens them from the path Spark gives.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa

from indextables_spark.config.options import PREFIX, Options
from indextables_spark.config.registry import registered_default
from indextables_spark.core.log.model.actions import AddFile, Metadata
from indextables_spark.core.log.model.doc_mapping import doc_mapping_hash, registry_key
from indextables_spark.core.log.model.protocol_gate import CURRENT_PROTOCOL, check_writable
from indextables_spark.core.log.commit.reference_splits import refuse_reference_writes
from indextables_spark.core.log.read.snapshot import Snapshot
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.log.commit.policy import CommitPolicy, replan
from indextables_spark.core.log.commit.transaction import Transaction, new_table_id, now_ms
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.split.format.companion import companion_of
from indextables_spark.core.split.format.column_specs import validate_schema
from indextables_spark.core.split.format.doc_mapping import doc_mapping_json
from indextables_spark.core.split.format.indexing import TOKEN_LENGTH_KEY, recorded_settings
from indextables_spark.core.split.format.setting_changes import check_option_columns, recorded_changes
from indextables_spark.core.split.write.builder import SplitWriter, target_split_bytes_option
from indextables_spark.core.split.write.vectors import BUILD_TAG
from indextables_spark.core.storage import Storage
from indextables_spark.errors import (
    CompanionSourceError,
    ConcurrentModificationError,
    InvalidOptionError,
    SchemaMismatchError,
    TableExistsError,
)
from indextables_spark.ops.write.write_schema import check_append_schema, merge_append_schema, nullable_json
from indextables_spark.results.record import ProgressCallback, report

log = logging.getLogger(__name__)


@dataclass
class SplitsWritten:
    adds: list[dict[str, Any]] = field(default_factory=list)  # AddFile wire JSON
    num_rows: int = 0
    stats: dict[str, list[str]] = field(default_factory=dict)  # per-split stats files (e.g. "bloomfilter")


def merge_stats(messages: Iterable[Any]) -> dict[str, list[str]]:
    """The stats files of every task's message, by key."""
    out: dict[str, list[str]] = {}
    for m in messages:
        for k, files in (getattr(m, "stats", None) or {}).items():
            out.setdefault(k, []).extend(files)
    return out


@dataclass(frozen=True)
class WritePlan:
    """What every task needs to know, decided once on the driver."""

    schema_json: dict[str, Any]  # the table schema (all columns nullable)
    partition_columns: list[str]
    options: Options  # table settings overlaid with this write's options
    doc_mapping: str  # JSON of the doc mapping splits of this write use
    target_split_bytes: int
    # settings an append adds to the table's metadata (a vector column declared after creation)
    added_settings: Mapping[str, str] = field(default_factory=dict)


def plan_write(
    log_: TransactionLog, opts: Options, schema_json: dict[str, Any], overwrite: bool, read_version: int | None = None
) -> tuple[WritePlan, int, bool]:
    """Validate a write against the table read at `read_version` (latest by default) before any
    task runs. `schema_json` is the data's Spark schema JSON (StructType.jsonValue();
    split.types.spark_schema_json for an Arrow schema).

    Returns (plan, read_version, table_exists).
    """
    if read_version is None:
        read_version = log_.latest_version()
    snap = log_.snapshot(read_version) if read_version >= 0 else None
    return _plan(log_.storage.uri, snap, opts, schema_json, overwrite), read_version, snap is not None


def _plan(path: str, snap: Snapshot | None, opts: Options, schema_json: dict[str, Any], overwrite: bool) -> WritePlan:
    incoming = nullable_json(schema_json)
    requested_parts = partition_columns_option(opts)
    if snap is not None:
        check_writable(snap.protocol_action, f"table {path}")
        refuse_companion(path, snap.metadata_action.configuration)
        # Splits of ours never go next to the reference implementation's (core/log/commit/reference_splits.py).
        refuse_reference_writes(snap, path, "OVERWRITE" if overwrite else "WRITE")
        table_schema = snap.schema_json
        parts = snap.partition_columns
        if overwrite and opts.get_bool("overwriteSchema"):
            # Like Delta's overwriteSchema: an overwrite may redefine columns and partitioning.
            table_schema = incoming
            parts = requested_parts if requested_parts is not None else parts
        else:
            if requested_parts is not None and [c.lower() for c in requested_parts] != [c.lower() for c in parts]:
                raise SchemaMismatchError(
                    f"table {path} is partitioned by {parts}, but the write asks for partitionBy "
                    f"{requested_parts} (to redefine the table use mode('overwrite') with overwriteSchema=true)"
                )
            if opts.get_bool("mergeSchema"):
                table_schema = merge_append_schema(path, table_schema, incoming)
            else:
                check_append_schema(path, table_schema, incoming)
        check_option_columns(opts, table_schema["fields"])
        configuration = snap.metadata_action.configuration
        added = recorded_changes(path, configuration, opts, table_schema["fields"], snap.schema_json["fields"])
        settings = Options.of(recorded_settings(configuration), opts)
    else:
        table_schema = incoming
        parts = requested_parts or []
        # the token length is recorded at creation (what the table's splits mean never depends on
        # a default that may change; core/split/format/indexing.py)
        token_length = opts.get_str(TOKEN_LENGTH_KEY) or str(registered_default(TOKEN_LENGTH_KEY))
        settings = Options.of({TOKEN_LENGTH_KEY: token_length}, opts)
        check_option_columns(opts, table_schema["fields"])
        added = {}
    names = [f["name"] for f in table_schema["fields"]]
    for c in parts:
        if c not in names:
            raise SchemaMismatchError(f"partition column {c!r} is not a column of the data (columns: {names})")
    if parts and len(parts) == len(names):
        raise SchemaMismatchError(f"cannot partition by every column ({parts}): no data columns would remain")
    validate_schema(table_schema, parts, settings)
    mapping = doc_mapping_json(table_schema, parts, settings)
    target = target_split_bytes_option(settings) or registered_default("write.targetSplitSize")
    return WritePlan(table_schema, list(parts), settings, mapping, target, added)


def refuse_companion(path: str, configuration: Mapping[str, str]) -> None:
    """A companion index holds no rows of its own: only BUILD INDEXTABLES COMPANION writes it."""
    of = companion_of(configuration)
    if of is not None:
        fmt, source = of
        raise CompanionSourceError(
            f"table {path} is a companion index of the {fmt} table {source}: its rows are that table's, and it "
            f"takes no writes. Write to the {fmt} table, then run BUILD INDEXTABLES COMPANION FOR {fmt.upper()} "
            f"'{source}' AT LOCATION '{path}' to sync the index"
        )


def write_splits(storage: Storage, plan: WritePlan, batches: Iterator[pa.RecordBatch]) -> SplitsWritten:
    """Executor side: turn this task's rows into splits under the table."""
    target_schema = arrow_schema(plan.schema_json)
    writer = SplitWriter(storage, plan.schema_json, plan.partition_columns, plan.options, plan.target_split_bytes)
    rows = 0
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            batch = conform_batch(batch, target_schema)
            writer.write_batch(batch)
            rows += batch.num_rows
        adds = writer.finish()
    except BaseException:
        # drop open splits, and delete those already uploaded (never referenced by the log)
        writer.abort()
        try:
            delete_written(storage, [a.to_json() for a in writer.written], writer.stats_files)
        except Exception:  # the original error matters more
            log.warning(
                "indextables: could not delete the uncommitted splits of a failed write to %s",
                storage.uri,
                exc_info=True,
            )
        raise
    return SplitsWritten(adds=[a.to_json() for a in adds], num_rows=rows, stats=writer.stats_files)


def conform_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """Reorder columns by name and cast to the table's Arrow schema."""
    cols = []
    for f in target:
        col = batch.column(batch.schema.get_field_index(f.name))
        if not col.type.equals(f.type):
            col = col.cast(f.type)
        cols.append(col)
    return pa.RecordBatch.from_arrays(cols, schema=target)


def stage_write(
    txn: Transaction,
    plan: WritePlan,
    overwrite: bool,
    adds: list[AddFile],
    stats_files: Mapping[str, list[str]] | None = None,
    operation: str | None = None,
) -> None:
    """Stage a planned write on `txn` (read at the version the plan was made against): for a new
    table its protocol and metadata; else a metadata update when the schema, partitioning or doc
    mapping registry changes; for overwrite, removes of the live files; the adds, and the stats
    files written with the splits (key -> files, e.g. Bloom filters)."""
    ref = doc_mapping_hash(plan.doc_mapping)
    snap = txn.snapshot()
    if snap is None:
        meta = Metadata(
            id=new_table_id(),
            schema_string=_schema_string(plan.schema_json),
            partition_columns=plan.partition_columns,
            configuration={**table_settings(plan.options), registry_key(ref): plan.doc_mapping},
            created_time=now_ms(),
        )
        txn.set_protocol(CURRENT_PROTOCOL).set_metadata(meta)
        op = "CREATE TABLE"
    else:
        meta = snap.metadata_action
        new_schema = _schema_string(plan.schema_json)
        needs_ref = registry_key(ref) not in meta.configuration
        schema_changed = new_schema != meta.schema_string or plan.partition_columns != meta.partition_columns
        if needs_ref or schema_changed or plan.added_settings:
            config = {**meta.configuration, **plan.added_settings, registry_key(ref): plan.doc_mapping}
            txn.set_metadata(
                Metadata(
                    id=meta.id,
                    schema_string=new_schema,
                    partition_columns=plan.partition_columns,
                    configuration=config,
                    format=meta.format,
                    name=meta.name,
                    description=meta.description,
                    created_time=meta.created_time,
                )
            )
        if overwrite:
            txn.remove_files(snap.files_table.column("path").to_pylist())
        op = "OVERWRITE" if overwrite else "WRITE"
    stage_adds(txn, plan, adds, stats_files)
    txn.with_operation(
        operation or op, {"mode": "Overwrite" if overwrite else "Append", "partitionBy": plan.partition_columns}
    )


# The commit parameter counting a write's splits that built vector indexes (BUILD_TAG: their ms).
VECTOR_SPLITS = "numVectorIndexedSplits"


def stage_adds(
    txn: Transaction, plan: WritePlan, adds: list[AddFile], stats_files: Mapping[str, list[str]] | None = None
) -> None:
    """Stage the splits a planned write built and their stats files (key -> files); the commit's
    parameters add up their vector index builds (vector_builds)."""
    ref = doc_mapping_hash(plan.doc_mapping)
    for a in adds:
        a.doc_mapping_ref = a.doc_mapping_ref or ref
    for key, files in (stats_files or {}).items():
        txn.update_stat(key, files)
    txn.add_files(adds)
    built = vector_builds(adds)
    if built:
        params = txn.operation_parameters
        params[BUILD_TAG] = params.get(BUILD_TAG, 0) + sum(built)
        params[VECTOR_SPLITS] = params.get(VECTOR_SPLITS, 0) + len(built)


def vector_builds(adds: Iterable[AddFile]) -> list[int]:
    """The milliseconds each split with vector columns spent building their indexes, in the task
    that wrote it (its BUILD_TAG; splits without vector columns have none)."""
    return [int(a.tags[BUILD_TAG]) for a in adds if a.tags and BUILD_TAG in a.tags]


def commit_write(
    log_: TransactionLog,
    plan: WritePlan,
    read_version: int,
    overwrite: bool,
    adds: list[AddFile],
    operation: str | None = None,
    txn_id: str | None = None,
    stats_files: Mapping[str, list[str]] | None = None,
) -> int:
    """Driver side: one version holding every add (and, for overwrite, removes of live files) and
    the stats files written with the splits. A table another job created meanwhile takes the
    write as an append (rebase_created), planned again under the commit policy
    (core/log/commit/policy.py); any other conflict is raised."""

    rebased = False  # a table is created once: after the rebase a conflict is a real one

    def once(n: int) -> int:
        nonlocal rebased
        base = read_version
        if n > 1:
            rebased = True
            base = rebase_created(log_, plan)
        txn = Transaction(log_, resolver="merge", read_version=base, operation="WRITE")
        txn.txn_id = txn_id
        stage_write(txn, plan, overwrite, adds, stats_files, operation)
        return txn.commit()

    policy = CommitPolicy.from_options(log_.options)
    return replan(policy, once, log_.storage.uri, operation or "WRITE", lambda e: read_version < 0 and not rebased)


def rebase_created(log_: TransactionLog, plan: WritePlan) -> int:
    """Another job created the table between planning a write of a new table and its commit: the
    version to commit the write over as an append, when the table created takes its rows."""
    read_version = log_.latest_version()
    snap = log_.snapshot(read_version)
    check_append_schema(log_.storage.uri, snap.schema_json, plan.schema_json)
    if snap.partition_columns != plan.partition_columns:
        raise ConcurrentModificationError(
            f"table {log_.storage.uri} was created concurrently, partitioned by {snap.partition_columns}; "
            f"this write is partitioned by {plan.partition_columns}"
        )
    return read_version


def _schema_string(schema_json: dict[str, Any]) -> str:
    return json.dumps(schema_json, separators=(",", ":"))


def written_keys(adds: Iterable[Mapping[str, Any]], stats: Mapping[str, list[str]] | None = None) -> list[str]:
    """The files a write put under the table: its splits and their stats files."""
    return [a["path"] for a in adds] + [f for files in (stats or {}).values() for f in files]


def delete_written(
    storage: Storage, adds: Iterable[Mapping[str, Any]], stats: Mapping[str, list[str]] | None = None
) -> None:
    """Remove split files (and their stats files) of a failed job (never referenced by the log)."""
    keys = written_keys(adds, stats)
    if keys:
        storage.delete(keys)


# Table-level settings recorded in the table's metadata configuration at creation, so later
# appends index the same way whatever the session's options are (like Delta table properties).
TABLE_SETTING_PREFIXES = ("indexing.", "dataskippingnumindexedcols", "dataskippingstatscolumns", "stats.")


def table_settings(opts: Options) -> dict[str, str]:
    """The options to record in a new table's metadata configuration (never credentials)."""
    return {PREFIX + k: v for k, v in opts.items() if k.startswith(TABLE_SETTING_PREFIXES)}


def partition_columns_option(opts: Options) -> list[str] | None:
    raw = opts.get_str("partitionBy")
    if raw is None:
        return None
    raw = raw.strip()
    if raw.startswith("["):
        cols = json.loads(raw)
    else:
        cols = [c.strip() for c in raw.split(",") if c.strip()]
    return [str(c) for c in cols]


# --- Spark-free writes: Arrow data in chunks, one split per partition value per chunk ------------

WRITE_MODES = ("append", "overwrite", "error")
_MIN_CHUNK_ROWS = 100_000  # below this a chunk is not worth its own split per partition value


def batch_source(data: Any) -> tuple[pa.Schema, Iterator[pa.RecordBatch], int | None]:
    """(schema, batches, rows of a Table: they size the chunks) of a pyarrow Table,
    RecordBatchReader, RecordBatch or pandas DataFrame."""
    if isinstance(data, pa.Table):
        return data.schema, iter(data.to_batches()), data.num_rows
    if isinstance(data, pa.RecordBatchReader):
        return data.schema, iter(data), None
    if isinstance(data, pa.RecordBatch):
        return data.schema, iter([data]), None
    if importlib.util.find_spec("pandas") is not None:
        # an optional dependency, and a heavy one: imported when a DataFrame may be given
        import pandas as pd  # type: ignore[import-untyped]  # no stubs in the environment

        if isinstance(data, pd.DataFrame):
            t = pa.Table.from_pandas(data, preserve_index=False)
            return t.schema.remove_metadata(), iter(t.to_batches()), None
    raise TypeError(
        f"write_table: data must be a pyarrow.Table, pyarrow.RecordBatchReader or pandas DataFrame, "
        f"not {type(data).__name__}"
    )


def _chunks(batches: Iterator[pa.RecordBatch], chunk_rows: int) -> Iterator[list[pa.RecordBatch]]:
    """Group batches into chunks of about chunk_rows rows (each chunk is one 'task')."""
    buf: list[pa.RecordBatch] = []
    n = 0
    for b in batches:
        while b.num_rows:
            take = min(b.num_rows, chunk_rows - n)
            buf.append(b.slice(0, take))
            n += take
            b = b.slice(take)
            if n >= chunk_rows:
                yield buf
                buf, n = [], 0
    if buf:
        yield buf


def write_options(options: Mapping[str, Any] | None, partition_by: str | Sequence[str] | None) -> Options:
    """The options of a Spark-free write: `options` with `partition_by` as the partitionBy option."""
    parts = None
    if partition_by is not None:
        parts = {"partitionBy": json.dumps([partition_by] if isinstance(partition_by, str) else list(partition_by))}
    return Options.of(options, parts)


def check_mode(mode: str, table_exists: bool, path: str) -> bool:
    """Validate a write mode against the table; True for overwrite."""
    mode = str(mode).lower()
    if mode not in WRITE_MODES:
        raise InvalidOptionError(f"write_table: mode must be one of {WRITE_MODES}, got {mode!r}")
    if mode == "error" and table_exists:
        raise TableExistsError(f"an indextables table already exists at {path}; use mode='append' or mode='overwrite'")
    return mode == "overwrite"


def build_splits(
    storage: Storage,
    opts: Options,
    plan: WritePlan,
    batches: Iterator[pa.RecordBatch],
    total: int | None = None,
    chunks: Iterator[list[pa.RecordBatch]] | None = None,
    progress: ProgressCallback | None = None,
) -> list[SplitsWritten]:
    """Build the splits of Arrow batches (`total` rows, when known) in parallel threads, a chunk of
    rows each (one split per partition value per chunk, like one Spark task). On failure every
    split built is deleted before the error propagates. Options: `write.parallelism` (threads,
    default: CPU count), `write.chunkRows` (rows per chunk; default: the rows split evenly over the
    threads, at least 100k); `chunks` given (optimized writes, ops/write/optimize_write.py): those
    instead. `progress` hears of the rows of each chunk written ("writing", rows, of `total`)."""
    workers = max(1, opts.get_int("write.parallelism", os.cpu_count() or 1))
    default_chunk = max(_MIN_CHUNK_ROWS, -(-total // workers)) if total else 4 * _MIN_CHUNK_ROWS
    chunk_rows = max(1, opts.get_int("write.chunkRows", default_chunk))
    futures: list[Future[SplitsWritten]] = []
    rows = _RowsWritten(progress, total)
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="indextables-write") as pool:
            for chunk in chunks if chunks is not None else _chunks(batches, chunk_rows):
                futures.append(pool.submit(write_splits, storage, plan, iter(chunk)))
                running = [f for f in futures if not f.done()]
                if len(running) >= 2 * workers:  # bound the rows held in memory
                    wait(running, return_when=FIRST_COMPLETED)
                rows.count(futures)
                failed = next((f for f in futures if f.done() and f.exception() is not None), None)
                if failed is not None:
                    failed.result()
            for _ in as_completed(futures):  # the last chunks, reported as each finishes
                rows.count(futures)
        return [f.result() for f in futures]
    except BaseException:
        # every chunk has finished (the pool waited): delete the splits of those that succeeded
        done = [f.result() for f in futures if f.done() and not f.cancelled() and f.exception() is None]
        delete_written(storage, [d for m in done for d in m.adds], merge_stats(done))
        raise


class _RowsWritten:
    """build_splits' progress: the rows of the chunks written so far, reported once per chunk."""

    def __init__(self, progress: ProgressCallback | None, total: int | None) -> None:
        self.progress, self.total = progress, total
        self.seen: set[int] = set()  # the chunks counted (their index in the futures)
        self.rows = 0
        report(progress, "writing", 0, total, "rows")

    def count(self, futures: Sequence[Future[SplitsWritten]]) -> None:
        if self.progress is None:
            return
        for i, f in enumerate(futures):
            if i not in self.seen and f.done() and not f.cancelled() and f.exception() is None:
                self.seen.add(i)
                self.rows += f.result().num_rows
                report(self.progress, "writing", self.rows, self.total, "rows")
