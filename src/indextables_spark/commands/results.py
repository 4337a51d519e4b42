"""Output columns of each maintenance command, shared by the three front ends.

An operation returns a plain dict (camelCase keys, like the rest of the Python API) or a
pyarrow Table (many rows). The SQL front end, the SQL table functions and the command line show
the same typed columns (snake_case, as in the reference implementation's SQL output): this module
is the one place that says which columns each command has and converts results to Arrow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pyarrow as pa

TS = pa.timestamp("ms", tz="UTC")  # epoch-ms values in the dicts become timestamps
STR_MAP = pa.map_(pa.string(), pa.string())
STR_LIST = pa.list_(pa.string())


def camel(snake: str) -> str:
    """`num_skipped_files` → `numSkippedFiles` (the dict key of a column)."""
    head, *rest = snake.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


_CAMEL_RE = re.compile(r"(?<!^)(?=[A-Z])")


def snake(name: str) -> str:
    return _CAMEL_RE.sub("_", name).lower()


@dataclass(frozen=True)
class ResultSpec:
    """The columns of one command's output."""

    command: str
    schema: pa.Schema

    @property
    def columns(self) -> list[str]:
        return self.schema.names

    def spark_schema(self):
        from pyspark.sql.types import StructType

        from ..split.types import spark_schema_json

        return StructType.fromJson(spark_schema_json(self.schema))

    def table(self, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
        """Rows (dicts keyed by column name or its camelCase form) → Arrow table of these columns."""
        arrays = [pa.array([_value(r, f) for r in rows], f.type) for f in self.schema]
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def row(self, result: Mapping[str, Any]) -> pa.Table:
        return self.table([result])


def _lookup(d: Mapping[str, Any], name: str) -> Any:
    if name in d:
        return d[name]
    return d.get(camel(name))


def _value(d: Mapping[str, Any], f: pa.Field) -> Any:
    return _convert(_lookup(d, f.name), f.type)


def _convert(v: Any, t: pa.DataType) -> Any:
    if v is None:
        return None
    if pa.types.is_struct(t):
        return {t.field(i).name: _convert(_lookup(v, t.field(i).name), t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_list(t):
        return [_convert(x, t.value_type) for x in v]
    if pa.types.is_map(t):
        return {str(k): (None if x is None else str(x)) for k, x in dict(v).items()}
    if pa.types.is_string(t) and not isinstance(v, str):
        import json

        return json.dumps(v, sort_keys=True, default=str) if isinstance(v, (dict, list)) else str(v)
    if pa.types.is_floating(t):
        return float(v)
    if pa.types.is_integer(t) or pa.types.is_timestamp(t):
        return int(v)
    return v


def python_value(v: Any, t: pa.DataType) -> Any:
    """Arrow's Python value with maps as dicts (Arrow gives lists of pairs)."""
    if v is None:
        return None
    if pa.types.is_struct(t):
        return {t.field(i).name: python_value(v[t.field(i).name], t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_list(t):
        return [python_value(x, t.value_type) for x in v]
    if pa.types.is_map(t):
        return {k: x for k, x in v}
    return v


def python_rows(table: pa.Table) -> list[dict[str, Any]]:
    fields = list(table.schema)
    return [{f.name: python_value(r[f.name], f.type) for f in fields} for r in table.to_pylist()]


def _spec(command: str, *cols: tuple[str, pa.DataType]) -> ResultSpec:
    return ResultSpec(command, pa.schema([pa.field(n, t) for n, t in cols]))


SKIP_STRUCT = pa.struct(
    [
        ("path", pa.string()),
        ("reason", pa.string()),
        ("operation", pa.string()),
        ("skip_timestamp", TS),
        ("retry_after", TS),
        ("skip_count", pa.int32()),
    ]
)

CHECKPOINT = _spec(
    "CHECKPOINT",
    ("table_path", pa.string()),
    ("status", pa.string()),
    ("version", pa.int64()),
    ("previous_format", pa.string()),
    ("new_format", pa.string()),
    ("state_dir", pa.string()),
    ("compacted", pa.bool_()),
    ("reason", pa.string()),
    ("num_files", pa.int64()),
    ("total_bytes", pa.int64()),
    ("num_manifests", pa.int64()),
    ("num_tombstones", pa.int64()),
    ("manifests_written", pa.int64()),
    ("bytes_written", pa.int64()),
    ("duration_ms", pa.float64()),
)
COMPACT = ResultSpec("COMPACT", CHECKPOINT.schema)

DESCRIBE_STATE = _spec(
    "DESCRIBE STATE",
    ("table_path", pa.string()),
    ("table_version", pa.int64()),
    ("format", pa.string()),
    ("version", pa.int64()),
    ("state_dir", pa.string()),
    ("num_files", pa.int64()),
    ("total_bytes", pa.int64()),
    ("num_manifests", pa.int64()),
    ("num_tombstones", pa.int64()),
    ("tombstone_ratio", pa.float64()),
    ("needs_compaction", pa.bool_()),
    ("compaction_reason", pa.string()),
    ("created_at", TS),
    ("protocol_version", pa.int32()),
    ("reader_features", STR_LIST),
    ("versions_since_checkpoint", pa.int64()),
    ("last_checkpoint_status", pa.string()),
    ("partition_columns", STR_LIST),
    ("num_skipped_files", pa.int64()),
    ("num_skips_cooling_down", pa.int64()),
    ("skipped_files", pa.list_(SKIP_STRUCT)),
)

TRANSACTION_LOG = _spec(
    "DESCRIBE TRANSACTION LOG",
    ("version", pa.int64()),
    ("log_file_path", pa.string()),
    ("is_checkpoint", pa.bool_()),
    ("action_type", pa.string()),
    ("path", pa.string()),
    ("partition_values", STR_MAP),
    ("size", pa.int64()),
    ("modification_time", TS),
    ("data_change", pa.bool_()),
    ("num_records", pa.int64()),
    ("stats", pa.string()),
    ("min_values", STR_MAP),
    ("max_values", STR_MAP),
    ("has_footer_offsets", pa.bool_()),
    ("footer_start_offset", pa.int64()),
    ("footer_end_offset", pa.int64()),
    ("split_tags", STR_LIST),
    ("num_merge_ops", pa.int32()),
    ("doc_mapping_ref", pa.string()),
    ("uncompressed_size_bytes", pa.int64()),
    ("added_at_version", pa.int64()),
    ("deletion_timestamp", TS),
    ("skip_timestamp", TS),
    ("skip_reason", pa.string()),
    ("skip_operation", pa.string()),
    ("skip_retry_after", TS),
    ("skip_count", pa.int32()),
    ("protocol_min_reader_version", pa.int32()),
    ("protocol_min_writer_version", pa.int32()),
    ("protocol_reader_features", STR_LIST),
    ("protocol_writer_features", STR_LIST),
    ("metadata_id", pa.string()),
    ("metadata_schema_string", pa.string()),
    ("metadata_partition_columns", STR_LIST),
    ("metadata_configuration", STR_MAP),
    ("metadata_created_time", TS),
    ("commit_timestamp", TS),
    ("commit_operation", pa.string()),
    ("commit_operation_parameters", pa.string()),
    ("delete_log_kind", pa.string()),
    ("delete_log_split_path", pa.string()),
    ("delete_log_columns", STR_LIST),
    ("delete_log_num_entries", pa.int64()),
    ("stats_key", pa.string()),
    ("stats_files", STR_LIST),
)

MERGE_SPLITS = _spec(
    "MERGE SPLITS",
    ("table_path", pa.string()),
    ("status", pa.string()),
    ("version", pa.int64()),
    ("read_version", pa.int64()),
    ("predicate", pa.string()),
    ("target_size", pa.int64()),
    ("merge_groups", pa.int64()),
    ("merged_groups", pa.int64()),
    ("source_splits_merged", pa.int64()),
    ("splits_created", pa.int64()),
    ("bytes_merged", pa.int64()),
    ("bytes_created", pa.int64()),
    ("records_merged", pa.int64()),
    ("splits_skipped", pa.int64()),
    ("splits_cooling_down", pa.int64()),
    ("splits_other_mapping", pa.int64()),
    ("skipped_files", pa.list_(SKIP_STRUCT)),
    ("duration_ms", pa.float64()),
)

PURGE = _spec(
    "PURGE",
    ("table_path", pa.string()),
    ("status", pa.string()),
    ("dry_run", pa.bool_()),
    ("retention_hours", pa.float64()),
    ("tx_log_retention_hours", pa.float64()),
    ("split_files_found", pa.int64()),
    ("orphaned_splits_found", pa.int64()),
    ("splits_deleted", pa.int64()),
    ("bytes_deleted", pa.int64()),
    ("young_orphans_kept", pa.int64()),
    ("version_files_deleted", pa.int64()),
    ("checkpoint_files_deleted", pa.int64()),
    ("state_dirs_removed", pa.int64()),
    ("manifests_deleted", pa.int64()),
    ("oldest_retained_version", pa.int64()),
    ("deleted_splits", STR_LIST),
    ("duration_ms", pa.float64()),
)

TRUNCATE_TIME_TRAVEL = _spec(
    "TRUNCATE TIME TRAVEL",
    ("table_path", pa.string()),
    ("status", pa.string()),
    ("dry_run", pa.bool_()),
    ("version", pa.int64()),
    ("version_files_removed", pa.int64()),
    ("checkpoints_removed", pa.int64()),
    ("state_dirs_removed", pa.int64()),
    ("files_removed", pa.int64()),
    ("orphaned_manifests", pa.int64()),
)

DROP_PARTITIONS = _spec(
    "DROP PARTITIONS",
    ("table_path", pa.string()),
    ("status", pa.string()),
    ("version", pa.int64()),
    ("predicate", pa.string()),
    ("partitions_dropped", pa.int64()),
    ("splits_removed", pa.int64()),
    ("bytes_removed", pa.int64()),
    ("records_removed", pa.int64()),
    ("partitions", STR_LIST),
)

DELETE = _spec(
    "DELETE",
    ("table_path", pa.string()),
    ("status", pa.string()),
    ("version", pa.int64()),
    ("read_version", pa.int64()),
    ("kind", pa.string()),
    ("predicate", pa.string()),
    ("delete_logs", pa.int64()),
    ("deleted_rows", pa.int64()),
    ("removed_splits", pa.int64()),
    ("splits_scanned", pa.int64()),
    ("splits_total", pa.int64()),
    ("duration_ms", pa.float64()),
)

REPAIR = _spec(
    "REPAIR TRANSACTION LOG",
    ("source_path", pa.string()),
    ("target_path", pa.string()),
    ("status", pa.string()),
    ("source_version", pa.int64()),
    ("total_splits", pa.int64()),
    ("valid_splits", pa.int64()),
    ("missing_splits", pa.int64()),
    ("missing_paths", STR_LIST),
    ("delete_logs", pa.int64()),
    ("missing_delete_logs", STR_LIST),
    ("duration_ms", pa.float64()),
)

HISTORY = _spec(
    "HISTORY",
    ("version", pa.int64()),
    ("timestamp", TS),
    ("operation", pa.string()),
    ("operation_parameters", pa.string()),
    ("num_added_files", pa.int64()),
    ("num_removed_files", pa.int64()),
    ("num_added_records", pa.int64()),
    ("added_bytes", pa.int64()),
    ("metadata_changed", pa.bool_()),
)

FILES = _spec(
    "FILES",
    ("path", pa.string()),
    ("partition_values", STR_MAP),
    ("size", pa.int64()),
    ("num_records", pa.int64()),
    ("modification_time", TS),
    ("num_merge_ops", pa.int32()),
    ("added_at_version", pa.int64()),
)


PREWARM_CACHE = _spec(
    "PREWARM CACHE",
    ("host", pa.string()),
    ("cache_path", pa.string()),
    ("table_path", pa.string()),
    ("splits", pa.int64()),
    ("already_cached", pa.int64()),
    ("fetched", pa.int64()),
    ("bytes", pa.int64()),
    ("tasks", pa.int64()),
    ("duration_ms", pa.float64()),
)

DESCRIBE_DISK_CACHE = _spec(
    "DESCRIBE DISK CACHE",
    ("host", pa.string()),
    ("cache_path", pa.string()),
    ("entries", pa.int64()),
    ("bytes", pa.int64()),
    ("limit", pa.int64()),
    ("hits", pa.int64()),
    ("misses", pa.int64()),
    ("evictions", pa.int64()),
    ("processes", pa.int64()),
)

FLUSH_DISK_CACHE = _spec(
    "FLUSH DISK CACHE",
    ("host", pa.string()),
    ("cache_path", pa.string()),
    ("entries_removed", pa.int64()),
    ("bytes_removed", pa.int64()),
    ("in_use_kept", pa.int64()),
    ("processes", pa.int64()),
)

BUILD_COMPANION = _spec(
    "BUILD COMPANION",
    ("table_path", pa.string()),
    ("source_format", pa.string()),
    ("source", pa.string()),
    ("source_version", pa.int64()),
    ("source_files", pa.int64()),
    ("files_indexed", pa.int64()),
    ("files_removed", pa.int64()),
    ("bytes_indexed", pa.int64()),
    ("splits_added", pa.int64()),
    ("splits_removed", pa.int64()),
    ("rows_indexed", pa.int64()),
    ("version", pa.int64()),
    ("dry_run", pa.bool_()),
    ("duration_ms", pa.float64()),
)
