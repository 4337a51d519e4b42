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
