"""The write path shared by every writer (Spark's DataSource writer, streaming, `write_table`):
plan a write against the table (schema checks), build splits from Arrow batches, commit one version.

Spark-free: the Spark layer (spark/writer.py) is thin glue around these functions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import pyarrow as pa

from indextables_spark.errors import (
    ConcurrentModificationError,
    IndexTablesError,
    InvalidOptionError,
    SchemaMismatchError,
)
from indextables_spark.core.log.actions import AddFile, Metadata
from indextables_spark.core.log.doc_mapping import doc_mapping_hash, registry_key
from indextables_spark.core.log.protocol_gate import CURRENT_PROTOCOL, check_writable
from indextables_spark.core.log.reference_splits import refuse_reference_writes
from indextables_spark.core.log.maintenance import open_log
from indextables_spark.core.log.transaction import Transaction, new_table_id, now_ms
from indextables_spark.config.options import PREFIX, Options
from indextables_spark.core.storage import open_storage


class _Table:
    """The part of IndexTable the write path needs (this module sits below api/table.py)."""

    def __init__(self, path: str, opts: Options):
        self.log = open_log(open_storage(path, opts), Options.of(opts))

    def version(self) -> int:
        return self.log.latest_version()

    def exists(self) -> bool:
        return self.version() >= 0

    def snapshot(self, version: int | None = None):
        return self.log.snapshot(version)

    def transaction(self, resolver: str = "merge", version: int | None = None) -> Transaction:
        return Transaction(self.log, resolver=resolver, read_version=version, operation="WRITE")


log = logging.getLogger(__name__)

DEFAULT_TARGET_SPLIT_SIZE = "1G"


@dataclass
class SplitsWritten:
    adds: list[dict] = field(default_factory=list)  # AddFile wire JSON
    num_rows: int = 0
    stats: dict[str, list[str]] = field(default_factory=dict)  # per-split stats files (e.g. "bloomfilter")


def merge_stats(messages) -> dict[str, list[str]]:
    """The stats files of every task's message, by key."""
    out: dict[str, list[str]] = {}
    for m in messages:
        for k, files in (getattr(m, "stats", None) or {}).items():
            out.setdefault(k, []).extend(files)
    return out


@dataclass(frozen=True)
class WritePlan:
    """What every task needs to know, decided once on the driver."""

    schema_json: dict  # the table schema (all columns nullable)
    partition_columns: list[str]
    options: Options  # table settings overlaid with this write's options
    doc_mapping: str  # JSON of the doc mapping splits of this write use
    target_split_bytes: int


def _field_types(schema_json: dict) -> dict[str, object]:
    return {f["name"]: f["type"] for f in schema_json["fields"]}


def _nullable_json(t):
    if isinstance(t, dict):
        out = dict(t)
        if out.get("type") == "struct":
            out["fields"] = [{**_nullable_json(f), "nullable": True} for f in out["fields"]]
        elif out.get("type") == "array":
            out["elementType"] = _nullable_json(out["elementType"])
            out["containsNull"] = True
        elif out.get("type") == "map":
            out["keyType"] = _nullable_json(out["keyType"])
            out["valueType"] = _nullable_json(out["valueType"])
            out["valueContainsNull"] = True
        elif "type" in out and isinstance(out["type"], dict):
            out["type"] = _nullable_json(out["type"])
        return out
    return t


def plan_write(path: str, opts: Options, schema_json: dict, overwrite: bool) -> tuple[WritePlan, int, bool]:
    """Validate a write against the table (if any) before any task runs. `schema_json` is the data's
    Spark schema JSON (StructType.jsonValue(); split.types.spark_schema_json for an Arrow schema).

    Returns (plan, read_version, table_exists).
    """
    from indextables_spark.config.registry import registered_default
    from indextables_spark.core.split.indexing import TOKEN_LENGTH_KEY, recorded_settings
    from indextables_spark.core.split.column_specs import validate_schema
    from indextables_spark.core.split.doc_mapping import doc_mapping_json

    TOKEN_LENGTH_DEFAULT = str(registered_default(TOKEN_LENGTH_KEY))
    table = _Table(path, opts)
    read_version = table.version()
    incoming = _nullable_json(schema_json)
    requested_parts = partition_columns_option(opts)
    if read_version >= 0:
        snap = table.snapshot(read_version)
        check_writable(snap.protocol_action, f"table {path}")
        refuse_companion(path, snap.metadata_action.configuration)
        # Splits of ours never go next to the reference implementation's (core/log/reference_splits.py).
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
        settings = Options.of(recorded_settings(snap.metadata_action.configuration), opts)
        _check_index_only_unchanged(path, snap.metadata_action.configuration, settings)
    else:
        table_schema = incoming
        parts = requested_parts or []
        # the token length is recorded at creation (what the table's splits mean never depends on
        # a default that may change; core/split/indexing.py)
        settings = Options.of({TOKEN_LENGTH_KEY: opts.get_str(TOKEN_LENGTH_KEY) or TOKEN_LENGTH_DEFAULT}, opts)
    names = [f["name"] for f in table_schema["fields"]]
    for c in parts:
        if c not in names:
            raise SchemaMismatchError(f"partition column {c!r} is not a column of the data (columns: {names})")
    if parts and len(parts) == len(names):
        raise SchemaMismatchError(f"cannot partition by every column ({parts}): no data columns would remain")
    validate_schema(table_schema, parts, settings)
    mapping = doc_mapping_json(table_schema, parts, settings)
    from indextables_spark.core.split.builder import target_split_bytes_option

    target = target_split_bytes_option(settings) or registered_default("write.targetSplitSize")
    plan = WritePlan(table_schema, list(parts), settings, mapping, target)
    return plan, read_version, read_version >= 0


