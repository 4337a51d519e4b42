"""Typed results of the table operations (checkpoint, merge, purge, describe, …).

(Over 500 lines: the result classes are data declarations that core/log, ops and the front ends
share; one module keeps their columns and JSON forms side by side.)

Each operation returns a frozen dataclass: attributes are snake_case (`res.num_files`), `to_dict()`
gives the camelCase JSON form (the CLI's `--json`), and `arrow_schema()` /
`to_row()` give the SQL front ends their typed columns — the dataclass fields, in order.

The public API documents these results as dicts (`t.maintenance.checkpoint() -> dict`): an
`OperationResult` is therefore also a read-only dict of its `to_dict()` keys (`res["numFiles"]`,
`json.dumps(res)`, `res == {...}` keep working); writing to it raises TypeError. Build a changed
copy with `dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
import types
import typing
from typing import Any, ClassVar, Union

import pyarrow as pa

TIMESTAMP = pa.timestamp("ms", tz="UTC")

Progress = typing.Callable[[str, int, int], None]
"""How long-running operations report progress: (stage, done, total); the CLI draws it as a bar."""


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started` (a time.perf_counter() value), to 0.1 ms: results' duration_ms."""

    return round((time.perf_counter() - started) * 1000, 1)


def camel(snake: str) -> str:
    """`num_skipped_files` → `numSkippedFiles` (the dict / JSON key of a field)."""
    head, *rest = snake.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def timestamp(default: Any = None) -> Any:
    """A field holding epoch milliseconds, shown as a UTC timestamp column."""
    return dataclasses.field(default=default, metadata={"arrow": TIMESTAMP})


def int32(default: Any = None) -> Any:
    return dataclasses.field(default=default, metadata={"arrow": pa.int32()})


def json_text(default: Any = None) -> Any:
    """A field holding a JSON-like value (dict/list), shown as a JSON string column."""
    return dataclasses.field(default=default, metadata={"arrow": pa.string(), "json": True})


def empty_list() -> Any:
    return dataclasses.field(default_factory=list)


def _arrow_type(hint: Any, owner: str, name: str) -> pa.DataType:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _arrow_type(inner[0], owner, name)
    elif origin in (list, tuple):
        return pa.list_(_arrow_type(args[0], owner, name))
    elif origin is dict and args in ((str, str), (str, str | None)):  # map values may be null
        return pa.map_(pa.string(), pa.string())
    elif hint is bool:
        return pa.bool_()
    elif hint is int:
        return pa.int64()
    elif hint is float:
        return pa.float64()
    elif hint is str:
        return pa.string()
    elif isinstance(hint, type) and issubclass(hint, Record):
        return pa.struct(list(hint.arrow_schema()))
    raise TypeError(f"{owner}.{name}: no column type for {hint!r} (give it metadata 'arrow')")


