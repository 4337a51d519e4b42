"""Transaction log actions (protocol.md "Actions"); Python snake_case, wire JSON camelCase."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import CorruptStateError


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


@dataclass
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

    @property
    def has_footer_offsets(self) -> bool:
        return self.footer_start_offset is not None and self.footer_end_offset is not None

    def to_json(self) -> dict[str, Any]:
        d = {
            "path": self.path,
            "partitionValues": dict(self.partition_values or {}),
            "size": int(self.size),
            "modificationTime": int(self.modification_time),
            "dataChange": bool(self.data_change),
            "stats": self.stats,
            "minValues": self.min_values,
            "maxValues": self.max_values,
            "numRecords": self.num_records,
            "hasFooterOffsets": self.has_footer_offsets,
            "footerStartOffset": self.footer_start_offset,
            "footerEndOffset": self.footer_end_offset,
            "splitTags": sorted(self.split_tags) if self.split_tags is not None else None,
            "numMergeOps": self.num_merge_ops,
            "docMappingRef": self.doc_mapping_ref,
            "docMappingJson": self.doc_mapping_json,
            "uncompressedSizeBytes": self.uncompressed_size_bytes,
            "addedAtVersion": self.added_at_version,
            "addedAtTimestamp": self.added_at_timestamp,
            "companionSourceFiles": list(self.companion_source_files)
            if self.companion_source_files is not None
            else None,
            "companionDeltaVersion": self.companion_source_version,
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
                min_values=d.get("minValues"),
                max_values=d.get("maxValues"),
                num_records=d.get("numRecords"),
                footer_start_offset=d.get("footerStartOffset"),
                footer_end_offset=d.get("footerEndOffset"),
                split_tags=list(d["splitTags"]) if d.get("splitTags") is not None else None,
                num_merge_ops=d.get("numMergeOps"),
                doc_mapping_ref=d.get("docMappingRef"),
                uncompressed_size_bytes=d.get("uncompressedSizeBytes"),
                added_at_version=d.get("addedAtVersion"),
                added_at_timestamp=d.get("addedAtTimestamp"),
                doc_mapping_json=d.get("docMappingJson"),
                companion_source_files=(
                    list(d["companionSourceFiles"]) if d.get("companionSourceFiles") is not None else None
                ),
                companion_source_version=d.get("companionDeltaVersion"),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptStateError(f"invalid add action {str(d)[:200]}: {e!r}") from None


@dataclass
class RemoveFile:
    path: str
    deletion_timestamp: int | None = None
    data_change: bool = True
    partition_values: dict[str, str] | None = None
    size: int | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "path": self.path,
                "deletionTimestamp": self.deletion_timestamp,
                "dataChange": self.data_change,
                "partitionValues": self.partition_values,
                "size": self.size,
            }
        )

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "RemoveFile":
        try:
            return cls(
                path=d["path"],
                deletion_timestamp=d.get("deletionTimestamp"),
                data_change=bool(d.get("dataChange", True)),
                partition_values=d.get("partitionValues"),
                size=d.get("size"),
            )
        except (KeyError, TypeError) as e:
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

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "path": self.path,
                "skipTimestamp": self.skip_timestamp,
                "reason": self.reason,
                "operation": self.operation,
                "retryAfter": self.retry_after,
                "skipCount": self.skip_count,
            }
        )

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "SkipAction":
        try:
            return cls(
                path=d["path"],
                skip_timestamp=int(d["skipTimestamp"]),
                reason=d.get("reason", ""),
                operation=d.get("operation", ""),
                retry_after=d.get("retryAfter"),
                skip_count=int(d.get("skipCount", 1)),
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


# Delete log kinds, with the spec's type numbers (manifest-extension-plan.md "DeltaLog").
PRIMARY_KEY, POSITIONAL, EQUALITY = "PRIMARY_KEY", "POSITIONAL", "EQUALITY"
DELETE_LOG_KINDS = {PRIMARY_KEY: 0, POSITIONAL: 1, EQUALITY: 2}


@dataclass
class DeleteLog:
    """A delete log file (`_delete_logs/<uuid>.dlog`, see log/delete_logs.py) marking rows deleted.

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
    """Auxiliary per-split files listed under a key (manifest-extension-plan.md "Stats"), e.g.
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

_WIRE_KEY: dict[type[Action], str] = {
    AddFile: "add",
    RemoveFile: "remove",
    Protocol: "protocol",
    Metadata: "metaData",
    SkipAction: "mergeskip",
    CommitInfo: "commitInfo",
    DeleteLog: "deleteLog",
    StatsFiles: "statsFiles",
}
_FROM_WIRE = {v: k for k, v in _WIRE_KEY.items()}


def action_to_json(action: Action) -> dict[str, Any]:
    return {_WIRE_KEY[type(action)]: action.to_json()}


def action_from_json(obj: dict[str, Any], where: str) -> Action | None:
    """Parse one wire action. Unknown action kinds are ignored (forward compatibility)."""
    if not isinstance(obj, dict) or len(obj) != 1:
        raise CorruptStateError(f"{where}: expected an object with one action key, got {str(obj)[:200]}")
    ((key, body),) = obj.items()
    cls = _FROM_WIRE.get(key)
    if cls is None:
        return None
    if not isinstance(body, dict):
        raise CorruptStateError(f"{where}: action {key!r} is not an object")
    return cls.from_json(body)
