"""Skipping without reading: `skip_split` (min/max/null-count stats prove that no row of a split can
match) and `prune_partition` (exact evaluation on partition values; True = the partition may match)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import pyarrow as pa

from indextables_spark.core.schema.arrow_types import arrow_type
from indextables_spark.core.schema.partitions import parse_partition_value
from indextables_spark.core.schema.types import STRING_KINDS, ColumnSpec, SparkType, specs_by_name
from indextables_spark.core.split.format.stats import decode_stat, null_counts, order_key
from indextables_spark.expr.arrow_eval import arrow_mask
from indextables_spark.expr.model import (
    Leaf,
    And,
    EqualNullSafe,
    Filter,
    FilterVisitor,
    In,
    IsNotNull,
    IsNull,
    Not,
    Or,
    StringStartsWith,
    columns_of,
)
from indextables_spark.expr.values import (
    OP_CODES,
    STRING_MATCHES,
    IncompatibleValue,
    column_value,
    lookup_spec,
)

# ---------------------------------------------------------------------------------------------
# Data skipping with min/max stats

if TYPE_CHECKING:
    from indextables_spark.core.log.model.actions import AddFile


@dataclass(frozen=True)
class _Bounds:
    kind: str
    lo: Any  # comparable (order_key applied) or None when unknown
    hi: Any
    nulls: int | None
    rows: int | None

    @property
    def all_null(self) -> bool:
        return self.nulls is not None and self.rows is not None and self.nulls == self.rows


def _prefix_upper_bound(text: str) -> str | None:
    """An upper bound of every string starting with `text` (its last character incremented)."""
    for i in range(len(text) - 1, -1, -1):
        if ord(text[i]) < 0x10FFFF:
            return text[:i] + chr(ord(text[i]) + 1)
    return None


def _bounds(add_file: AddFile, spec: ColumnSpec, nulls: dict[str, int], prefix_max: bool = False) -> _Bounds:
    def parse(stats: dict[str, str] | None, is_max: bool = False) -> Any:
        text = (stats or {}).get(spec.name)
        if text is not None and is_max and prefix_max and spec.kind in STRING_KINDS:
            text = _prefix_upper_bound(text)
        if text is None:
            return None
        try:
            return order_key(spec.kind, decode_stat(spec.kind, text))
        except (ValueError, ArithmeticError):
            # Stats written by other tools may use another encoding: unusable here means no
            # skipping (always safe), not a failed read.
            return None

    return _Bounds(
        spec.kind,
        parse(add_file.min_values),
        parse(add_file.max_values, is_max=True),
        nulls.get(spec.name),
        add_file.num_records,
    )


class _CannotMatch(FilterVisitor[bool]):
    """True only when a split's min/max statistics and null counts prove no row satisfies a filter."""

    def __init__(self, add_file: AddFile, specs: Mapping[str, ColumnSpec], nulls: dict[str, int], prefix_max: bool):
        self.add_file, self.specs, self.nulls, self.prefix_max = add_file, specs, nulls, prefix_max

    def visit_and(self, f: And) -> bool:
        return self.visit(f.left) or self.visit(f.right)

    def visit_or(self, f: Or) -> bool:
        return self.visit(f.left) and self.visit(f.right)

    def visit_not(self, f: Not) -> bool:
        if isinstance(f.child, IsNull):
            return self.visit(IsNotNull(f.child.column))
        if isinstance(f.child, IsNotNull):
            return self.visit(IsNull(f.child.column))
        return False

    def visit_comparison(self, f: Leaf) -> bool:
        return _cannot_match_leaf(f, self.add_file, self.specs, self.nulls, self.prefix_max)

    visit_in = visit_is_null = visit_is_not_null = visit_string_match = visit_comparison


def _cannot_match(
    f: Filter, add_file: AddFile, specs: Mapping[str, ColumnSpec], nulls: dict[str, int], prefix_max: bool = False
) -> bool:
    return _CannotMatch(add_file, specs, nulls, prefix_max).visit(f)