def _plain(value: Any) -> Any:
    """JSON form of a field value: nested records as camelCase dicts, tuples as lists."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _row_value(value: Any, field: dataclasses.Field[Any]) -> Any:
    if value is None:
        return None
    if field.metadata.get("json"):
        return json.dumps(_plain(value), sort_keys=True, default=str)
    if isinstance(value, Record):
        return value.to_row()
    if isinstance(value, (list, tuple)):
        return [v.to_row() if isinstance(v, Record) else v for v in value]
    return value


class Record:
    """Mixin of the result dataclasses: their columns and their JSON form."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @classmethod
    @functools.cache
    def arrow_schema(cls) -> pa.Schema:
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            t = f.metadata.get("arrow") or _arrow_type(hints[f.name], cls.__name__, f.name)
            out.append(pa.field(f.name, t))
        return pa.schema(out)

    @classmethod
    def column_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    def to_row(self) -> dict[str, Any]:
        """The SQL row: field name → value as its Arrow column takes it."""
        return {f.name: _row_value(getattr(self, f.name), f) for f in dataclasses.fields(self)}

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: camelCase keys, nested records as dicts."""
        return {camel(f.name): _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def table(cls, records: typing.Sequence[Record]) -> pa.Table:
        """Records of this class → an Arrow table of its columns."""
        bad = [r for r in records if not isinstance(r, cls)]
        if bad:
            raise TypeError(f"expected {cls.__name__} rows, got {type(bad[0]).__name__}")
        return pa.Table.from_pylist([r.to_row() for r in records], schema=cls.arrow_schema())


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
    """Rows of a result table as JSON-ready dicts (maps as dicts)."""
    fields = list(table.schema)
    return [{f.name: python_value(row[f.name], f.type) for f in fields} for row in table.to_pylist()]


def _read_only(self: OperationResult, *args: Any, **kwargs: Any) -> Any:
    raise TypeError(f"{type(self).__name__} is read-only (use dataclasses.replace for a changed copy)")


def _rebuild(cls: type[OperationResult], values: dict[str, Any]) -> OperationResult:
    return cls(**values)


class OperationResult(Record, dict[str, Any]):
    """Base of the operation results: a frozen dataclass that is also a read-only dict of its
    JSON form (see the module's docstring). Subclasses use `@dataclass(frozen=True, eq=False)`
    (dict equality: a result equals the dict of its JSON form)."""

    def __post_init__(self) -> None:
        dict.update(self, self.to_dict())

    def __reduce__(self) -> tuple[Any, ...]:
        # pickling (Spark tasks return results) rebuilds from the fields, not through __setitem__
        return (_rebuild, (type(self), {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}))

    __setitem__ = _read_only
    __delitem__ = _read_only
    __ior__ = _read_only
    clear = _read_only
    pop = _read_only
    popitem = _read_only
    setdefault = _read_only
    update = _read_only


result = dataclasses.dataclass(frozen=True, eq=False)
"""The decorator of OperationResult subclasses (frozen; dict equality, see OperationResult)."""


# ---- state (core/log/maintenance/maintenance.py, core/log/maintenance/gc.py, ops/inspect/describe.py) -------


@dataclasses.dataclass(frozen=True)
class SkippedFile(Record):
    """A SkipAction in force: a split a merge left out, and until when."""

    path: str
    reason: str | None = None
    operation: str | None = None
    skip_timestamp: int | None = timestamp()
    retry_after: int | None = timestamp()
    skip_count: int | None = int32()

    @classmethod
    def of(cls, skip: Any) -> SkippedFile:
        """From a log SkipAction (core/log/model/actions.py)."""
        return cls(skip.path, skip.reason, skip.operation, skip.skip_timestamp, skip.retry_after, skip.skip_count)


@result
class CheckpointResult(OperationResult):
    """CHECKPOINT / COMPACT."""

    table_path: str
    status: str  # SUCCESS | SKIPPED (COMPACT of an already clean state)
    version: int
    previous_format: str | None = None
    new_format: str | None = None
    state_dir: str | None = None
    compacted: bool = False
    reason: str | None = None
    num_files: int | None = None
    total_bytes: int | None = None
    num_manifests: int | None = None
    num_tombstones: int | None = None
    manifests_written: int | None = None
    entries_written: int | None = None
    bytes_written: int | None = None
    attempts: int | None = None  # put-if-absent attempts of the state manifest
    already_existed: bool | None = None  # the state was there already (written by a concurrent writer)
    base_version: int | None = None  # the state an incremental write built on
    duration_ms: float = 0.0
    upgraded_from_protocol: dict[str, Any] | None = json_text()  # the protocol before a V4 upgrade


@result
class DescribeStateResult(OperationResult):
    """DESCRIBE INDEXTABLES STATE."""

    table_path: str
    table_version: int
    format: str  # none | json | avro-state | …
    version: int | None = None  # the version of the state / checkpoint described
    state_dir: str | None = None
    num_files: int | None = None
    total_bytes: int | None = None
    num_manifests: int = 0
    num_tombstones: int = 0
    tombstone_ratio: float = 0.0
    needs_compaction: bool = False
    compaction_reason: str | None = None
    created_at: int | None = timestamp()
    protocol_version: int | None = int32()
    reader_features: list[str] = empty_list()
    versions_since_checkpoint: int | None = None
    last_checkpoint_status: str = "absent"
    partition_columns: list[str] = empty_list()
    num_skipped_files: int = 0
    num_skips_cooling_down: int = 0
    skipped_files: list[SkippedFile] = empty_list()
    num_entries: int | None = None
    state_protocol_version: int | None = int32()
    schema_registry_size: int | None = None


@result
class StateCleanupResult(OperationResult):
    """Old state directories removed (beyond retention)."""

    state_dirs_removed: int = 0
    state_versions_removed: list[int] = empty_list()
    files_removed: int = 0
    state_dirs_retained: int = 0
    dry_run: bool = False


@result
class ManifestGcResult(OperationResult):
    """Orphan manifests (referenced by no state) removed."""

    manifests_total: int = 0
    manifests_reachable: int = 0
    orphaned_manifests: int = 0
    deleted_manifests: int = 0
    would_delete_manifests: int = 0
    young_orphans_kept: int = 0
    dry_run: bool = False


@result
class GcStateResult(OperationResult):
    """The state part of PURGE: old states (StateCleanupResult), then orphan manifests
    (ManifestGcResult), one flat row."""

    table_path: str
    dry_run: bool
    state_dirs_removed: int = 0
    state_versions_removed: list[int] = empty_list()
    files_removed: int = 0
    state_dirs_retained: int = 0
    manifests_total: int = 0
    manifests_reachable: int = 0
    orphaned_manifests: int = 0
    deleted_manifests: int = 0
    would_delete_manifests: int = 0
    young_orphans_kept: int = 0

    @classmethod
    def of(cls, table_path: str, states: StateCleanupResult, manifests: ManifestGcResult) -> GcStateResult:
        parts = {**dataclasses.asdict(states), **dataclasses.asdict(manifests)}
        parts.pop("dry_run")
        return cls(table_path=table_path, dry_run=states.dry_run, **parts)


@result
class TruncateTimeTravelResult(OperationResult):
    """TRUNCATE INDEXTABLES TIME TRAVEL."""

    table_path: str
    status: str  # SUCCESS | DRY_RUN
    dry_run: bool
    version: int
    version_files_removed: int = 0
    checkpoints_removed: int = 0
    state_dirs_removed: int = 0
    files_removed: int = 0
    orphaned_manifests: int = 0
    deleted_manifests: int = 0
    checkpoint: CheckpointResult | None = json_text()  # the checkpoint written first (not in a dry run)


# ---- history, files --------------------------------------------------------------------------------


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


# ---- maintenance commands (commands/) ------------------------------------------------------------


@result
class MergeSplitsResult(OperationResult):
    """MERGE SPLITS."""

    table_path: str
    status: str  # SUCCESS | NO_ACTION | DRY_RUN
    version: int | None = None
    read_version: int | None = None
    predicate: str | None = None
    target_size: int | None = None
    merge_groups: int = 0
    merged_groups: int = 0
    source_splits_merged: int = 0
    splits_created: int = 0
    bytes_merged: int = 0
    bytes_created: int = 0
    records_merged: int = 0
    splits_skipped: int = 0
    splits_cooling_down: int = 0
    splits_other_mapping: int = 0
    splits_index_only: int = 0  # left as they are: index-only columns cannot be rebuilt from rows
    skipped_files: list[SkippedFile] = empty_list()
    duration_ms: float = 0.0


@result
class PurgeResult(OperationResult):
    """PURGE INDEXTABLE."""

    table_path: str
    status: str  # SUCCESS | DRY_RUN
    dry_run: bool
    retention_hours: float
    tx_log_retention_hours: float
    split_files_found: int = 0
    orphaned_splits_found: int = 0
    splits_deleted: int = 0
    bytes_deleted: int = 0
    young_orphans_kept: int = 0
    version_files_deleted: int = 0
    checkpoint_files_deleted: int = 0
    state_dirs_removed: int = 0
    manifests_deleted: int = 0
    oldest_retained_version: int | None = None
    deleted_splits: list[str] = empty_list()
    duration_ms: float = 0.0
    temp_files_deleted: int = 0


@result
class DropPartitionsResult(OperationResult):
    """DROP INDEXTABLES PARTITIONS."""

    table_path: str
    status: str  # SUCCESS | NO_ACTION
    version: int | None
    predicate: str
    partitions_dropped: int = 0
    splits_removed: int = 0
    bytes_removed: int = 0
    records_removed: int = 0
    partitions: list[str] = empty_list()


@result
class DeleteResult(OperationResult):
    """DELETE FROM (row-level delete)."""

    table_path: str
    status: str  # SUCCESS | NO_ACTION (nothing matched: no version committed)
    version: int  # the committed version (the read version for NO_ACTION)
    read_version: int
    kind: str | None  # POSITIONAL | EQUALITY | PRIMARY_KEY
    predicate: str | None
    delete_logs: int = 0
    deleted_rows: int | None = 0  # None for key/equality deletes (not computed)
    removed_splits: int = 0  # splits all of whose rows were deleted
    splits_scanned: int = 0
    splits_total: int = 0
    duration_ms: float = 0.0
    query: str | None = None


@result
class RepairResult(OperationResult):
    """REPAIR INDEXFILES TRANSACTION LOG."""

    source_path: str
    target_path: str
    status: str  # SUCCESS | DRY_RUN
    source_version: int
    total_splits: int = 0
    valid_splits: int = 0
    missing_splits: int = 0
    missing_paths: list[str] = empty_list()
    delete_logs: int = 0
    missing_delete_logs: list[str] = empty_list()
    duration_ms: float = 0.0


@result
class CompanionBuildResult(OperationResult):
    """BUILD INDEXTABLES COMPANION."""

    table_path: str
    source_format: str
    source: str
    source_version: int | None = None
    source_files: int = 0
    files_indexed: int = 0
    files_removed: int = 0
    bytes_indexed: int = 0
    splits_added: int = 0
    splits_removed: int = 0
    rows_indexed: int = 0
    version: int | None = None
    dry_run: bool = False
    duration_ms: float = 0.0
    status: str = "SUCCESS"  # SUCCESS | NO_ACTION | DRY_RUN


@result
class ConvertResult(OperationResult):
    """CONVERT INDEXTABLES TABLE: the splits the reference implementation wrote, rewritten as ours."""

    table_path: str
    status: str  # SUCCESS | NO_ACTION (no reference splits) | DRY_RUN
    dry_run: bool = False
    version: int | None = None  # the CONVERT version (None: dry run, nothing to convert)
    read_version: int | None = None
    live_splits: int = 0
    reference_splits: int = 0  # live splits the reference wrote (converted, or to convert in a dry run)
    splits_created: int = 0
    records_converted: int = 0  # rows of the converted splits (a dry run: numRecords of the log)
    bytes_read: int = 0  # sizes of the reference splits
    bytes_written: int = 0
    settings: dict[str, str] = dataclasses.field(default_factory=dict)  # indexing settings recorded in the table
    converted_splits: list[str] = empty_list()  # the reference splits' paths
    duration_ms: float = 0.0


@result
class PostWriteResult(OperationResult):
    """Merge-/purge-on-write after a committed write (ops/maintenance/post_write.py)."""

    table_path: str
    status: str  # DONE | STARTED (in the background) | ALREADY_RUNNING | FAILED
    merge: MergeSplitsResult | None = json_text()
    purge: PurgeResult | None = json_text()
    merge_groups: int | None = None  # the merge groups found, when fewer than the threshold
    merge_threshold: int | None = None  # the groups that trigger a merge-on-write
    error: str | None = None  # FAILED: the error (the write itself succeeded)


# ---- the split cache (one row per host and cache directory) -------------------------------------


@result
class PrewarmCacheResult(OperationResult):
    """PREWARM INDEXTABLES CACHE."""

    host: str
    cache_path: str
    table_path: str
    splits: int = 0
    already_cached: int = 0
    fetched: int = 0
    bytes: int = 0
    tasks: int = 1
    duration_ms: float = 0.0


@result
class DiskCacheInfo(OperationResult):
    """DESCRIBE INDEXTABLES DISK CACHE."""

    host: str
    cache_path: str
    entries: int = 0
    bytes: int = 0
    limit: int = 0
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    processes: int = 1


@result
class FlushDiskCacheResult(OperationResult):
    """FLUSH INDEXTABLES DISK CACHE."""

    host: str
    cache_path: str
    entries_removed: int = 0
    bytes_removed: int = 0
    in_use_kept: int = 0
    processes: int = 1


# ---- storage insight: DESCRIBE INDEXTABLES STORAGE STATS / ENVIRONMENT / COMPONENT SIZES -------


@result
class StorageStatsRow(OperationResult):
    """DESCRIBE INDEXTABLES STORAGE STATS: what the Python processes of the driver (`driver`) and
    of each executor host fetched from object storage since they started (bytes, GET requests)."""

    executor_id: str
    host: str
    bytes_fetched: int = 0
    requests: int = 0
    processes: int = 1


@result
class EnvironmentRow(OperationResult):
    """DESCRIBE INDEXTABLES ENVIRONMENT: one property of the driver or of an executor host."""

    host: str
    role: str  # driver | worker
    property_type: str  # spark | indextables | python | package | env
    property_name: str
    property_value: str | None = None


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
