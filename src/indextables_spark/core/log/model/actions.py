"""Transaction log actions (docs/reference/table-format.md, "Actions"): one dataclass per kind,
Python snake_case fields, wire JSON camelCase (each kind's to_json / from_json); the form they take
in version files, and why: action_wire.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from indextables_spark.errors import CorruptStateError


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _opt_int(v: Any) -> int | None:
    """A long the reference may have written as null or (Jackson's OptionalLongDeserializer)
    anything non-numeric, read as absent."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def _opt_str(v: Any) -> str | None:
    """A string field the Rust port also accepts as an integer (timeRangeStart/End)."""
    if v is None:
        return None
    return v if isinstance(v, str) else str(v)


def _opt_str_map(v: Any) -> dict[str, str] | None:
    return None if v is None else {str(k): x for k, x in dict(v).items()}


@dataclass(repr=False)  # its repr names the split (the statistics and footer offsets make it long)
class AddFile:
    path: str
    partition_values: dict[str, str | None]  # None: a null partition value
    size: int
    modification_time: int
    data_change: bool = True
    stats: str | None = None
    min_values: dict[str, str] | None = None
    max_values: dict[str, str] | None = None
    num_records: int | None = None
    footer_start_offset: int | None = None
    footer_end_offset: int | None = None
    split_tags: list[str] | None = None
    num_merge_ops: int | None = None
    doc_mapping_ref: str | None = None
    uncompressed_size_bytes: int | None = None
    added_at_version: int | None = None
    added_at_timestamp: int | None = None
    doc_mapping_json: str | None = None  # legacy inline doc mapping (pre-V3); read only
    # Companion splits (indexes over another table's Parquet files): the source files whose rows
    # this split indexes (as the source records them), and the source version it was built from.
    companion_source_files: list[str] | None = None
    companion_source_version: int | None = None
    # Fields of the reference's AddAction (transaction/Actions.scala) this package does not use,
    # kept so that a reference add survives our reads and writes (version files, Avro state).
    companion_fast_field_mode: str | None = None  # "DISABLED" / "HYBRID" / "PARQUET_ONLY"
    hotcache_start_offset: int | None = None
    hotcache_length: int | None = None
    time_range_start: str | None = None  # ISO instant, as tantivy4java's SplitMetadata
    time_range_end: str | None = None
    delete_opstamp: int | None = None
    tags: dict[str, str] | None = None  # Delta-style tags (not splitTags); JSON only

    @property
    def has_footer_offsets(self) -> bool:
        return self.footer_start_offset is not None and self.footer_end_offset is not None

    def __repr__(self) -> str:
        shown = [f"path={self.path!r}", f"partition_values={self.partition_values!r}", f"size={self.size}"]
        for name in ("num_records", "num_merge_ops", "added_at_version"):
            if getattr(self, name) is not None:
                shown.append(f"{name}={getattr(self, name)}")
        if self.companion_source_files:
            shown.append(f"companion_source_files=<{len(self.companion_source_files)} files>")
        return f"AddFile({', '.join(shown)})"

    def to_json(self) -> dict[str, Any]:
        """The add as JSON, every field we hold (also used to ship adds to Spark tasks). Version
        files use `action_to_json(add, version=...)`, the reference-readable subset."""
        d = {
            "path": self.path,
            "partitionValues": dict(self.partition_values or {}),
            "size": int(self.size),
            "modificationTime": int(self.modification_time),
            "dataChange": bool(self.data_change),
            "stats": self.stats,
            "tags": dict(self.tags) if self.tags is not None else None,
            "minValues": self.min_values,
            "maxValues": self.max_values,
            "numRecords": self.num_records,
            "footerStartOffset": self.footer_start_offset,
            "footerEndOffset": self.footer_end_offset,
            "hotcacheStartOffset": self.hotcache_start_offset,
            "hotcacheLength": self.hotcache_length,
            "hasFooterOffsets": self.has_footer_offsets,
            "timeRangeStart": self.time_range_start,
            "timeRangeEnd": self.time_range_end,
            "splitTags": sorted(self.split_tags) if self.split_tags is not None else None,
            "deleteOpstamp": self.delete_opstamp,
            "numMergeOps": self.num_merge_ops,
            "docMappingJson": self.doc_mapping_json,
            "docMappingRef": self.doc_mapping_ref,
            "uncompressedSizeBytes": self.uncompressed_size_bytes,
            "companionSourceFiles": list(self.companion_source_files)
            if self.companion_source_files is not None
            else None,
            "companionDeltaVersion": self.companion_source_version,
            "companionFastFieldMode": self.companion_fast_field_mode,
            "addedAtVersion": self.added_at_version,
            "addedAtTimestamp": self.added_at_timestamp,
        }
        return _drop_none(d)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "AddFile":
        try:
            return cls(
                path=d["path"],
                partition_values=dict(d.get("partitionValues") or {}),
                size=int(d["size"]),
                modification_time=int(d.get("modificationTime") or 0),
                data_change=bool(d.get("dataChange", True)),
                stats=d.get("stats"),
                min_values=_opt_str_map(d.get("minValues")),
                max_values=_opt_str_map(d.get("maxValues")),
                num_records=_opt_int(d.get("numRecords")),
                footer_start_offset=_opt_int(d.get("footerStartOffset")),
                footer_end_offset=_opt_int(d.get("footerEndOffset")),
                split_tags=list(d["splitTags"]) if d.get("splitTags") is not None else None,
                num_merge_ops=_opt_int(d.get("numMergeOps")),
                doc_mapping_ref=d.get("docMappingRef"),
                uncompressed_size_bytes=_opt_int(d.get("uncompressedSizeBytes")),
                added_at_version=_opt_int(d.get("addedAtVersion")),
                added_at_timestamp=_opt_int(d.get("addedAtTimestamp")),
                doc_mapping_json=d.get("docMappingJson"),
                companion_source_files=(
                    list(d["companionSourceFiles"]) if d.get("companionSourceFiles") is not None else None
                ),
                companion_source_version=_opt_int(d.get("companionDeltaVersion")),
                companion_fast_field_mode=d.get("companionFastFieldMode"),
                hotcache_start_offset=_opt_int(d.get("hotcacheStartOffset")),
                hotcache_length=_opt_int(d.get("hotcacheLength")),
                time_range_start=_opt_str(d.get("timeRangeStart")),
                time_range_end=_opt_str(d.get("timeRangeEnd")),
                delete_opstamp=_opt_int(d.get("deleteOpstamp")),
                tags=_opt_str_map(d.get("tags")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptStateError(f"invalid add action {str(d)[:200]}: {e!r}") from None


@dataclass
class RemoveFile:
    path: str
    deletion_timestamp: int | None = None
    data_change: bool = True
    partition_values: dict[str, str | None] | None = None
    size: int | None = None
    extended_file_metadata: bool | None = None  # reference field (Delta's meaning), kept as read
    tags: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "path": self.path,
                "deletionTimestamp": self.deletion_timestamp,
                "dataChange": self.data_change,
                "extendedFileMetadata": self.extended_file_metadata,
                "partitionValues": self.partition_values,
                "size": self.size,
                "tags": self.tags,
            }
        )

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "RemoveFile":
        try:
            pv = d.get("partitionValues")
            efm = d.get("extendedFileMetadata")
            return cls(
                path=d["path"],
                deletion_timestamp=_opt_int(d.get("deletionTimestamp")),
                data_change=bool(d.get("dataChange", True)),
                partition_values=dict(pv) if pv is not None else None,
                size=_opt_int(d.get("size")),
                extended_file_metadata=bool(efm) if efm is not None else None,
                tags=_opt_str_map(d.get("tags")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptStateError(f"invalid remove action {str(d)[:200]}: {e!r}") from None


@dataclass
class Protocol:
    min_reader_version: int
    min_writer_version: int
    reader_features: list[str] | None = None
    writer_features: list[str] | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "minReaderVersion": self.min_reader_version,
                "minWriterVersion": self.min_writer_version,
                "readerFeatures": sorted(self.reader_features) if self.reader_features is not None else None,
                "writerFeatures": sorted(self.writer_features) if self.writer_features is not None else None,
            }
        )

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Protocol":
        try:
            return cls(
                min_reader_version=int(d["minReaderVersion"]),
                min_writer_version=int(d["minWriterVersion"]),
                reader_features=list(d["readerFeatures"]) if d.get("readerFeatures") is not None else None,
                writer_features=list(d["writerFeatures"]) if d.get("writerFeatures") is not None else None,
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptStateError(f"invalid protocol action {str(d)[:200]}: {e!r}") from None


@dataclass
class Metadata:
    id: str
    schema_string: str
    partition_columns: list[str]
    configuration: dict[str, str] = field(default_factory=dict)
    format: dict[str, Any] = field(default_factory=lambda: {"provider": "indextables", "options": {}})
    name: str | None = None
    description: str | None = None
    created_time: int | None = None

    def partition_column_types(self) -> dict[str, str]:
        """{partition column: Spark type name} from the schema ("string" when unknown)."""
        types: dict[str, str] = {}
        try:
            schema = json.loads(self.schema_string)
            for f in schema.get("fields", []):
                t = f.get("type")
                types[f.get("name")] = t if isinstance(t, str) else "struct"
        except (ValueError, AttributeError, TypeError):
            pass
        return {c: types.get(c, "string") for c in self.partition_columns}

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "id": self.id,
                "name": self.name,
                "description": self.description,
                "format": self.format,
                "schemaString": self.schema_string,
                "partitionColumns": list(self.partition_columns),
                "configuration": dict(self.configuration),
                "createdTime": self.created_time,
            }
        )

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Metadata":
        try:
            return cls(
                id=d["id"],
                schema_string=d["schemaString"],
                partition_columns=list(d.get("partitionColumns") or []),
                configuration=dict(d.get("configuration") or {}),
                format=d.get("format") or {"provider": "indextables", "options": {}},
                name=d.get("name"),
                description=d.get("description"),
                created_time=d.get("createdTime"),
            )
        except (KeyError, TypeError) as e:
            raise CorruptStateError(f"invalid metaData action {str(d)[:200]}: {e!r}") from None

    @property
    def schema_json(self) -> dict[str, Any]:
        schema: dict[str, Any] = json.loads(self.schema_string)
        return schema

    @property
    def doc_mappings(self) -> dict[str, str]:
        p = "docMappingSchema."
        return {k[len(p) :]: v for k, v in self.configuration.items() if k.startswith(p)}