def _check_index_only_unchanged(path: str, configuration: Mapping[str, str], settings: Options) -> None:
    """Which columns the rows leave out (indexing.indexonlyfields) is the table's, fixed at creation:
    readers decide from the recorded setting which filters only the index may answer."""
    from indextables_spark.core.split.indexing import IndexingConfig, recorded_settings

    recorded = set(IndexingConfig.of(Options.of(recorded_settings(configuration))).index_only)
    asked = set(IndexingConfig.of(settings).index_only)
    if asked != recorded:
        raise InvalidOptionError(
            f"table {path}: option indexing.indexonlyfields names {sorted(asked) or 'no column'}, but the table "
            f"was created with {sorted(recorded) or 'none'} (columns its rows leave out are fixed when a table "
            f"is created; leave the option out to write the table's setting)"
        )


def refuse_companion(path: str, configuration: Mapping[str, str]) -> None:
    """A companion index holds no rows of its own: only BUILD INDEXTABLES COMPANION writes it."""
    from indextables_spark.core.split.companion import companion_of

    of = companion_of(configuration)
    if of is not None:
        from indextables_spark.errors import CompanionSourceError

        fmt, source = of
        raise CompanionSourceError(
            f"table {path} is a companion index of the {fmt} table {source}: its rows are that table's, and it "
            f"takes no writes. Write to the {fmt} table, then run BUILD INDEXTABLES COMPANION FOR {fmt.upper()} "
            f"'{source}' AT LOCATION '{path}' to sync the index"
        )


def check_append_schema(path: str, table_schema: dict, incoming: dict) -> None:
    """The data must have exactly the table's columns with the same types (any order)."""
    tbl = _field_types(table_schema)
    inc = _field_types(incoming)
    missing = [c for c in tbl if c not in inc]
    extra = [c for c in inc if c not in tbl]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing columns {missing}")
        if extra:
            parts.append(f"columns not in the table {extra}")
        raise SchemaMismatchError(f"cannot write to table {path}: the data has {', '.join(parts)}")
    for name, t in tbl.items():
        if _nullable_json(t) != _nullable_json(inc[name]):
            raise SchemaMismatchError(
                f"cannot write to table {path}: column {name!r} has type {_type_str(inc[name])} in the data "
                f"but {_type_str(t)} in the table"
            )


def merge_append_schema(path: str, table_schema: dict, incoming: dict) -> dict:
    """Schema evolution for an append with mergeSchema=true: columns of the data that the table
    lacks are added at the end, nullable (splits written before read them as NULL). Every table
    column must still be in the data with its type; any other change is refused."""
    tbl = _field_types(table_schema)
    inc = _field_types(incoming)
    lower = {c.lower(): c for c in tbl}
    missing = [c for c in tbl if c not in inc]
    if missing:
        raise SchemaMismatchError(
            f"cannot write to table {path} with mergeSchema: the data has no columns {missing} (schema evolution "
            f"only adds columns; to drop or redefine columns use mode('overwrite') with overwriteSchema=true)"
        )
    for name, t in tbl.items():
        if _nullable_json(t) != _nullable_json(inc[name]):
            raise SchemaMismatchError(
                f"cannot write to table {path} with mergeSchema: column {name!r} has type {_type_str(inc[name])} in "
                f"the data but {_type_str(t)} in the table (incompatible change: types are never changed by "
                f"schema evolution)"
            )
    clash = [c for c in inc if c not in tbl and c.lower() in lower]
    if clash:
        raise SchemaMismatchError(
            f"cannot write to table {path} with mergeSchema: columns {clash} differ from table columns "
            f"{[lower[c.lower()] for c in clash]} only in case"
        )
    added = [f for f in incoming["fields"] if f["name"] not in tbl]
    if not added:
        return table_schema
    log.info("indextables: mergeSchema adds columns %s to %s", [f["name"] for f in added], path)
    return {
        **table_schema,
        "fields": list(table_schema["fields"]) + [{**_nullable_json(f), "nullable": True} for f in added],
    }


