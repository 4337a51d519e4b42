"""Legacy JSON checkpoints (docs/reference/table-format.md, "JSON checkpoints (legacy)"): read
single-file and multi-part ones; write single-file ones (only when
`spark.indextables.state.format=json`).

Single file: `<v>.checkpoint.json`, newline-delimited actions (GZIP or not, detected by header).
Multi-part: parts `<v>.checkpoint.<id>.<part>.json`, listed by a manifest written last at
`<v>.checkpoint.json` ({"version", "checkpointId", "parts": [file names], "createdTime", "format"}).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from indextables_spark.core.log.model.actions import (
    Action,
    AddFile,
    DeleteLog,
    Metadata,
    Protocol,
    RemoveFile,
    SkipAction,
    StatsFiles,
)
from indextables_spark.core.log.read.base_state import BaseState
from indextables_spark.core.log.model.codec import decode_actions, decode_text
from indextables_spark.core.log.model.paths import LOG_DIR
from indextables_spark.core.log.model.protocol_gate import check_readable
from indextables_spark.core.log.state.state_manifest import FORMAT_JSON, LastCheckpoint
from indextables_spark.errors import CorruptStateError, FileNotFoundInStorageError

if TYPE_CHECKING:
    from indextables_spark.core.log.read.base_state import LogReader
    from indextables_spark.core.log.read.listing import LogListing

log = logging.getLogger(__name__)


def checkpoint_key(version: int) -> str:
    return f"{LOG_DIR}/{version:020d}.checkpoint.json"


def part_key(version: int, checkpoint_id: str, part: int) -> str:
    return f"{LOG_DIR}/{version:020d}.checkpoint.{checkpoint_id}.{part:05d}.json"


def _multipart_manifest(data: bytes, where: str) -> dict[str, Any] | None:
    """The multi-part manifest object if `data` is one, else None (an action file)."""
    text = decode_text(data, where).strip()
    if not text.startswith("{") or "\n" in text:
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return None
    if isinstance(obj, dict) and "parts" in obj and "checkpointId" in obj:
        return obj
    return None


def read_checkpoint_actions(
    log_: "LogReader", version: int, lc: LastCheckpoint | None, listing: "LogListing"
) -> tuple[list[Action], str]:
    """All actions of the JSON checkpoint at `version`, and its format name."""
    storage = log_.storage
    key = checkpoint_key(version)
    part_keys: list[str] | None = None
    fmt = FORMAT_JSON
    data = None
    try:
        data = storage.read(key)
    except FileNotFoundInStorageError:
        if not (lc and lc.version == version and lc.checkpoint_id):
            raise CorruptStateError(f"checkpoint {storage.full_uri(key)} is missing") from None
    if data is not None:
        man = _multipart_manifest(data, storage.full_uri(key))
        if man is not None:
            names = man.get("parts")
            if not isinstance(names, list) or not names:
                raise CorruptStateError(f"{storage.full_uri(key)}: multi-part checkpoint manifest lists no parts")
            part_keys = [f"{LOG_DIR}/{n}" for n in names]
            fmt = "json-multipart"
    if data is None:
        # _last_checkpoint names a multi-part checkpoint whose manifest is gone: use its parts.
        assert lc is not None and lc.checkpoint_id is not None  # the except branch above checked both
        part_keys = [part_key(version, lc.checkpoint_id, p) for p in range(1, (lc.parts or 0) + 1)]
        if not lc.parts:
            part_keys = [k for k in listing.checkpoint_parts.get(version, []) if f".{lc.checkpoint_id}." in k]
        if not part_keys:
            raise CorruptStateError(f"multi-part checkpoint {lc.checkpoint_id} of version {version}: no parts found")
        fmt = "json-multipart"
    if part_keys is None:
        assert data is not None  # part_keys is set (or we raised) whenever data is None
        single = decode_actions(data, storage.full_uri(key))
        if not single:
            raise CorruptStateError(f"checkpoint {storage.full_uri(key)} of version {version} is empty")
        return single, fmt
    actions: list[Action] = []
    for pk in part_keys:
        try:
            pdata = storage.read(pk)
        except FileNotFoundInStorageError:
            raise CorruptStateError(f"checkpoint part {storage.full_uri(pk)} of version {version} is missing") from None
        part_actions = decode_actions(pdata, storage.full_uri(pk))
        if not part_actions:
            # A writer never writes an empty part: reading it as "no files" would drop files.
            raise CorruptStateError(f"checkpoint part {storage.full_uri(pk)} of version {version} is empty")
        actions.extend(part_actions)
    return actions, fmt


def load_json_checkpoint(
    log_: "LogReader", version: int, lc: LastCheckpoint | None, listing: "LogListing"
) -> "BaseState":
    actions, fmt = read_checkpoint_actions(log_, version, lc, listing)
    protocol = metadata = None
    adds: dict[str, AddFile] = {}
    skips: dict[str, SkipAction] = {}
    registry: dict[str, str] = {}
    delete_logs: list[DeleteLog] = []
    stats: dict[str, list[str]] = {}
    for a in actions:
        if isinstance(a, AddFile):
            if a.doc_mapping_json and not a.doc_mapping_ref:
                from indextables_spark.core.log.model.doc_mapping import (
                    doc_mapping_hash,
                )  # lazy: hashlib, not needed by an Avro state read

                ref = doc_mapping_hash(a.doc_mapping_json)
                registry.setdefault(ref, a.doc_mapping_json)
                a.doc_mapping_ref = ref
            if a.added_at_version is None:
                a.added_at_version = -1  # unknown: added at or before the checkpoint
            adds[a.path] = a
        elif isinstance(a, RemoveFile):
            adds.pop(a.path, None)
        elif isinstance(a, Protocol):
            protocol = a
        elif isinstance(a, Metadata):
            metadata = a
            registry.update(a.doc_mappings)
        elif isinstance(a, SkipAction):
            skips[a.path] = a
        elif isinstance(a, DeleteLog):
            delete_logs.append(a)
        elif isinstance(a, StatsFiles):
            stats.setdefault(a.key, []).extend(a.files)
    where = log_.storage.full_uri(checkpoint_key(version))
    if protocol is None or metadata is None:
        raise CorruptStateError(f"{where}: checkpoint has no {'protocol' if protocol is None else 'metaData'} action")

    check_readable(protocol, where)
    from indextables_spark.core.log.state.file_entries import (
        add_files_to_table,
    )  # lazy: keeps `import indextables_spark.api.table` free of pyarrow

    return BaseState(
        version=version,
        protocol=protocol,
        metadata=metadata,
        files_table=add_files_to_table(adds.values()),
        skips=skips,
        schema_registry=registry,
        source=fmt,
        delete_logs=delete_logs,
        stats_files=stats,
    )