@dataclass
class SkipAction:
    path: str
    skip_timestamp: int
    reason: str
    operation: str
    retry_after: int | None = None
    skip_count: int = 1
    partition_values: dict[str, str] | None = None  # reference fields, kept as read
    size: int | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "path": self.path,
                "skipTimestamp": self.skip_timestamp,
                "reason": self.reason,
                "operation": self.operation,
                "partitionValues": self.partition_values,
                "size": self.size,
                "retryAfter": self.retry_after,
                "skipCount": self.skip_count,
            }
        )

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "SkipAction":
        try:
            pv = d.get("partitionValues")
            return cls(
                path=d["path"],
                skip_timestamp=int(d["skipTimestamp"]),
                reason=d.get("reason") or "",
                operation=d.get("operation") or "",
                retry_after=_opt_int(d.get("retryAfter")),
                skip_count=int(d["skipCount"]) if d.get("skipCount") is not None else 1,
                partition_values=dict(pv) if pv is not None else None,
                size=_opt_int(d.get("size")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptStateError(f"invalid mergeskip action {str(d)[:200]}: {e!r}") from None


@dataclass
class CommitInfo:
    """Who/what/when of a version (as in Delta Lake). Used by history() and timestampAsOf."""

    timestamp: int
    operation: str
    operation_parameters: dict[str, Any] = field(default_factory=dict)
    engine_info: str = "indextables_spark"
    txn_id: str | None = None  # e.g. streaming "<queryId>:<batchId>" for idempotent replays

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "timestamp": self.timestamp,
                "operation": self.operation,
                "operationParameters": self.operation_parameters,
                "engineInfo": self.engine_info,
                "txnId": self.txn_id,
            }
        )

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "CommitInfo":
        return cls(
            timestamp=int(d.get("timestamp") or 0),
            operation=str(d.get("operation") or "UNKNOWN"),
            operation_parameters=dict(d.get("operationParameters") or {}),
            engine_info=str(d.get("engineInfo") or ""),
            txn_id=d.get("txnId"),
        )


