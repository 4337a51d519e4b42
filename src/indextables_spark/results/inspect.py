"""Results of the table's descriptions and listings: DESCRIBE INDEXTABLES TABLE, DESCRIBE HISTORY,
the live splits, DESCRIBE INDEXTABLES TRANSACTION LOG, DESCRIBE INDEXTABLES COMPONENT SIZES
(ops/inspect/)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from indextables_spark.results.record import (
    OperationResult,
    Record,
    empty_list,
    int32,
    json_text,
    result,
    timestamp,
)


@dataclasses.dataclass(frozen=True)
class ColumnRow(Record):
    """A column of DESCRIBE INDEXTABLES TABLE: its Spark type and how the splits index it."""

    name: str
    type: str  # the Spark type: `long`, `string`, `array<float>`, `struct<a:long>`, …
    nullable: bool
    # partition | text (tokenizer default) | string | i64 | …, then `fast` (a fast field, for
    # sorts and aggregations), `index only`, a compact string mode; `stored only` (no index);
    # `vector (768 dims, cosine)`
    indexing: str


@result
class DescribeTableResult(OperationResult):
    """DESCRIBE INDEXTABLES TABLE: what the table holds at its latest version (rows, splits, bytes,
    partitions), its versions, its columns and how they are indexed, and its recorded settings."""

    repr_fields: ClassVar[tuple[str, ...]] = (
        "table_path",
        "version",
        "oldest_version",
        "last_operation",
        "num_rows",
        "num_splits",
        "total_bytes",
        "partition_columns",
        "columns",
    )
    table_path: str
    version: int  # the latest
    oldest_version: int  # the oldest version a read can open (time travel back to it)
    last_commit_time: int | None = timestamp()
    last_operation: str | None = None  # of the latest version (None: its version file is gone)
    created_at: int | None = timestamp()
    num_rows: int = 0  # live rows: row-level deletes left out
    num_deleted_rows: int | None = 0  # rows of the live splits deleted by delete logs (None: unknown)
    num_splits: int = 0
    total_bytes: int = 0
    partition_columns: list[str] = empty_list()
    num_partitions: int = 0  # distinct partition values of the live splits (0: unpartitioned)
    delete_logs: int = 0
    checkpoint_version: int | None = None  # the newest checkpoint or state (None: none yet)
    protocol_version: int | None = int32()
    companion_format: str | None = None  # a companion index: its source's format and path
    companion_source: str | None = None
    columns: list[ColumnRow] = empty_list()
    settings: dict[str, str] = dataclasses.field(default_factory=dict)  # the table's recorded settings


@result
class HistoryEntry(OperationResult):
    """One committed version (DESCRIBE HISTORY)."""

    version: int
    timestamp: int | None = timestamp()
    operation: str = "UNKNOWN"
    operation_parameters: dict[str, Any] = json_text(None)
    num_added_files: int = 0
    num_removed_files: int = 0
    num_added_records: int = 0
    added_bytes: int = 0
    metadata_changed: bool = False


@dataclasses.dataclass(frozen=True)
class FileRow(Record):
    """One live split (the `files` command and table function)."""

    path: str
    partition_values: dict[str, str | None]  # None: a null partition value
    size: int
    num_records: int | None = None
    modification_time: int | None = timestamp()
    num_merge_ops: int | None = int32()
    added_at_version: int | None = None


@dataclasses.dataclass(frozen=True)
class TransactionLogRow(Record):
    """One action of DESCRIBE INDEXTABLES TRANSACTION LOG: the columns of its kind are set."""

    version: int
    log_file_path: str
    is_checkpoint: bool
    action_type: str | None = None
    path: str | None = None
    partition_values: dict[str, str] | None = None
    size: int | None = None
    modification_time: int | None = timestamp()
    data_change: bool | None = None
    num_records: int | None = None
    stats: str | None = None
    min_values: dict[str, str] | None = None
    max_values: dict[str, str] | None = None
    has_footer_offsets: bool | None = None
    footer_start_offset: int | None = None
    footer_end_offset: int | None = None
    split_tags: list[str] | None = None
    tags: dict[str, str] | None = None  # Delta-style tags of an add (`vectorIndexBuildMs`: its vector index build)
    num_merge_ops: int | None = int32()
    doc_mapping_ref: str | None = None
    uncompressed_size_bytes: int | None = None
    added_at_version: int | None = None
    deletion_timestamp: int | None = timestamp()
    skip_timestamp: int | None = timestamp()
    skip_reason: str | None = None
    skip_operation: str | None = None
    skip_retry_after: int | None = timestamp()
    skip_count: int | None = int32()
    protocol_min_reader_version: int | None = int32()
    protocol_min_writer_version: int | None = int32()
    protocol_reader_features: list[str] | None = None
    protocol_writer_features: list[str] | None = None
    metadata_id: str | None = None
    metadata_schema_string: str | None = None
    metadata_partition_columns: list[str] | None = None
    metadata_configuration: dict[str, str] | None = None
    metadata_created_time: int | None = timestamp()
    commit_timestamp: int | None = timestamp()
    commit_operation: str | None = None
    commit_operation_parameters: str | None = None
    delete_log_kind: str | None = None
    delete_log_split_path: str | None = None
    delete_log_columns: list[str] | None = None
    delete_log_num_entries: int | None = None
    stats_key: str | None = None
    stats_files: list[str] | None = None


@dataclasses.dataclass(frozen=True)
class ComponentSizeRow(Record):
    """DESCRIBE INDEXTABLES COMPONENT SIZES: the bytes of one component of one split."""

    split_path: str
    partition_values: str | None  # JSON object of the split's partition values; null: unpartitioned
    component_key: str  # `<field>.<type>`, or `_<name>` for what belongs to no field
    size_bytes: int
    component_type: str  # term, postings, positions, fieldnorm, fastfield, store, vectors, meta, footer
    field_name: str | None  # the Tantivy field
    column_name: str | None  # the table column the field indexes (`body__exact` → `body`)
