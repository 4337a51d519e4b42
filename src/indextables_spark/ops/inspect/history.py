"""`indextables history PATH` and `IndexTable.inspect.history()`: one row per retained version, newest
first (no SQL text: the SQL side reads history through DESCRIBE TRANSACTION LOG)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import ClassVar

from indextables_spark.core.log.model.actions import AddFile, CommitInfo, Metadata, Protocol, RemoveFile
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.errors import TableNotFoundError
from indextables_spark.ops.command import Context, Target
from indextables_spark.results.inspect import HistoryEntry


def history(log: TransactionLog, *, limit: int | None = None) -> list[HistoryEntry]:
    """One entry per retained version, newest first (the `limit` newest)."""
    versions = list(reversed(log.list_versions()))
    return [history_entry(log, v) for v in (versions if limit is None else versions[:limit])]


def history_entry(log: TransactionLog, version: int) -> HistoryEntry:
    actions = log.read_actions(version)
    info = next((a for a in actions if isinstance(a, CommitInfo)), None)
    adds = [a for a in actions if isinstance(a, AddFile)]
    removes = [a for a in actions if isinstance(a, RemoveFile)]
    return HistoryEntry(
        version=version,
        timestamp=log.commit_timestamp(version, actions),
        operation=info.operation if info else ("CREATE TABLE" if version == 0 else "UNKNOWN"),
        operation_parameters=info.operation_parameters if info else {},
        num_added_files=len(adds),
        num_removed_files=len(removes),
        num_added_records=sum(a.num_records or 0 for a in adds),
        added_bytes=sum(a.size for a in adds),
        metadata_changed=any(isinstance(a, (Metadata, Protocol)) for a in actions),
    )


@dataclass(frozen=True)
class History:
    result: ClassVar[type[HistoryEntry]] = HistoryEntry
    path: Target
    _: KW_ONLY
    limit: int | None = None

    def run(self, ctx: Context) -> list[HistoryEntry]:
        log = ctx.log(self.path)
        if log.latest_version() < 0:
            raise TableNotFoundError(f"no indextables table at {log.storage.uri}")
        return history(log, limit=self.limit)
