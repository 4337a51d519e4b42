"""Manifest pruning by partition bounds (docs/reference/table-format.md, "Partition bounds"):
bounds are lexicographic string min/max, so numeric columns prune only by equality/IN on the
canonical text of the value, never by ranges."""

from __future__ import annotations

from typing import Any, Mapping

from indextables_spark.expr.model import (
    And,
    Comparison,
    EqualTo,
    Filter,
    FilterVisitor,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    Leaf,
    LessThanOrEqual,
    Not,
    Or,
    StringMatch,
)
from indextables_spark.expr.partition_values import OP_OF, is_integral, is_numeric, literal_text, number

_NEGATED: dict[type[Filter], type[Filter]] = {
    LessThan: GreaterThanOrEqual,
    LessThanOrEqual: GreaterThan,
    GreaterThan: LessThanOrEqual,
    GreaterThanOrEqual: LessThan,
    IsNull: IsNotNull,
    IsNotNull: IsNull,
}


class _NegationNormalForm(FilterVisitor[Filter]):
    """NOT pushed down to the leaves (valid under three-valued logic for these predicates)."""

    def __init__(self, negate: bool = False):
        self.negate = negate

    def visit_not(self, e: Not) -> Filter:
        return _NegationNormalForm(not self.negate).visit(e.child)

    def visit_and(self, e: And) -> Filter:
        left, right = self.visit(e.left), self.visit(e.right)
        return Or(left, right) if self.negate else And(left, right)

    def visit_or(self, e: Or) -> Filter:
        left, right = self.visit(e.left), self.visit(e.right)
        return And(left, right) if self.negate else Or(left, right)

    def _leaf(self, f: Leaf) -> Filter:
        if not self.negate:
            return f
        if type(f) in _NEGATED:  # x < v → x >= v, IS NULL → IS NOT NULL (the same fields)
            return _NEGATED[type(f)](*vars(f).values())
        return Not(f)  # EqualTo, In: keep a leaf-level Not

    visit_comparison = visit_in = visit_is_null = visit_is_not_null = visit_string_match = _leaf


def _nnf(e: Filter, negate: bool = False) -> Filter:
    return _NegationNormalForm(negate).visit(e)


def _bound_text(col_type: str, value: Any) -> str | None:
    """The text a partition value equal to `value` has, or None when that text is not certain."""
    t = col_type.lower()
    if is_integral(t):
        n = number(value)
        if n is None or (isinstance(n, float) and not n.is_integer()):
            return None
        return str(int(n))
    if is_numeric(t):
        return None  # float/decimal text forms vary (1.0 vs 1): never prune on them
    return literal_text(value)


def _leaf_bounds(
    column: str, value: Any, bounds: Mapping[str, tuple[str | None, str | None]], types: Mapping[str, str]
) -> tuple[str, str, str] | None:
    """(min, max, the text of value) when the column has bounds and the value a certain text."""
    b = bounds.get(column)
    if b is None or b[0] is None or b[1] is None:
        return None  # unknown column or null bounds: never pruned
    s = _bound_text(types.get(column, "string"), value)
    return None if s is None else (b[0], b[1], s)


class _MayMatch(FilterVisitor[bool]):
    """Can a manifest whose partition bounds are these hold a matching file? (NOT already pushed
    to the leaves by _nnf.) IS [NOT] NULL and LIKE never prune."""

    def __init__(self, bounds: Mapping[str, tuple[str | None, str | None]], types: Mapping[str, str]):
        self.bounds, self.types = bounds, types

    def visit_and(self, e: And) -> bool:
        return self.visit(e.left) and self.visit(e.right)

    def visit_or(self, e: Or) -> bool:
        return self.visit(e.left) or self.visit(e.right)

    def visit_comparison(self, e: Comparison) -> bool:
        op = OP_OF.get(type(e))
        if op is None:
            return True
        t = _leaf_bounds(e.column, e.value, self.bounds, self.types)
        if t is None:
            return True
        lo, hi, s = t
        if op == "=":
            return lo <= s <= hi
        col_type = self.types.get(e.column, "string")
        if is_numeric(col_type) or col_type.lower() == "boolean":
            return True  # lexicographic bounds say nothing about numeric order
        return {"<": lo < s, "<=": lo <= s, ">": hi > s, ">=": hi >= s}[op]

    def visit_in(self, e: In) -> bool:
        return any(self.visit(EqualTo(e.column, v)) for v in e.values)

    def visit_not(self, e: Not) -> bool:
        if isinstance(e.child, EqualTo):
            t = _leaf_bounds(e.child.column, e.child.value, self.bounds, self.types)
            return t is None or not (t[0] == t[1] == t[2])
        if isinstance(e.child, In):
            return all(self.visit(Not(EqualTo(e.child.column, v))) for v in e.child.values)
        return True

    def visit_is_null(self, e: IsNull) -> bool:
        return True

    def visit_is_not_null(self, e: IsNotNull) -> bool:
        return True

    def visit_string_match(self, e: StringMatch) -> bool:
        return True


def may_match(e: Filter, bounds: Mapping[str, tuple[str | None, str | None]], types: Mapping[str, str]) -> bool:
    """Can a manifest with these partition bounds hold a file matching e?"""
    return _MayMatch(bounds, types).visit(_nnf(e))
