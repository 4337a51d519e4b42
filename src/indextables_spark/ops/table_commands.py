"""What commands on one table parse alike: the bases of the commands whose SQL text after the row's
words is `<table>` (TableCommand), `<table> [DRY RUN]` (DryRunCommand) or `<table> [WHERE
<partition predicate>]` (PartitionsCommand), their fields and `parse` declared once (a subclass is a
frozen dataclass too, with its `result` and `run`); and `<table> WHERE <predicate>` (table_and_where)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Self

from indextables_spark.ops.command import CommandParser, Target


@dataclass(frozen=True)
class TableCommand:
    path: Target

    @classmethod
    def parse(cls, p: CommandParser) -> Self:
        return cls(p.target())


@dataclass(frozen=True)
class DryRunCommand(TableCommand):
    _: KW_ONLY
    dry_run: bool = False

    @classmethod
    def parse(cls, p: CommandParser) -> Self:
        return cls(p.target(), dry_run=p.dry_run())


@dataclass(frozen=True)
class PartitionsCommand(TableCommand):
    where: str | None = None  # the partitions (all: None)

    @classmethod
    def parse(cls, p: CommandParser) -> Self:
        path = p.target()
        return cls(path, p.predicate() if p.accept("WHERE") else None)


def table_and_where(p: CommandParser, missing: str) -> tuple[Target, str]:
    """`<table> WHERE <predicate>`, the WHERE required: without it, an error saying `missing` and
    naming the token found instead."""
    path = p.target()
    t = p.peek()
    if not t.is_word("WHERE"):
        raise p.error(f"{missing}, found {t.describe()}", t)
    p.next()
    return path, p.predicate()
