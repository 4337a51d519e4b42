"""What planning one SQL statement for the index produces (StatementPlan: scans, search conditions,
an AggregatePlan) and what it asks of the tables (Catalog, TableInfo)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from sqlglot import exp

from indextables_spark.core.schema.types import ColumnSpec
from indextables_spark.core.split.aggregate.group_aggregate import GroupRequest
from indextables_spark.expr import model as P
from indextables_spark.expr import operators as ops

PATH_DATABASE = "indextables"  # `indextables.`/path``
VIRTUAL = ("_indexall", "_indexguard")


@dataclass(frozen=True)
class Source:
    """A table the statement reads: its path and the read options of the view (if any)."""

    path: str
    options: tuple[tuple[str, str], ...] = ()

    @property
    def option_dict(self) -> dict[str, str]:
        return dict(self.options)


@dataclass(frozen=True)
class TableInfo:
    names: list[str]  # columns as the scan shows them (data + partition + visible virtual ones)
    types: dict[str, str]  # Spark type names of data and partition columns
    partition_columns: list[str]
    specs: list[ColumnSpec]


class Catalog(Protocol):
    def view(self, name: str) -> Source | None: ...

    def info(self, source: Source) -> TableInfo: ...

    def other_columns(self, parts: tuple[str, ...]) -> list[str] | None: ...

    def check_query(self, source: Source, query: str) -> None: ...


@dataclass
class Scan:
    view: str  # the temporary view name the text refers to
    source: Source
    columns: list[str] | None  # None: every column
    written: str  # the reference as written (messages)
    query: str | None = None  # the search conditions that filter this table's rows (read option)
    keeps_indexall: bool = True  # the statement refers to `_indexall` (else the scan hides it from `*`)


@dataclass
class AggregatePlan:
    scan: Scan
    request: GroupRequest
    outputs: list[int]  # per output column: its index in the (keys..., aggs...) row
    search: ops.Search | None
    conjuncts: list[P.Filter]
    order: list[tuple[int, bool, bool]]  # (output index, descending, nulls first)
    limit: int | None


@dataclass
class StatementPlan:
    text: str
    scans: list[Scan]
    searches: list[str] = field(default_factory=list)  # described conditions, per table
    aggregate: AggregatePlan | None = None
    notes: list[str] = field(default_factory=list)  # why a route was not taken


@dataclass
class Ref:
    node: exp.Table
    source: Source
    written: str
    alias: str | None
    is_path: bool
    start: int
    end: int  # inclusive

    @property
    def qualifier(self) -> str:
        """How the statement names this table's columns (`d.x`); '' for an unaliased path."""
        if self.alias:
            return self.alias
        return "" if self.is_path else self.written
