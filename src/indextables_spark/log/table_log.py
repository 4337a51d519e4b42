"""The transaction log of one table: version files, snapshots, time travel.

Snapshots start from the newest usable checkpoint/state at or below the wanted version (see
`state_loader`) and replay the version files after it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptStateError, FileNotFoundInStorageError, TableNotFoundError, VersionNotFoundError
from ..options import Options
from ..storage import Storage
from .actions import Action, AddFile, CommitInfo, Metadata, Protocol, RemoveFile, SkipAction
from .codec import decode_actions, encode_actions
from .file_entries import FILE_ENTRY_SCHEMA, add_files_to_table
from .paths import LOG_DIR, parse_version_name, version_key
from .protocol_gate import check_readable
from .snapshot import Snapshot

log = logging.getLogger(__name__)


@dataclass
class BaseState:
    """The table at some version as read from a checkpoint or Avro state."""

    version: int
    protocol: Protocol | None
    metadata: Metadata | None
    files_table: pa.Table
    skips: dict[str, SkipAction] = field(default_factory=dict)
    schema_registry: dict[str, str] = field(default_factory=dict)
    source: str = "checkpoint"


class TransactionLog:
    def __init__(self, storage: Storage, options: Options | None = None):
        self.storage = storage
        self.options = options or Options()

    # ---- version files -------------------------------------------------------------------
    def list_versions(self) -> list[int]:
        out = []
        for info in self.storage.list(f"{LOG_DIR}/"):
            rest = info.key[len(LOG_DIR) + 1:]
            if "/" in rest:
                continue
            v = parse_version_name(rest)
            if v is not None:
                out.append(v)
        out.sort()
        return out

    def latest_version(self) -> int:
        versions = self.list_versions()
        if versions:
            return versions[-1]
        from .state_loader import latest_checkpoint_version

        cp = latest_checkpoint_version(self)
        return cp if cp is not None else -1

    def exists(self) -> bool:
        return self.latest_version() >= 0

    def read_actions(self, version: int) -> list[Action]:
        key = version_key(version)
        try:
            data = self.storage.read(key)
        except FileNotFoundInStorageError:
            raise VersionNotFoundError(
                f"version {version} of {self.storage.uri} is not available ({self.storage.full_uri(key)} is missing)"
            ) from None
        return decode_actions(data, self.storage.full_uri(key))

    def write_version(self, version: int, actions: Iterable[Action]) -> bool:
        """Write a version file if no file exists for that version. False on conflict."""
        compress = self.options.get_bool("transaction.compression.enabled", True)
        return self.storage.put_if_absent(version_key(version), encode_actions(actions, compress))

    def commit_timestamp(self, version: int, actions: list[Action] | None = None) -> int:
        acts = actions if actions is not None else self.read_actions(version)
        for a in acts:
            if isinstance(a, CommitInfo) and a.timestamp:
                return a.timestamp
        info = self.storage.stat(version_key(version))
        return info.modified_ms if info else 0

    # ---- snapshots -------------------------------------------------------------------------
    def snapshot(self, version: int | None = None) -> Snapshot:
        from .state_loader import load_base_state

        latest = self.latest_version()
        if latest < 0:
            raise TableNotFoundError(f"no indextables table at {self.storage.uri} (no {LOG_DIR}/ versions)")
        if version is None:
            version = latest
        if version < 0 or version > latest:
            raise VersionNotFoundError(
                f"version {version} of {self.storage.uri} does not exist (latest is {latest})"
            )
        base = load_base_state(self, version)
        start = base.version + 1 if base else 0
        return self._replay(base, start, version)

    def _replay(self, base: BaseState | None, start: int, version: int) -> Snapshot:
        protocol = base.protocol if base else None
        metadata = base.metadata if base else None
        skips = dict(base.skips) if base else {}
        registry = dict(base.schema_registry) if base else {}
        added: dict[str, AddFile] = {}
        removed: set[str] = set()
        timestamp = 0
        for v in range(start, version + 1):
            try:
                actions = self.read_actions(v)
            except VersionNotFoundError:
                raise VersionNotFoundError(
                    f"version {version} of {self.storage.uri} cannot be reconstructed: version file {v} "
                    f"is missing and no checkpoint covers it (it may have been removed by retention)"
                ) from None
            timestamp = self.commit_timestamp(v, actions)
            for a in actions:
                if isinstance(a, AddFile):
                    if a.added_at_version is None:
                        a.added_at_version = v
                    if a.added_at_timestamp is None:
                        a.added_at_timestamp = timestamp
                    added[a.path] = a
                    removed.discard(a.path)
                    skips.pop(a.path, None)
                elif isinstance(a, RemoveFile):
                    added.pop(a.path, None)
                    removed.add(a.path)
                    skips.pop(a.path, None)
                elif isinstance(a, Metadata):
                    metadata = a
                    registry.update(a.doc_mappings)
                elif isinstance(a, Protocol):
                    protocol = a
                elif isinstance(a, SkipAction):
                    skips[a.path] = a
        if start > version and base is not None:
            timestamp = self._timestamp_of_base(base)
        if protocol is None or metadata is None:
            raise CorruptStateError(
                f"table {self.storage.uri} at version {version} has no "
                f"{'protocol' if protocol is None else 'metaData'} action"
            )
        check_readable(protocol, f"table {self.storage.uri}")
        files = base.files_table if base else FILE_ENTRY_SCHEMA.empty_table()
        drop = removed | set(added)
        if drop and files.num_rows:
            keep = pc.invert(pc.is_in(files.column("path"), value_set=pa.array(list(drop), pa.string())))
            files = files.filter(keep)
        if added:
            files = pa.concat_tables([files, add_files_to_table(added.values())]) if files.num_rows else add_files_to_table(added.values())
        return Snapshot(
            version=version,
            protocol_action=protocol,
            metadata_action=metadata,
            files_table=files,
            skips=skips,
            timestamp=timestamp,
            schema_registry=registry,
            source=base.source if base else "log",
        )

    def _timestamp_of_base(self, base: BaseState) -> int:
        try:
            return self.commit_timestamp(base.version)
        except VersionNotFoundError:
            return 0

    # ---- time travel -----------------------------------------------------------------------
    def version_at_timestamp(self, timestamp_ms: int) -> int:
        """The newest version committed at or before timestamp_ms."""
        versions = self.list_versions()
        best = None
        for v in versions:
            ts = self.commit_timestamp(v)
            if ts <= timestamp_ms:
                best = v
            else:
                break
        if best is None:
            when = datetime.fromtimestamp(timestamp_ms / 1000, tz=timezone.utc).isoformat()
            first = versions[0] if versions else None
            raise VersionNotFoundError(
                f"no version of {self.storage.uri} was committed at or before {when}"
                + (f" (the oldest retained version is {first})" if first is not None else "")
            )
        return best


def parse_timestamp(value: str | int | float) -> int:
    """Epoch ms from a number (ms) or an ISO-8601 text (UTC when no zone is given)."""
    if isinstance(value, (int, float)):
        return int(value)
    s = str(value).strip()
    if s.isdigit():
        return int(s)
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        from ..errors import InvalidOptionError

        raise InvalidOptionError(f"option 'timestampAsOf': cannot parse {value!r} as a timestamp") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)