def _cannot_match_leaf(
    f: Leaf, add_file: AddFile, specs: Mapping[str, ColumnSpec], nulls: dict[str, int], prefix_max: bool = False
) -> bool:
    spec = lookup_spec(specs, f.column)
    if spec is None or spec.partition:
        return False
    b = _bounds(add_file, spec, nulls, prefix_max)
    if isinstance(f, IsNull):
        return b.nulls == 0
    if isinstance(f, IsNotNull):
        return b.all_null
    if isinstance(f, EqualNullSafe) and f.value is None:
        return b.nulls == 0
    if b.all_null:
        return True  # every comparison with NULL is NULL
    try:
        if isinstance(f, In):
            vals = [
                order_key(spec.kind, column_value(spec.kind, spec.spark_type, v)) for v in f.values if v is not None
            ]
            return all(_outside_bounds(b, v) for v in vals)
        if isinstance(f, STRING_MATCHES):
            return isinstance(f, StringStartsWith) and spec.kind in STRING_KINDS and _prefix_outside(b, f.value)
        if f.value is None:
            return True  # x = NULL is never true
        v = order_key(spec.kind, column_value(spec.kind, spec.spark_type, f.value))
    except IncompatibleValue:
        return False
    op = OP_CODES[type(f)]
    if op == "eq":
        return _outside_bounds(b, v)
    if op == "gt":
        return b.hi is not None and b.hi <= v
    if op == "ge":
        return b.hi is not None and b.hi < v
    if op == "lt":
        return b.lo is not None and b.lo >= v
    return b.lo is not None and b.lo > v  # le


def _outside_bounds(b: _Bounds, v: Any) -> bool:
    return (b.lo is not None and v < b.lo) or (b.hi is not None and v > b.hi)


def _prefix_outside(b: _Bounds, p: str) -> bool:
    # Strings starting with p lie in [p, next string after every p-prefixed string).
    if b.hi is not None and b.hi < p:
        return True
    return b.lo is not None and b.lo > p and not b.lo.startswith(p)


def skip_split(
    add_file: AddFile,
    filters: Sequence[Filter],
    specs: Mapping[str, ColumnSpec] | Iterable[ColumnSpec],
    prefix_max: bool = False,
) -> bool:
    """True only when the split's stats prove that no row satisfies the filters.
    prefix_max: a string max may be a cut prefix of the real one (the reference implementation
    cuts long values without raising the max: its StatisticsTruncation.scala), so it bounds only
    strings starting with it."""
    by_name = specs_by_name(specs)
    nulls = null_counts(add_file.stats)
    return any(_cannot_match(f, add_file, by_name, nulls, prefix_max) for f in filters)


# ---------------------------------------------------------------------------------------------
# Partition pruning


def prune_partition(
    partition_values: Mapping[str, str | None],
    filters: Sequence[Filter],
    partition_columns: Sequence[str],
    partition_types: Mapping[str, SparkType],
) -> bool:
    """True when the partition may hold matching rows (keep it); False when the filters rule it out.

    Filters that reference only partition columns are evaluated exactly (Spark semantics) on the
    typed partition values; filters touching other columns are ignored here.
    """
    cols = tuple(partition_columns)
    relevant = tuple(f for f in filters if columns_of(f) <= set(cols))
    if not relevant:
        return True
    values = tuple((c, partition_values.get(c)) for c in cols)
    types = tuple((c, _hashable(partition_types[c])) for c in cols)
    try:
        return _partition_matches(values, relevant, types)
    except TypeError:  # unhashable filter values: evaluate without the memo
        return _partition_matches.__wrapped__(values, relevant, types)


def _hashable(t: SparkType) -> str:
    return t if isinstance(t, str) else repr(t)


@functools.lru_cache(maxsize=4096)
def _partition_matches(
    values: tuple[tuple[str, str | None], ...], filters: tuple[Filter, ...], types: tuple[tuple[str, str], ...]
) -> bool:
    type_of = dict(types)
    arrays, fields = [], []
    for c, text in values:
        t = type_of[c]
        at = arrow_type(t)
        arrays.append(pa.array([parse_partition_value(text, t)], at))
        fields.append(pa.field(c, at))
    batch = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
    return bool(arrow_mask(batch, list(filters))[0].as_py())
