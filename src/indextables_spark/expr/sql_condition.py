"""A SQL condition (sqlglot AST) as the core filter model, where Spark's semantics carry over
exactly; `Unplannable` otherwise (the statement then runs in Spark).

Taken: comparisons of a column with a literal (either side), <=>, <>, IN (literals), BETWEEN,
IS [NOT] NULL, LIKE with a plain prefix/suffix/infix pattern, AND/OR/NOT. Literals become values
of the column's type as Spark casts them (split/where.coerce); a literal that does not fit the
type (where Spark would widen both sides first, e.g. `long_col = 1.5`) and any timestamp
comparison (Spark reads zone-less literals in the session time zone) are left to Spark.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from sqlglot import exp

from indextables_spark.errors import PredicateError
from indextables_spark.expr.model import (
    And,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    Or,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from indextables_spark.expr.where import typed


class Unplannable(Exception):
    """This part of the statement is not planned for the index (the statement runs in Spark)."""


_ATOMIC = ("string", "boolean", "byte", "short", "integer", "long", "float", "double", "date")
_FLIP = {
    exp.GT: exp.LT,
    exp.LT: exp.GT,
    exp.GTE: exp.LTE,
    exp.LTE: exp.GTE,
    exp.EQ: exp.EQ,
    exp.NullSafeEQ: exp.NullSafeEQ,
}
_CMP: dict[type[exp.Binary], Callable[[str, Any], Filter]] = {
    exp.EQ: EqualTo,
    exp.NullSafeEQ: EqualNullSafe,
    exp.GT: GreaterThan,
    exp.GTE: GreaterThanOrEqual,
    exp.LT: LessThan,
    exp.LTE: LessThanOrEqual,
}


def literal(node: exp.Expression) -> Any:
    """The Python value of a literal (Unplannable for anything else, NULL included)."""
    if isinstance(node, exp.Paren):
        return literal(node.this)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        v = literal(node.this)
        return -v
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        try:
            return int(text)
        except ValueError:
            pass
        try:  # 1.5 (a decimal in Spark) and 1e3 (a double) compare as numbers with number columns
            return float(text)
        except ValueError:
            raise Unplannable(f"literal {text}") from None
    raise Unplannable(f"not a literal: {node.sql(dialect='spark')}")


class Converter:
    """Conditions over one table's columns (`types`: name → Spark type name; matched without case)."""

    def __init__(self, types: Mapping[str, str], column_of: Callable[[exp.Column], str | None]):
        self.types = dict(types)
        self.by_lower = {k.lower(): k for k in types}
        self.column_of = column_of  # exp.Column -> column name of the table, or None

    def column(self, node: exp.Expression) -> str:
        if isinstance(node, exp.Paren):
            return self.column(node.this)
        if not isinstance(node, exp.Column):
            raise Unplannable(f"not a column: {node.sql(dialect='spark')}")
        name = self.column_of(node)
        if name is None:
            raise Unplannable(f"column {node.sql(dialect='spark')} is not of the table")
        t = self.types[name]
        if t not in _ATOMIC:
            raise Unplannable(f"column {name} of type {t}")
        return name

    def convert(self, node: exp.Expression) -> Filter:
        f = self._convert(node)
        try:
            return typed(f, self.types)
        except PredicateError as e:
            raise Unplannable(str(e)) from None

    def _convert(self, node: exp.Expr) -> Filter:
        if isinstance(node, exp.Paren):
            return self._convert(node.this)
        if isinstance(node, exp.And):
            return And(self._convert(node.left), self._convert(node.right))
        if isinstance(node, exp.Or):
            return Or(self._convert(node.left), self._convert(node.right))
        if isinstance(node, exp.Not):
            inner = node.this
            if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
                return IsNotNull(self.column(inner.this))
            return Not(self._convert(inner))
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return IsNull(self.column(node.this))
        if isinstance(node, exp.NEQ):
            return Not(self._convert(exp.EQ(this=node.this, expression=node.expression)))
        if isinstance(node, exp.Binary) and type(node) in _CMP:
            left, right = node.this, node.expression
            kind = type(node)
            if not isinstance(_bare(left), exp.Column):
                left, right, kind = right, left, _FLIP[kind]
            return _CMP[kind](self.column(left), literal(right))
        if isinstance(node, exp.In) and not node.args.get("query") and not node.args.get("unnest"):
            values = tuple(literal(v) for v in node.expressions)
            if not values:
                raise Unplannable("IN ()")
            return In(self.column(node.this), values)
        if isinstance(node, exp.Between):
            col = self.column(node.this)
            return And(
                GreaterThanOrEqual(col, literal(node.args["low"])), LessThanOrEqual(col, literal(node.args["high"]))
            )
        if isinstance(node, exp.Like) and not node.args.get("escape"):
            return self._like(self.column(node.this), literal(node.expression))
        raise Unplannable(f"condition {node.sql(dialect='spark')}")

    def _like(self, col: str, pattern: Any) -> Filter:
        if self.types[col] != "string" or not isinstance(pattern, str):
            raise Unplannable("LIKE on a non-string")
        body = pattern.strip("%") if pattern else pattern
        if any(c in body for c in "%_\\"):
            raise Unplannable(f"LIKE pattern {pattern!r}")
        starts, ends = pattern.startswith("%"), pattern.endswith("%") and len(pattern) > 1
        if pattern.startswith("%%") or pattern.endswith("%%"):
            raise Unplannable(f"LIKE pattern {pattern!r}")
        if starts and ends:
            return StringContains(col, body)
        if starts:
            return StringEndsWith(col, body)
        if ends:
            return StringStartsWith(col, body)
        return EqualTo(col, body)


def _bare(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node