_SIMPLE_NAMES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


def _type_str(t) -> str:
    """Spark's DataType.simpleString() of a schema JSON type (for error messages)."""
    if isinstance(t, str):
        return _SIMPLE_NAMES.get(t, t)
    if isinstance(t, dict):
        kind = t.get("type")
        if kind == "array":
            return f"array<{_type_str(t['elementType'])}>"
        if kind == "map":
            return f"map<{_type_str(t['keyType'])},{_type_str(t['valueType'])}>"
        if kind == "struct":
            return "struct<" + ",".join(f"{f['name']}:{_type_str(f['type'])}" for f in t["fields"]) + ">"
        if kind == "udt":
            return _type_str(t.get("sqlType"))
    return str(t)


def write_splits(path: str, opts: Options, plan: WritePlan, batches: Iterator[pa.RecordBatch]) -> SplitsWritten:
    """Executor side: turn this task's rows into splits under the table."""
    from indextables_spark.core.split.builder import SplitWriter
    from indextables_spark.core.split.arrow_types import arrow_schema

    storage = open_storage(path, opts)
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
            delete_written(path, opts, [a.to_json() for a in writer.written], writer.stats_files)
        except Exception:  # the original error matters more
            log.warning(
                "indextables: could not delete the uncommitted splits of a failed write to %s", path, exc_info=True
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


def commit_write(
    path: str,
    opts: Options,
    plan: WritePlan,
    read_version: int,
    overwrite: bool,
    adds: list[AddFile],
    operation: str | None = None,
    txn_id: str | None = None,
    stats_files: dict[str, list[str]] | None = None,
) -> int:
    """Driver side: one version holding every add (and, for overwrite, removes of live files) and
    the stats files written with the splits (stats_files: key -> files, e.g. Bloom filters)."""
    table = _Table(path, opts)
    ref = doc_mapping_hash(plan.doc_mapping)
    for attempt in range(2):
        txn = table.transaction(resolver="merge", version=read_version)
        txn.txn_id = txn_id
        if read_version < 0:
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
            snap = txn.snapshot()
            meta = snap.metadata_action
            new_schema = _schema_string(plan.schema_json)
            needs_ref = registry_key(ref) not in meta.configuration
            schema_changed = new_schema != meta.schema_string or plan.partition_columns != meta.partition_columns
            if needs_ref or schema_changed:
                config = dict(meta.configuration)
                config[registry_key(ref)] = plan.doc_mapping
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
                txn.remove_files([f for f in snap.files_table.column("path").to_pylist()])
            op = "OVERWRITE" if overwrite else "WRITE"
        for a in adds:
            a.doc_mapping_ref = a.doc_mapping_ref or ref
        for key, files in (stats_files or {}).items():
            txn.update_stat(key, files)
        txn.add_files(adds).with_operation(
            operation or op, {"mode": "Overwrite" if overwrite else "Append", "partitionBy": plan.partition_columns}
        )
        try:
            return txn.commit()
        except ConcurrentModificationError:
            # Another job created the table between planning and commit: re-plan against it once.
            if read_version >= 0 or attempt:
                raise
            read_version = table.version()
            snap = table.snapshot(read_version)
            check_append_schema(path, snap.schema_json, plan.schema_json)
            if snap.partition_columns != plan.partition_columns:
                raise
    raise IndexTablesError("unreachable")  # pragma: no cover


def _schema_string(schema_json: dict) -> str:
    import json

    return json.dumps(schema_json, separators=(",", ":"))


def delete_written(path: str, opts: Options, adds: list[dict], stats: dict[str, list[str]] | None = None) -> None:
    """Remove split files (and their stats files) of a failed job (never referenced by the log)."""
    keys = [a["path"] for a in adds] + [f for files in (stats or {}).values() for f in files]
    if not keys:
        return
    storage = open_storage(path, opts)
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
        import json

        cols = json.loads(raw)
    else:
        cols = [c.strip() for c in raw.split(",") if c.strip()]
    return [str(c) for c in cols]


# --- Spark-free entry points: write_table / create_table --------------------------------------

WRITE_MODES = ("append", "overwrite", "error")
_MIN_CHUNK_ROWS = 100_000  # below this a chunk is not worth its own split per partition value


def _batch_source(data: Any) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """(schema, batches) of a pyarrow Table, RecordBatchReader, RecordBatch or pandas DataFrame."""
    if isinstance(data, pa.Table):
        return data.schema, iter(data.to_batches())
    if isinstance(data, pa.RecordBatchReader):
        return data.schema, iter(data)
    if isinstance(data, pa.RecordBatch):
        return data.schema, iter([data])
    try:
        import pandas as pd
    except ImportError:
        pd = None
    if pd is not None and isinstance(data, pd.DataFrame):
        t = pa.Table.from_pandas(data, preserve_index=False)
        return t.schema.remove_metadata(), iter(t.to_batches())
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


def _write_options(partition_by, options) -> Options:
    import json

    parts = None
    if partition_by is not None:
        parts = {"partitionBy": json.dumps([partition_by] if isinstance(partition_by, str) else list(partition_by))}
    return Options.of(options, parts)


def write_table(
    path: str, data: Any, *, mode: str = "append", partition_by=None, options: Mapping[str, Any] | None = None
) -> int:
    """Write Arrow data (pyarrow.Table, RecordBatchReader or pandas DataFrame) to the table at `path`
    without Spark: the same plan, splits, statistics, Bloom files and log as the Spark writer, splits
    built in parallel threads (one split per partition value per chunk, like one per Spark task),
    committed as one version. Returns the committed version.

    mode: "append" (creates the table if absent), "overwrite" (removes every live split; honours
    overwriteSchema / mergeSchema like the Spark writer) or "error" (fails if a table exists).
    Options: the data source options (short or `spark.indextables.`-prefixed keys), plus
    `write.parallelism` (threads, default: CPU count) and `write.chunkRows` (rows per chunk)."""
    import os
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    from indextables_spark.errors import InvalidOptionError, TableExistsError
    from indextables_spark.core.split.arrow_types import spark_schema_json

    mode = str(mode).lower()
    if mode not in WRITE_MODES:
        raise InvalidOptionError(f"write_table: mode must be one of {WRITE_MODES}, got {mode!r}")
    opts = _write_options(partition_by, options)
    if mode == "error" and _Table(path, opts).exists():
        raise TableExistsError(f"an indextables table already exists at {path}; use mode='append' or mode='overwrite'")
    overwrite = mode == "overwrite"
    schema, batches = _batch_source(data)
    plan, read_version, _ = plan_write(path, opts, spark_schema_json(schema), overwrite)
    workers = max(1, opts.get_int("write.parallelism", os.cpu_count() or 1))
    total = data.num_rows if isinstance(data, pa.Table) else None
    default_chunk = max(_MIN_CHUNK_ROWS, -(-total // workers)) if total else 4 * _MIN_CHUNK_ROWS
    chunk_rows = max(1, opts.get_int("write.chunkRows", default_chunk))
    futures: list = []
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="indextables-write") as pool:
            for chunk in _chunks(batches, chunk_rows):
                futures.append(pool.submit(write_splits, path, opts, plan, iter(chunk)))
                running = [f for f in futures if not f.done()]
                if len(running) >= 2 * workers:  # bound the rows held in memory
                    wait(running, return_when=FIRST_COMPLETED)
                failed = next((f for f in futures if f.done() and f.exception() is not None), None)
                if failed is not None:
                    failed.result()
        written = [f.result() for f in futures]
        adds = [AddFile.from_json(d) for m in written for d in m.adds]
        return commit_write(path, opts, plan, read_version, overwrite, adds, stats_files=merge_stats(written))
    except BaseException:
        # every chunk has finished (the pool waited): delete the splits of those that succeeded
        done = [f.result() for f in futures if f.done() and not f.cancelled() and f.exception() is None]
        delete_written(path, opts, [d for m in done for d in m.adds], merge_stats(done))
        raise


def create_table(path: str, schema: pa.Schema, partition_by=None, options: Mapping[str, Any] | None = None) -> int:
    """Create an empty table (version 0: protocol + metadata, no files), as a Spark write of an
    empty DataFrame commits. Fails with TableExistsError if a table exists at `path`."""
    from indextables_spark.errors import TableExistsError
    from indextables_spark.core.split.arrow_types import spark_schema_json

    opts = _write_options(partition_by, options)
    if _Table(path, opts).exists():
        raise TableExistsError(f"an indextables table already exists at {path}")
    plan, read_version, _ = plan_write(path, opts, spark_schema_json(schema), False)
    return commit_write(path, opts, plan, read_version, False, [])
