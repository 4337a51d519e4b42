"""`indextables files PATH [--where P] [--version V]`: the live splits (no SQL text: Python has
IndexTable.files and the `files_table` of a snapshot)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import ClassVar

from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.ops.command import Context, Listing, Target
from indextables_spark.results.inspect import FileRow


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


@dataclass(frozen=True)
class Files:
    result: ClassVar[type[FileRow]] = FileRow
    path: Target
    _: KW_ONLY
    where: str | None = None
    version: int | None = None

    def run(self, ctx: Context) -> Listing:
        log = ctx.log(self.path)
        files = log.pruned_snapshot(self.where, self.version).files if self.where else log.snapshot(self.version).files
        # --json: the log's own form of each split
        return Listing([file_row(f) for f in files], [f.to_json() for f in files])
