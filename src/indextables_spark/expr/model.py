"""The filter model: one expression tree for predicates over columns.

Frozen dataclasses mirroring Spark's pushed-down filters (pyspark.sql.datasource). Built from
Spark's filters (spark/filters.py), from predicate text (expr/partition_filter.py: partition
filters, DROP PARTITIONS, MERGE SPLITS WHERE, DELETE) and by hand; evaluated by expr/arrow_eval.py
(exact Arrow evaluation), core/split/read/tantivy_query.py (Tantivy narrowing), core/split/read/skipping.py (split
skipping, partition pruning) and by
expr/partition_filter.py (files-table filtering, manifest pruning). No dependencies, so that the
transaction log can use it without the split machinery.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar, Union


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
    values: tuple[Any, ...]


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
Leaf = Union[Comparison, In, IsNull, IsNotNull, StringMatch]  # a filter on one column
Filter = Union[Leaf, Not, And, Or]


T = TypeVar("T")


class FilterVisitor(ABC, Generic[T]):
    """The base of every evaluator of the filter model (as pyiceberg's BooleanExpressionVisitor):
    `visit` dispatches on the node's class to one method per node — comparisons and string matches
    reach `visit_comparison` / `visit_string_match` unless a visitor overrides the node's own
    method. A node class the dispatch does not know raises (never silently ignored), and a visitor
    lacking a method cannot be instantiated."""

    def visit(self, f: Filter) -> T:
        name = _VISIT.get(type(f))
        if name is None:
            raise TypeError(f"{type(self).__name__}: unknown filter node {type(f).__name__} ({f!r})")
        method: Callable[[Filter], T] = getattr(self, name)
        return method(f)

    @abstractmethod
    def visit_and(self, f: And) -> T: ...

    @abstractmethod
    def visit_or(self, f: Or) -> T: ...

    @abstractmethod
    def visit_not(self, f: Not) -> T: ...

    @abstractmethod
    def visit_comparison(self, f: Comparison) -> T: ...

    @abstractmethod
    def visit_in(self, f: In) -> T: ...

    @abstractmethod
    def visit_is_null(self, f: IsNull) -> T: ...

    @abstractmethod
    def visit_is_not_null(self, f: IsNotNull) -> T: ...

    @abstractmethod
    def visit_string_match(self, f: StringMatch) -> T: ...

    def visit_equal_to(self, f: EqualTo) -> T:
        return self.visit_comparison(f)

    def visit_equal_null_safe(self, f: EqualNullSafe) -> T:
        return self.visit_comparison(f)

    def visit_greater_than(self, f: GreaterThan) -> T:
        return self.visit_comparison(f)

    def visit_greater_than_or_equal(self, f: GreaterThanOrEqual) -> T:
        return self.visit_comparison(f)

    def visit_less_than(self, f: LessThan) -> T:
        return self.visit_comparison(f)

    def visit_less_than_or_equal(self, f: LessThanOrEqual) -> T:
        return self.visit_comparison(f)

    def visit_starts_with(self, f: StringStartsWith) -> T:
        return self.visit_string_match(f)

    def visit_ends_with(self, f: StringEndsWith) -> T:
        return self.visit_string_match(f)

    def visit_contains(self, f: StringContains) -> T:
        return self.visit_string_match(f)


class FilterRewriter(FilterVisitor[Filter]):
    """A visitor that rebuilds a filter: AND, OR and NOT of the rewritten children, each leaf as the
    subclass rewrites it."""

    def visit_and(self, f: And) -> Filter:
        return And(self.visit(f.left), self.visit(f.right))

    def visit_or(self, f: Or) -> Filter:
        return Or(self.visit(f.left), self.visit(f.right))

    def visit_not(self, f: Not) -> Filter:
        return Not(self.visit(f.child))


_VISIT = {
    And: "visit_and",
    Or: "visit_or",
    Not: "visit_not",
    In: "visit_in",
    IsNull: "visit_is_null",
    IsNotNull: "visit_is_not_null",
    EqualTo: "visit_equal_to",
    EqualNullSafe: "visit_equal_null_safe",
    GreaterThan: "visit_greater_than",
    GreaterThanOrEqual: "visit_greater_than_or_equal",
    LessThan: "visit_less_than",
    LessThanOrEqual: "visit_less_than_or_equal",
    StringStartsWith: "visit_starts_with",
    StringEndsWith: "visit_ends_with",
    StringContains: "visit_contains",
}


class _Columns(FilterVisitor[frozenset[str]]):
    def visit_and(self, f: And | Or) -> frozenset[str]:
        return self.visit(f.left) | self.visit(f.right)

    visit_or = visit_and

    def visit_not(self, f: Not) -> frozenset[str]:
        return self.visit(f.child)

    def _leaf(self, f: Leaf) -> frozenset[str]:
        return frozenset([f.column])

    visit_comparison = visit_in = visit_is_null = visit_is_not_null = visit_string_match = _leaf


def columns_of(f: Filter) -> set[str]:
    """The columns a filter reads."""
    return set(_Columns().visit(f))


_OPERATORS = {
    EqualTo: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    EqualNullSafe: "<=>",
}
_LIKE_PATTERNS = {StringStartsWith: "{}%", StringEndsWith: "%{}", StringContains: "%{}%"}


class _Render(FilterVisitor[str]):
    def visit_and(self, f: And) -> str:
        return f"({self.visit(f.left)} AND {self.visit(f.right)})"

    def visit_or(self, f: Or) -> str:
        return f"({self.visit(f.left)} OR {self.visit(f.right)})"

    def visit_not(self, f: Not) -> str:
        return f"NOT {self.visit(f.child)}"

    def visit_is_null(self, f: IsNull) -> str:
        return f"{f.column} IS NULL"

    def visit_is_not_null(self, f: IsNotNull) -> str:
        return f"{f.column} IS NOT NULL"

    def visit_in(self, f: In) -> str:
        return f"{f.column} IN ({', '.join(_literal(v) for v in f.values)})"

    def visit_string_match(self, f: StringMatch) -> str:
        return f"{f.column} LIKE {_literal(_LIKE_PATTERNS[type(f)].format(f.value))}"

    def visit_comparison(self, f: Comparison) -> str:
        return f"{f.column} {_OPERATORS[type(f)]} {_literal(f.value)}"


def render(f: Filter) -> str:
    """A filter as SQL-like text (`views > 100`, `NOT (region = 'eu')`): explain output."""
    return _Render().visit(f)


def _literal(v: Any) -> str:
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if v is None:
        return "NULL"
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    return str(v)
