"""Change feed (docs/reference/table-format.md, "Streaming reads"): files added after a version,
from the state (skipping manifests whose maxAddedAtVersion is not newer) and the version files after
it, plus the remove actions of the version files after that version."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.log.model.actions import AddFile, DeleteLog, RemoveFile
from indextables_spark.core.log.read.base_state import ScanStats
from indextables_spark.core.log.state.file_entries import FILE_ENTRY_SCHEMA, table_to_add_files
from indextables_spark.core.log.read.state_loader import load_base_state
from indextables_spark.errors import VersionNotFoundError

if TYPE_CHECKING:
    from indextables_spark.core.log.read.base_state import ScanStats
    from indextables_spark.core.log.read.table_log import TransactionLog


@dataclass(repr=False)  # its repr is a one-line summary (the adds can be many)
class ChangeSet:
    version: int  # the table version the changes run up to
    since_version: int  # changes strictly after this version
    adds_table: pa.Table  # FileEntry rows, live at `version`, added after since_version
    removes: list[RemoveFile] = field(default_factory=list)
    stats: "ScanStats | None" = None
    delete_logs: list[DeleteLog] = field(default_factory=list)  # row-level deletes committed after since_version

    def __repr__(self) -> str:
        records = self.adds_table.column("numRecords")
        rows = "unknown" if records.null_count else format(int(pc.sum(records).as_py() or 0), ",")
        return (
            f"ChangeSet(since_version={self.since_version}, version={self.version}, "
            f"adds={self.adds_table.num_rows:,}, records_added={rows}, removes={len(self.removes):,}, "
            f"delete_logs={len(self.delete_logs):,})"
        )

    @cached_property
    def adds(self) -> list[AddFile]:
        return table_to_add_files(self.adds_table)

    @property
    def is_empty(self) -> bool:
        return self.adds_table.num_rows == 0 and not self.removes and not self.delete_logs


def changes_since(log_: "TransactionLog", since_version: int, timestamp_ms: int | None = None) -> ChangeSet:
    listing = log_.listing()
    latest = log_.resolve_version(None, listing)
    if since_version >= latest:
        return ChangeSet(latest, since_version, FILE_ENTRY_SCHEMA.empty_table(), [], ScanStats())
    first = max(since_version + 1, 0)
    missing = listing.missing_versions(first, latest)
    if missing:
        raise VersionNotFoundError(
            f"changes of {log_.storage.uri} since version {since_version} are not available: version "
            f"file(s) {missing[:5]}{'...' if len(missing) > 5 else ''} were removed by retention"
        )
    base = load_base_state(log_, latest, listing)
    delta = log_.collect_changes(base, latest)
    stats = ScanStats(source=base.source if base else "log")
    base, delta, files = log_.files_or_fallback(
        base, delta, latest, listing, stats=stats, min_added_version=since_version
    )
    if files.num_rows:
        keep = pc.greater(files.column("addedAtVersion"), since_version)
        if timestamp_ms is not None:
            keep = pc.and_(keep, pc.greater(files.column("addedAtTimestamp"), timestamp_ms))
        files = files.filter(keep)
    removes: list[RemoveFile] = []
    delete_logs: list[DeleteLog] = []
    for v in range(first, latest + 1):
        acts = log_.read_actions(v)
        if timestamp_ms is not None and log_.commit_timestamp(v, acts) <= timestamp_ms:
            continue
        removes.extend(a for a in acts if isinstance(a, RemoveFile))
        delete_logs.extend(a for a in acts if isinstance(a, DeleteLog))
    stats.version_files_read = latest - first + 1
    return ChangeSet(latest, since_version, files, removes, stats, delete_logs)


def changes_since_timestamp(log_: "TransactionLog", timestamp_ms: int) -> ChangeSet:
    """Files added after a point in time (addedAtTimestamp > T) and removes committed after it."""
    versions = log_.list_versions()
    since = -1
    for v in versions:
        if log_.commit_timestamp(v) <= timestamp_ms:
            since = v
        else:
            break
    if versions and since < versions[0] - 1:
        since = versions[0] - 1
    return changes_since(log_, since, timestamp_ms=timestamp_ms)
