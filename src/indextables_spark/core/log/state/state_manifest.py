"""The state manifest (`state-v<20 digits>/_manifest.avro`, or `_manifest.json`) and
`_last_checkpoint`: models, encoding, decoding, validation.

Readers check the container magic / JSON shape, `formatVersion` and `protocolVersion` before
trusting anything else, and every error names the file.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass, field
from typing import Any

from indextables_spark.core.log.state.avro_container import (
    STATE_MANIFEST_AVRO_SCHEMA,
    avro_codec_name,
    read_header,
    read_records,
)
from indextables_spark.core.log.model.codec import decode_text
from indextables_spark.core.log.model.paths import LOG_DIR, state_dir_name
from indextables_spark.core.log.model.protocol_gate import MAX_READER_VERSION
from indextables_spark.core.storage.base import check_key
from indextables_spark.errors import CorruptStateError, PathEscapeError, ProtocolVersionError

STATE_FORMAT_VERSION = 1
STATE_MANIFEST_AVRO = "_manifest.avro"
STATE_MANIFEST_JSON = "_manifest.json"
SHARED_MANIFEST_PREFIX = "manifests/"

FORMAT_JSON = "json"
FORMAT_JSON_MULTIPART = "json-multipart"
FORMAT_AVRO_STATE = "avro-state"


@dataclass
class ManifestInfo:
    """One FileEntry manifest referenced by a state."""

    path: str  # as recorded (relative to the log root, or legacy forms)
    num_entries: int
    min_added_at_version: int
    max_added_at_version: int
    partition_bounds: dict[str, tuple[str | None, str | None]] | None = None
    tombstone_count: int = 0
    live_entry_count: int = -1

    def to_record(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "numEntries": int(self.num_entries),
            "minAddedAtVersion": int(self.min_added_at_version),
            "maxAddedAtVersion": int(self.max_added_at_version),
            "partitionBounds": None
            if self.partition_bounds is None
            else {k: {"min": v[0], "max": v[1]} for k, v in self.partition_bounds.items()},
            "tombstoneCount": int(self.tombstone_count),
            "liveEntryCount": int(self.live_entry_count),
        }

    @classmethod
    def from_record(cls, r: dict[str, Any], where: str) -> "ManifestInfo":
        try:
            pb = r.get("partitionBounds")
            path = str(r["path"])
            check_key(path)  # a damaged path must not be read as some other file
            return cls(
                path=path,
                num_entries=int(r["numEntries"]),
                min_added_at_version=int(r["minAddedAtVersion"]),
                max_added_at_version=int(r["maxAddedAtVersion"]),
                partition_bounds=None
                if pb is None
                else {str(k): ((v or {}).get("min"), (v or {}).get("max")) for k, v in pb.items()},
                tombstone_count=int(r.get("tombstoneCount", 0) or 0),
                live_entry_count=int(r.get("liveEntryCount", -1) if r.get("liveEntryCount") is not None else -1),
            )
        except (KeyError, TypeError, ValueError, AttributeError, PathEscapeError) as e:
            raise CorruptStateError(f"{where}: invalid manifest entry {str(r)[:200]}: {e!r}") from None


@dataclass
class StateManifest:
    state_version: int
    created_at: int
    num_files: int
    total_bytes: int
    manifests: list[ManifestInfo] = field(default_factory=list)
    tombstones: list[str] = field(default_factory=list)
    schema_registry: dict[str, str] = field(default_factory=dict)
    protocol_version: int = 4
    metadata: str | None = None  # JSON-encoded metaData action
    protocol: str | None = None  # JSON-encoded protocol action (our addition)
    skip_actions: list[str] = field(default_factory=list)  # JSON-encoded mergeskip actions (ours)
    distinct_prefix_manifests: int = 0  # leading manifests from one compaction (ours)
    delete_logs: list[str] = field(default_factory=list)  # JSON-encoded deleteLog actions (ours)
    stats_files: dict[str, list[str]] = field(default_factory=dict)  # stats key -> files (ours)
    format_version: int = STATE_FORMAT_VERSION

    def to_record(self) -> dict[str, Any]:
        return {
            "formatVersion": int(self.format_version),
            "stateVersion": int(self.state_version),
            "createdAt": int(self.created_at),
            "numFiles": int(self.num_files),
            "totalBytes": int(self.total_bytes),
            "manifests": [m.to_record() for m in self.manifests],
            "tombstones": list(self.tombstones),
            "schemaRegistry": dict(self.schema_registry),
            "protocolVersion": int(self.protocol_version),
            "metadata": self.metadata,
            "protocol": self.protocol,
            "skipActions": list(self.skip_actions),
            "distinctPrefixManifests": int(self.distinct_prefix_manifests),
            "deleteLogs": list(self.delete_logs),
            "statsFiles": {k: list(v) for k, v in self.stats_files.items()},
        }

    @classmethod
    def from_record(cls, r: object, where: str) -> "StateManifest":
        """From a decoded record (any value: anything but a valid record raises CorruptStateError)."""
        if not isinstance(r, dict):
            raise CorruptStateError(f"{where}: state manifest is not a record/object")
        try:
            fv = int(r["formatVersion"])
        except (KeyError, TypeError, ValueError):
            raise CorruptStateError(f"{where}: state manifest has no valid formatVersion") from None
        if fv > STATE_FORMAT_VERSION or fv < 1:
            raise CorruptStateError(
                f"{where}: unsupported state formatVersion {fv} (this indextables_spark reads format "
                f"version {STATE_FORMAT_VERSION})"
            )
        pv = r.get("protocolVersion", 4)

        if pv is not None and int(pv) > MAX_READER_VERSION:
            raise ProtocolVersionError(
                f"{where}: state requires protocol version {pv}; this indextables_spark reads up to "
                f"version {MAX_READER_VERSION}"
            )
        try:
            return cls(
                format_version=fv,
                state_version=int(r["stateVersion"]),
                created_at=int(r.get("createdAt") or 0),
                num_files=int(r["numFiles"]),
                total_bytes=int(r.get("totalBytes") or 0),
                manifests=[ManifestInfo.from_record(m, where) for m in (r.get("manifests") or [])],
                tombstones=[str(t) for t in (r.get("tombstones") or [])],
                schema_registry={str(k): str(v) for k, v in (r.get("schemaRegistry") or {}).items()},
                protocol_version=int(pv if pv is not None else 4),
                metadata=r.get("metadata"),
                protocol=r.get("protocol"),
                skip_actions=[str(s) for s in (r.get("skipActions") or [])],
                distinct_prefix_manifests=int(r.get("distinctPrefixManifests") or 0),
                delete_logs=[str(d) for d in (r.get("deleteLogs") or [])],
                stats_files={str(k): [str(f) for f in v] for k, v in (r.get("statsFiles") or {}).items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CorruptStateError(f"{where}: invalid state manifest: {e!r}") from None

    @property
    def num_tombstones(self) -> int:
        return len(self.tombstones)

    @property
    def num_entries(self) -> int:
        return sum(m.num_entries for m in self.manifests)


def encode_state_manifest(sm: StateManifest, codec: str = "zstd", level: int = 3) -> bytes:
    """The record encoded by fastavro, framed by our container writer: its zstd blocks carry a
    content checksum (avro_container._compress), so a flipped bit in the state manifest fails the read
    (then the reader falls back) instead of decoding to another valid state."""
    import fastavro  # lazy: keeps `import indextables_spark.core.log.state.state_manifest` free of fastavro
    import pyarrow as pa  # lazy: keeps `import indextables_spark.core.log.state.state_manifest` free of pyarrow

    from indextables_spark.core.log.state.avro_codec import (
        write_container,  # lazy: keeps `import indextables_spark.core.log.state.state_manifest` free of numpy, pyarrow
    )

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _parsed_state_schema(), sm.to_record())
    rows = pa.array([buf.getvalue()], pa.large_binary())
    data, _blocks = write_container(rows, STATE_MANIFEST_AVRO_SCHEMA, avro_codec_name(codec), level)
    return data


_PARSED: dict[str, Any] = {}


def _parsed_state_schema() -> Any:
    if "s" not in _PARSED:
        import fastavro  # lazy: keeps `import indextables_spark.core.log.state.state_manifest` free of fastavro

        _PARSED["s"] = fastavro.parse_schema(STATE_MANIFEST_AVRO_SCHEMA)
    return _PARSED["s"]


def decode_state_manifest(data: bytes, where: str) -> StateManifest:
    if where.endswith(".json") or data[:1] in (b"{", b" ", b"\n", b"\x1f"):
        try:
            obj = json.loads(decode_text(data, where))
        except json.JSONDecodeError as e:
            raise CorruptStateError(f"{where}: state manifest is not valid JSON ({e.msg} at line {e.lineno})") from None
        return StateManifest.from_record(obj, where)
    header = read_header(data, where)
    name = header.schema.get("name") if isinstance(header.schema, dict) else None
    ns = header.schema.get("namespace") if isinstance(header.schema, dict) else None
    full = name if name and "." in name else f"{ns}.{name}" if ns else name
    if full not in ("io.indextables.state.StateManifest", "StateManifest"):
        raise CorruptStateError(f"{where}: Avro file holds {full!r} records, not io.indextables.state.StateManifest")
    try:
        # our reader for the plain schemas the state manifests have (fastavro's import costs a
        # tenth of a fresh process's first snapshot); fastavro for anything else
        records = read_records(data, header, where)
        if records is None:
            import fastavro  # lazy: see above

            records = list(fastavro.reader(io.BytesIO(data)))
    except Exception as e:  # noqa: BLE001 - fastavro raises many types for bad input
        raise CorruptStateError(f"{where}: corrupt or truncated state manifest ({type(e).__name__}: {e})") from None
    if len(records) != 1:
        raise CorruptStateError(f"{where}: expected one StateManifest record, found {len(records)}")
    return StateManifest.from_record(records[0], where)


def state_manifest_key(version: int, json_format: bool = False) -> str:
    return f"{LOG_DIR}/{state_dir_name(version)}/{STATE_MANIFEST_JSON if json_format else STATE_MANIFEST_AVRO}"


def resolve_manifest_key(path: str, state_version: int) -> str:
    """Storage key of a manifest recorded in a state (docs/reference/table-format.md, "Manifest
    path formats")."""
    if path.startswith(SHARED_MANIFEST_PREFIX) or path.startswith("state-v"):
        return f"{LOG_DIR}/{path}"
    return f"{LOG_DIR}/{state_dir_name(state_version)}/{path}"


def normalize_manifest_path(path: str, state_version: int) -> str:
    """Legacy `manifest-x.avro` (relative to its state dir) → `state-vN/manifest-x.avro`."""
    if path.startswith(SHARED_MANIFEST_PREFIX) or path.startswith("state-v"):
        return path
    return f"{state_dir_name(state_version)}/{path}"


# ---- _last_checkpoint ----------------------------------------------------------------------------


@dataclass
class LastCheckpoint:
    version: int
    size: int = 0
    size_in_bytes: int = 0
    num_files: int = 0
    created_time: int = 0
    parts: int | None = None
    checkpoint_id: str | None = None
    format: str | None = None
    state_dir: str | None = None
    protocol_version: int | None = None

    @property
    def effective_format(self) -> str:
        """docs/reference/table-format.md, "_last_checkpoint": no format → json,
        checkpointId → json-multipart, format avro-state → the state directory."""
        if self.format:
            return self.format
        if self.checkpoint_id:
            return FORMAT_JSON_MULTIPART
        return FORMAT_JSON

    def to_json(self) -> dict[str, Any]:
        d = {
            "version": self.version,
            "size": self.size,
            "sizeInBytes": self.size_in_bytes,
            "numFiles": self.num_files,
            "createdTime": self.created_time or int(time.time() * 1000),
            "parts": self.parts,
            "checkpointId": self.checkpoint_id,
            "format": self.format,
            "stateDir": self.state_dir,
            "protocolVersion": self.protocol_version,
        }
        return {k: v for k, v in d.items() if v is not None}

    @classmethod
    def parse(cls, data: bytes, where: str) -> "LastCheckpoint":
        try:
            obj = json.loads(decode_text(data, where))
        except json.JSONDecodeError as e:
            raise CorruptStateError(f"{where}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
        if not isinstance(obj, dict) or "version" not in obj:
            raise CorruptStateError(f"{where}: expected a JSON object with a 'version' field")
        try:
            lc = cls(
                version=int(obj["version"]),
                size=int(obj.get("size") or 0),
                size_in_bytes=int(obj.get("sizeInBytes") or 0),
                num_files=int(obj.get("numFiles") or 0),
                created_time=int(obj.get("createdTime") or 0),
                parts=int(obj["parts"]) if obj.get("parts") is not None else None,
                checkpoint_id=obj.get("checkpointId"),
                format=obj.get("format"),
                state_dir=obj.get("stateDir"),
                protocol_version=int(obj["protocolVersion"]) if obj.get("protocolVersion") is not None else None,
            )
        except (TypeError, ValueError) as e:
            raise CorruptStateError(f"{where}: invalid field value ({e})") from None
        if lc.effective_format not in (FORMAT_JSON, FORMAT_JSON_MULTIPART, FORMAT_AVRO_STATE):
            raise CorruptStateError(f"{where}: unknown checkpoint format {lc.format!r}")
        if lc.effective_format == FORMAT_AVRO_STATE and not lc.state_dir:
            lc.state_dir = state_dir_name(lc.version)
        if lc.protocol_version is not None:
            if lc.protocol_version > MAX_READER_VERSION:
                raise ProtocolVersionError(
                    f"{where}: checkpoint requires protocol version {lc.protocol_version}; this "
                    f"indextables_spark reads up to version {MAX_READER_VERSION}"
                )
        return lc

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()
