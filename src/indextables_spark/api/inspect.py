"""`IndexTable.inspect`: read-only views of a table's log (as pyiceberg's `Table.inspect`)."""

from __future__ import annotations

import pyarrow as pa

from indextables_spark.core.log.actions import AddFile, CommitInfo, Metadata, Protocol, RemoveFile
from indextables_spark.core.log.table_log import TransactionLog
from indextables_spark.api.results import DescribeStateResult, FileRow, HistoryEntry, SkippedFile
from indextables_spark.ops import describe


class InspectTable:
    """History, state, transaction log and skipped files of one table (its live files:
    IndexTable.files, or snapshot().files_table)."""

    def __init__(self, log: TransactionLog):
        self.log = log

    def history(self, *, limit: int | None = None) -> list[HistoryEntry]:
        """One entry per retained version, newest first (the `limit` newest)."""
        versions = list(reversed(self.log.list_versions()))
        return [self._entry(v) for v in (versions if limit is None else versions[:limit])]

    def _entry(self, version: int) -> HistoryEntry:
        actions = self.log.read_actions(version)
        info = next((a for a in actions if isinstance(a, CommitInfo)), None)
        adds = [a for a in actions if isinstance(a, AddFile)]
        removes = [a for a in actions if isinstance(a, RemoveFile)]
        return HistoryEntry(
            version=version,
            timestamp=self.log.commit_timestamp(version, actions),
            operation=info.operation if info else ("CREATE TABLE" if version == 0 else "UNKNOWN"),
            operation_parameters=info.operation_parameters if info else {},
            num_added_files=len(adds),
            num_removed_files=len(removes),
            num_added_records=sum(a.num_records or 0 for a in adds),
            added_bytes=sum(a.size for a in adds),
            metadata_changed=any(isinstance(a, (Metadata, Protocol)) for a in actions),
        )

    def state(self) -> DescribeStateResult:
        """DESCRIBE INDEXTABLES STATE: the checkpoint or Avro state reads start from (format,
        version, counts, tombstones, whether it needs compaction) and the SkipActions in force."""
        return describe.describe_state(self.log)

    def transaction_log(self, *, include_all: bool = False) -> pa.Table:
        """DESCRIBE INDEXTABLES TRANSACTION LOG: one row per action (results.TransactionLogRow)."""
        return describe.describe_transaction_log(self.log, include_all)

    def skipped_files(self) -> list[SkippedFile]:
        """The SkipActions (splits a merge left out, and until when) in force at the latest version."""
        return [SkippedFile.of(s) for s in describe.current_skips(self.log)]


def file_row(f: AddFile) -> FileRow:
    return FileRow(
        path=f.path,
        partition_values=dict(f.partition_values or {}),
        size=f.size,
        num_records=f.num_records,
        modification_time=f.modification_time,
        num_merge_ops=f.num_merge_ops,
        added_at_version=f.added_at_version,
    )
