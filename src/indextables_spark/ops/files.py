"""`indextables files PATH [--where P] [--version V]`: the live splits (no SQL text: the SQL side
has IndexTable.inspect.files and the `files` of a snapshot)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import ClassVar

from indextables_spark.api.results import FileRow
from indextables_spark.ops.registry import Context, Listing, Target


@dataclass(frozen=True)
class Files:
    result: ClassVar[type[FileRow]] = FileRow
    path: Target
    _: KW_ONLY
    where: str | None = None
    version: int | None = None

    def run(self, ctx: Context) -> Listing:
        from indextables_spark.api.inspect import file_row
        from indextables_spark.api.table import IndexTable  # lazy: ops import no table code at import

        t = IndexTable(ctx.path(self.path), ctx.options)
        files = t.files(self.where, version=self.version) if self.where else t.snapshot(self.version).files
        # --json: the log's own form of each split
        return Listing([file_row(f) for f in files], [f.to_json() for f in files])
