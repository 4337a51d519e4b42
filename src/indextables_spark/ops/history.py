"""`indextables history PATH`: one row per retained version, newest first (no SQL text: the SQL
side reads history through DESCRIBE TRANSACTION LOG and IndexTable.inspect)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import ClassVar

from indextables_spark.api.results import HistoryEntry
from indextables_spark.errors import TableNotFoundError
from indextables_spark.ops.registry import Context, Target


@dataclass(frozen=True)
class History:
    result: ClassVar[type[HistoryEntry]] = HistoryEntry
    path: Target
    _: KW_ONLY
    limit: int | None = None

    def run(self, ctx: Context) -> list[HistoryEntry]:
        from indextables_spark.api.table import IndexTable  # lazy: ops import no table code at import

        t = IndexTable(ctx.path(self.path), ctx.options)
        if not t.exists():
            raise TableNotFoundError(f"no indextables table at {t.storage.uri}")
        return t.inspect.history(limit=self.limit)
