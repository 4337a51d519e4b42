"""The filter model: one expression tree for predicates over columns.

Frozen dataclasses mirroring Spark's pushed-down filters (pyspark.sql.datasource). Built from
Spark's filters (spark/filters.py), from predicate text (log/partition_filter.py: partition
filters, DROP PARTITIONS, MERGE SPLITS WHERE, DELETE) and by hand; evaluated by split/filters.py
(exact Arrow evaluation, Tantivy narrowing, split skipping, partition pruning) and by
log/partition_filter.py (files-table filtering, manifest pruning). No dependencies, so that the
transaction log can use it without the split machinery.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union


@dataclass(frozen=True)
class EqualTo:
    column: str
    value: Any


@dataclass(frozen=True)
class EqualNullSafe:
    column: str
    value: Any


@dataclass(frozen=True)
class GreaterThan:
    column: str
    value: Any


@dataclass(frozen=True)
class GreaterThanOrEqual:
    column: str
    value: Any


@dataclass(frozen=True)
class LessThan:
    column: str
    value: Any


@dataclass(frozen=True)
class LessThanOrEqual:
    column: str
    value: Any


@dataclass(frozen=True)
class In:
    column: str
    values: tuple


@dataclass(frozen=True)
class IsNull:
    column: str


@dataclass(frozen=True)
class IsNotNull:
    column: str


@dataclass(frozen=True)
class StringStartsWith:
    column: str
    value: str


@dataclass(frozen=True)
class StringEndsWith:
    column: str
    value: str


@dataclass(frozen=True)
class StringContains:
    column: str
    value: str


@dataclass(frozen=True)
class Not:
    child: "Filter"


@dataclass(frozen=True)
class And:
    left: "Filter"
    right: "Filter"


@dataclass(frozen=True)
class Or:
    left: "Filter"
    right: "Filter"


Comparison = Union[EqualTo, EqualNullSafe, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual]
StringMatch = Union[StringStartsWith, StringEndsWith, StringContains]
Filter = Union[Comparison, In, IsNull, IsNotNull, StringMatch, Not, And, Or]


def columns_of(f: Filter) -> set[str]:
    if isinstance(f, (And, Or)):
        return columns_of(f.left) | columns_of(f.right)
    if isinstance(f, Not):
        return columns_of(f.child)
    return {f.column}


_OPERATORS = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<=",
              EqualNullSafe: "<=>"}
_LIKE_PATTERNS = {StringStartsWith: "{}%", StringEndsWith: "%{}", StringContains: "%{}%"}


def render(f: Filter) -> str:
    """A filter as SQL-like text (`views > 100`, `NOT (region = 'eu')`): explain output."""
    if isinstance(f, And):
        return f"({render(f.left)} AND {render(f.right)})"
    if isinstance(f, Or):
        return f"({render(f.left)} OR {render(f.right)})"
    if isinstance(f, Not):
        return f"NOT {render(f.child)}"
    if isinstance(f, IsNull):
        return f"{f.column} IS NULL"
    if isinstance(f, IsNotNull):
        return f"{f.column} IS NOT NULL"
    if isinstance(f, In):
        return f"{f.column} IN ({', '.join(_literal(v) for v in f.values)})"
    if type(f) in _LIKE_PATTERNS:
        return f"{f.column} LIKE {_literal(_LIKE_PATTERNS[type(f)].format(f.value))}"
    op = _OPERATORS.get(type(f))
    if op is not None:
        return f"{f.column} {op} {_literal(f.value)}"
    return repr(f)


def _literal(v: Any) -> str:
    import datetime as dt

    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if v is None:
        return "NULL"
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    return str(v)