# Delete log kinds, with their type numbers (docs/reference/table-format.md, "Delete logs").
PRIMARY_KEY, POSITIONAL, EQUALITY = "PRIMARY_KEY", "POSITIONAL", "EQUALITY"
DELETE_LOG_KINDS = {PRIMARY_KEY: 0, POSITIONAL: 1, EQUALITY: 2}


@dataclass
class DeleteLog:
    """A delete log file (`_delete_logs/<uuid>.dlog`, see core/log/deletes/delete_logs.py) marking rows deleted.

    POSITIONAL: row ids of one split (`split_path`). EQUALITY / PRIMARY_KEY: value tuples of
    `columns` (PRIMARY_KEY: the one declared key column). A log applies to the rows of the live
    splits added before it (addedAtVersion < the log's addedAtVersion), so rows written later with
    the same values stay visible."""

    path: str
    kind: str
    num_entries: int
    size: int
    split_path: str | None = None
    columns: list[str] | None = None
    format_version: int = 1
    added_at_version: int | None = None
    added_at_timestamp: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in DELETE_LOG_KINDS:
            raise CorruptStateError(
                f"delete log {self.path}: unknown kind {self.kind!r} (expected one of {sorted(DELETE_LOG_KINDS)})"
            )
        if (self.kind == POSITIONAL) != (self.split_path is not None):
            raise CorruptStateError(
                f"delete log {self.path}: a {self.kind} log "
                f"{'needs' if self.kind == POSITIONAL else 'has no'} splitPath"
            )
        if self.kind != POSITIONAL and not self.columns:
            raise CorruptStateError(f"delete log {self.path}: a {self.kind} log needs its columns")

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "path": self.path,
                "kind": self.kind,
                "numEntries": int(self.num_entries),
                "size": int(self.size),
                "splitPath": self.split_path,
                "columns": list(self.columns) if self.columns is not None else None,
                "formatVersion": int(self.format_version),
                "addedAtVersion": self.added_at_version,
                "addedAtTimestamp": self.added_at_timestamp,
            }
        )

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "DeleteLog":
        try:
            return cls(
                path=d["path"],
                kind=d["kind"],
                num_entries=int(d["numEntries"]),
                size=int(d.get("size") or 0),
                split_path=d.get("splitPath"),
                columns=list(d["columns"]) if d.get("columns") is not None else None,
                format_version=int(d.get("formatVersion", 1)),
                added_at_version=d.get("addedAtVersion"),
                added_at_timestamp=d.get("addedAtTimestamp"),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptStateError(f"invalid deleteLog action {str(d)[:200]}: {e!r}") from None


@dataclass
class StatsFiles:
    """Auxiliary per-split files listed under a key (docs/reference/table-format.md, "Stats files"), e.g.
    "bloomfilter". A file belongs to the split of the same name (`<stem>.split` ↔ `<stem>.<ext>`)
    and lives as long as that split."""

    key: str
    files: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "files": list(self.files)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "StatsFiles":
        try:
            return cls(key=str(d["key"]), files=[str(f) for f in d["files"]])
        except (KeyError, TypeError) as e:
            raise CorruptStateError(f"invalid statsFiles action {str(d)[:200]}: {e!r}") from None


def stats_file_for(split_path: str, ext: str) -> str:
    """The per-split stats file of a split: `a/splits/split-x.split` + "bloom" → `a/splits/split-x.bloom`."""
    stem, dot, split_ext = split_path.rpartition(".")
    if not dot or split_ext != "split":
        raise CorruptStateError(f"split path {split_path!r} does not end in .split; it cannot have stats files")
    return f"{stem}.{ext}"


def split_of_stats_file(path: str) -> str:
    """The split a per-split stats file belongs to: `a/splits/split-x.bloom` → `a/splits/split-x.split`."""
    stem, dot, ext = path.rpartition(".")
    if not dot or not stem or "/" in ext or ext == "split":
        raise CorruptStateError(f"stats file {path!r} is not named after its split (<split stem>.<ext>)")
    return stem + ".split"


Action = AddFile | RemoveFile | Protocol | Metadata | SkipAction | CommitInfo | DeleteLog | StatsFiles
