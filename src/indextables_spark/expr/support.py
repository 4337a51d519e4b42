"""What the filter evaluation answers exactly on stored columns (`supports`)."""

from __future__ import annotations

from typing import Iterable, Mapping

from indextables_spark.core.schema.types import STRING_KINDS, ColumnSpec, specs_by_name
from indextables_spark.expr.model import (
    And,
    Filter,
    FilterVisitor,
    In,
    IsNotNull,
    IsNull,
    Leaf,
    Not,
    Or,
)
from indextables_spark.expr.values import (
    STRING_MATCHES,
    lookup_spec,
    value_fits,
)


def supports(filter: Filter, specs: Mapping[str, ColumnSpec] | Iterable[ColumnSpec]) -> bool:
    """True when arrow_mask evaluates the filter exactly on stored (non-partition) columns."""
    return _Supports(specs_by_name(specs)).visit(filter)


class _Supports(FilterVisitor[bool]):
    def __init__(self, specs: Mapping[str, ColumnSpec]):
        self.specs = specs

    def visit_not(self, f: Not) -> bool:
        return self.visit(f.child)

    def visit_and(self, f: And | Or) -> bool:
        return self.visit(f.left) and self.visit(f.right)

    visit_or = visit_and

    def visit_comparison(self, f: Leaf) -> bool:
        return _supports_leaf(f, self.specs)

    visit_in = visit_is_null = visit_is_not_null = visit_string_match = visit_comparison


def _supports_leaf(f: Leaf, specs: Mapping[str, ColumnSpec]) -> bool:
    spec = lookup_spec(specs, f.column)
    if spec is None or spec.partition:
        return False
    if isinstance(f, (IsNull, IsNotNull)):
        return True
    if spec.kind == "json":
        return False
    if isinstance(f, STRING_MATCHES):
        return spec.kind in STRING_KINDS and isinstance(f.value, str)
    if isinstance(f, In):
        return isinstance(f.values, (tuple, list)) and all(v is None or value_fits(spec, v) for v in f.values)
    return f.value is None or value_fits(spec, f.value)
