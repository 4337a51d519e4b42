"""THE Arrow evaluator of the filter model: `arrow_mask`, exact Spark SQL semantics over Arrow data
(three-valued logic, NaN is equal to itself and above every other double, -0.0 = 0.0, strings by
UTF-8 bytes, exact decimals)."""

from __future__ import annotations

import decimal
import math
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.schema.partitions import spark_type_of_arrow
from indextables_spark.core.schema.types import atomic_kind
from indextables_spark.errors import SchemaMismatchError
from indextables_spark.expr.model import (
    And,
    EqualNullSafe,
    Filter,
    FilterVisitor,
    In,
    IsNotNull,
    IsNull,
    Leaf,
    Not,
    Or,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from indextables_spark.expr.values import (
    I64_MAX,
    I64_MIN,
    OP_CODES,
    STRING_MATCHES,
    IncompatibleValue,
    UnsupportedFilterError,
    column_value,
    struct_column,
    unquote_column,
)


_NULL_BOOL = pa.scalar(None, pa.bool_())


def _const(a: pa.Array | pa.ChunkedArray, value: bool) -> pa.Array | pa.ChunkedArray:
    """value on non-null rows, null on null rows."""
    return pc.if_else(pc.is_valid(a), pa.scalar(value), _NULL_BOOL)


_CMP = {"eq": pc.equal, "gt": pc.greater, "ge": pc.greater_equal, "lt": pc.less, "le": pc.less_equal}


def _outside(op: str, above: bool, a: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Every value of a lies below (above=True) or above (above=False) the filter value."""
    if op == "eq":
        return _const(a, False)
    return _const(a, (op in ("lt", "le")) == above)


def _compare(op: str, a: pa.Array | pa.ChunkedArray, kind: str, v: Any, spark_type: str) -> pa.Array | pa.ChunkedArray:
    if kind == "i64":
        if v > I64_MAX or v < I64_MIN:
            return _outside(op, v > I64_MAX, a)
        return _CMP[op](a.cast(pa.int64()), pa.scalar(v, pa.int64()))
    if kind == "f64":
        x = a.cast(pa.float64())
        nan = pc.is_nan(x)
        if math.isnan(v):  # Spark: NaN = NaN, NaN above everything
            return {"eq": nan, "ge": nan, "gt": _const(a, False), "lt": pc.invert(nan), "le": _const(a, True)}[op]
        base = _CMP[op](x, pa.scalar(v, pa.float64()))
        return pc.or_kleene(base, nan) if op in ("gt", "ge") else base
    if kind == "decimal":
        return _compare_decimal(op, a, v)
    if kind == "date":
        return _CMP[op](a.cast(pa.int32()), pa.scalar(v, pa.int32()))
    if kind == "timestamp":
        if v > I64_MAX or v < I64_MIN:
            return _outside(op, v > I64_MAX, a)
        return _CMP[op](a.cast(pa.int64()), pa.scalar(v, pa.int64()))
    if kind in ("string", "binary", "bool"):
        # Arrow compares strings and binaries byte-wise (= Spark's UTF-8 binary order), false < true.
        return _CMP[op](a, pa.scalar(v, a.type))
    raise UnsupportedFilterError(f"cannot compare a {a.type} column")


def _decimal_ctx() -> decimal.Context:
    return decimal.Context(prec=120, rounding=decimal.ROUND_FLOOR)


def _compare_decimal(op: str, a: pa.Array | pa.ChunkedArray, v: decimal.Decimal) -> pa.Array | pa.ChunkedArray:
    t = a.type
    ctx = _decimal_ctx()
    quantum = decimal.Decimal(1).scaleb(-t.scale)
    limit = (decimal.Decimal(10) ** t.precision - 1).scaleb(-t.scale, context=ctx)
    if v > limit:  # beyond every value the column can hold (checked before quantize: huge exponents)
        return _outside(op, True, a)
    if v < -limit:
        return _outside(op, False, a)
    floor_v = v.quantize(quantum, context=ctx)
    floor_s = pa.scalar(floor_v, t)
    if floor_v == v:
        return _CMP[op](a, floor_s)
    # v has more fractional digits than the column: floor_v < v < floor_v + quantum.
    if op == "eq":
        return _const(a, False)
    if op in ("gt", "ge"):
        return pc.greater(a, floor_s)
    return pc.less_equal(a, floor_s)


def _in(a: pa.Array | pa.ChunkedArray, kind: str, values: Sequence[Any], spark_type: str) -> pa.Array | pa.ChunkedArray:
    non_null = [v for v in values if v is not None]
    has_null = len(non_null) < len(values)
    if not non_null:
        result = _const(a, False)
    elif kind in ("f64", "decimal") or len(non_null) <= 8:
        result = None
        for v in non_null:
            r = _compare("eq", a, kind, v, spark_type)
            result = r if result is None else pc.or_kleene(result, r)
    else:
        result = _is_in(a, kind, non_null)
    if has_null:  # x IN (.., NULL): true on a match, otherwise NULL
        result = pc.if_else(pc.fill_null(result, False), pa.scalar(True), _NULL_BOOL)
    return result


def _is_in(a: pa.Array | pa.ChunkedArray, kind: str, values: list[Any]) -> pa.Array | pa.ChunkedArray:
    if kind in ("i64", "timestamp"):
        col, vs = a.cast(pa.int64()), pa.array([v for v in values if I64_MIN <= v <= I64_MAX], pa.int64())
    elif kind == "date":
        col, vs = a.cast(pa.int32()), pa.array(values, pa.int32())
    else:
        col, vs = a, pa.array(values, a.type)
    return pc.if_else(pc.is_valid(a), pc.is_in(col, value_set=vs), _NULL_BOOL)


def _column(data: pa.Table | pa.RecordBatch, name: str, f: Filter) -> pa.Array | pa.ChunkedArray:
    col_name = unquote_column(name)
    names = data.schema.names
    if col_name not in names:
        lowered = [n for n in names if n.lower() == col_name.lower()]
        if len(lowered) != 1:
            field = struct_field(data, col_name)
            if field is not None:
                return field
            raise SchemaMismatchError(
                f"filter {f} references column {name!r}, which is not in the data (columns: {names})"
            )
        col_name = lowered[0]
    return data.column(col_name)


def struct_field(data: pa.Table | pa.RecordBatch, path: str) -> pa.Array | None:
    """The values of a struct field (`user.address.city`): NULL where the struct, or any struct on
    the way, is NULL; None when the path is not a struct field of the data."""
    head = struct_column(path, data.schema.names)
    if head is None:
        return None
    col = data.column(head)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    for name in path.split(".")[1:]:
        if not pa.types.is_struct(col.type) or col.type.get_field_index(name) < 0:
            return None
        valid = col.is_valid()
        child = col.field(name)
        col = pc.if_else(valid, child, pa.nulls(len(child), child.type)) if col.null_count else child
    return col


class _ArrowEval(FilterVisitor[Any]):
    """Exact evaluation over an Arrow table or batch (Kleene logic: NULL where Spark's is NULL)."""

    def __init__(self, data: pa.Table | pa.RecordBatch) -> None:
        self.data = data

    def visit_and(self, f: And) -> pa.Array | pa.ChunkedArray:
        return pc.and_kleene(self.visit(f.left), self.visit(f.right))

    def visit_or(self, f: Or) -> pa.Array | pa.ChunkedArray:
        return pc.or_kleene(self.visit(f.left), self.visit(f.right))

    def visit_not(self, f: Not) -> pa.Array | pa.ChunkedArray:
        return pc.invert(self.visit(f.child))

    def visit_comparison(self, f: Leaf) -> pa.Array | pa.ChunkedArray:
        return _eval_leaf(f, self.data)

    visit_in = visit_is_null = visit_is_not_null = visit_string_match = visit_comparison


def _eval(f: Filter, data: pa.Table | pa.RecordBatch) -> pa.Array | pa.ChunkedArray:
    return _ArrowEval(data).visit(f)


def _eval_leaf(f: Leaf, data: pa.Table | pa.RecordBatch) -> pa.Array | pa.ChunkedArray:
    a = _column(data, f.column, f)
    if isinstance(f, IsNull):
        return pc.is_null(a)
    if isinstance(f, IsNotNull):
        return pc.is_valid(a)
    spark_type = spark_type_of_arrow(a.type)
    kind = atomic_kind(spark_type) if spark_type is not None else None  # None: nested
    if isinstance(f, STRING_MATCHES):
        if kind != "string" or not isinstance(f.value, str):
            raise UnsupportedFilterError(f"filter {f}: column {f.column!r} of type {a.type} is not a string column")
        fn = {StringStartsWith: pc.starts_with, StringEndsWith: pc.ends_with, StringContains: pc.match_substring}[
            type(f)
        ]
        return fn(a, pattern=f.value)
    if spark_type is None or kind is None:
        raise UnsupportedFilterError(f"filter {f}: column {f.column!r} of type {a.type} supports only IS [NOT] NULL")
    try:
        if isinstance(f, In):
            values = [None if v is None else column_value(kind, spark_type, v) for v in f.values]
            return _in(a, kind, values, spark_type)
        if f.value is None:  # x <=> NULL is IS NULL; any other comparison with NULL is NULL
            return pc.is_null(a) if isinstance(f, EqualNullSafe) else pa.nulls(len(a), pa.bool_())
        v = column_value(kind, spark_type, f.value)
    except IncompatibleValue as e:
        raise UnsupportedFilterError(
            f"filter {f}: value {e} does not fit column {f.column!r} of type {a.type}"
        ) from None
    r = _compare(OP_CODES[type(f)], a, kind, v, spark_type)
    return pc.fill_null(r, False) if isinstance(f, EqualNullSafe) else r


def arrow_mask(table_or_batch: pa.Table | pa.RecordBatch, filters: Sequence[Filter]) -> pa.BooleanArray:
    """Rows satisfying every filter (Spark semantics: a NULL result drops the row)."""
    n = table_or_batch.num_rows
    mask = None
    for f in filters:
        r = _eval(f, table_or_batch)
        mask = r if mask is None else pc.and_kleene(mask, r)
    if mask is None:
        return pa.repeat(pa.scalar(True), n)
    if mask.null_count:  # (fill_null copies even an array without NULLs)
        mask = pc.fill_null(mask, False)
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks() if mask.num_chunks != 1 else mask.chunk(0)
    return mask
