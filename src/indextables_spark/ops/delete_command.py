"""DELETE FROM INDEXTABLES <table> WHERE <predicate over any columns>: the command of ops/delete.py
(kept apart from it while that module is reworked; fold it in there)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from indextables_spark.results import DeleteResult
from indextables_spark.ops.registry import CommandParser, Context, Target


@dataclass(frozen=True)
class Delete:
    result: ClassVar[type[DeleteResult]] = DeleteResult
    path: Target
    where: str

    @classmethod
    def parse(cls, p: CommandParser) -> Delete:
        path = p.target()
        t = p.peek()
        if not t.is_word("WHERE"):
            raise p.error(f"DELETE FROM INDEXTABLES needs a WHERE clause, found {t.describe()}", t)
        p.next()
        return cls(path, p.predicate())

    def run(self, ctx: Context) -> DeleteResult:
        from indextables_spark.ops import delete  # lazy: `it.sql` parses a DELETE without loading the delete path

        return delete.delete(ctx.log(self.path), self.where)
