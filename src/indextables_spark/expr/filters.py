"""Evaluations of the filter model (indextables_spark/expr/model.py; its classes are re-exported here).

- `arrow_mask`: exact Spark SQL semantics over Arrow data (three-valued logic, NaN is equal to
  itself and above every other double, -0.0 = 0.0, strings by UTF-8 bytes, exact decimals).
- `tantivy_query`: a query matching a SUPERSET of the rows that satisfy the filters (narrowing);
  on tokenized text columns through the terms a string filter implies (text.py).
- `skip_split`: min/max/null-count stats prove that no row of a split can match.
- `prune_partition`: exact evaluation on partition values (True = the partition may match: keep).

Filter values are Python values as PySpark gives them: int, float, str, bool, bytes,
decimal.Decimal, datetime.date, datetime.datetime (aware for timestamp columns, naive for
timestamp_ntz).
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.errors import IndexTablesError, SchemaMismatchError
from indextables_spark.expr.model import (  # noqa: F401 (the model, re-exported: split.filters is where callers find it)
    And,
    Comparison,
    EqualNullSafe,
    EqualTo,
    Filter,
    FilterVisitor,
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
    StringMatch,
    StringStartsWith,
    columns_of,
)
from indextables_spark.core.split.documents import TRUNCATE_CHARS, exact_term, f64_key
from indextables_spark.core.split.partitions import date_to_days, datetime_to_micros, parse_partition_value
from indextables_spark.core.split.stats import decode_stat, null_counts, order_key
from indextables_spark.expr.text import pattern_terms, regex_escape
from indextables_spark.expr.text import supported as text_supported
from indextables_spark.core.split.arrow_types import arrow_type
from indextables_spark.core.split.types import STRING_KINDS, ColumnSpec, index_only_columns, specs_by_name

if TYPE_CHECKING:
    import tantivy


class UnsupportedFilterError(IndexTablesError):
    """A filter cannot be evaluated on a column (wrong value type, unsupported column kind)."""


_OPS = {
    EqualTo: "eq",
    EqualNullSafe: "eq",
    GreaterThan: "gt",
    GreaterThanOrEqual: "ge",
    LessThan: "lt",
    LessThanOrEqual: "le",
}
_COMPARISONS = tuple(_OPS)
_STRING_MATCHES = (StringStartsWith, StringEndsWith, StringContains)
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if len(name) > 1 and name[0] == name[-1] == "`" else name


def _lookup(specs: Mapping[str, ColumnSpec], column: str) -> ColumnSpec | None:
    name = _unquote(column)
    s = specs.get(name)
    if s is not None:
        return s
    matches = [v for k, v in specs.items() if k.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else None


# ---------------------------------------------------------------------------------------------
# Values: filter value → the comparable domain of a column kind


class _Incompatible(Exception):
    """Internal: a value does not fit a column kind."""


def _norm_value(kind: str, spark_type: Any, v: Any) -> Any:
    """Comparable Python value for a column kind (int days/micros for date/timestamp)."""
    if kind == "i64":
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    elif kind == "f64":
        if isinstance(v, float):
            return v
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) <= (1 << 53):
            return float(v)
    elif kind == "decimal":
        if isinstance(v, decimal.Decimal) and v.is_finite():
            return v
        if isinstance(v, int) and not isinstance(v, bool):
            return decimal.Decimal(v)
    elif kind in STRING_KINDS:
        if isinstance(v, str):
            return v
    elif kind == "bool":
        if isinstance(v, bool):
            return v
    elif kind == "date":
        if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
            return date_to_days(v)
    elif kind == "timestamp":
        if isinstance(v, dt.datetime):
            ntz = str(spark_type).strip().lower() == "timestamp_ntz"
            if ntz == (v.tzinfo is None):
                return datetime_to_micros(v)
    elif kind == "binary":
        if isinstance(v, (bytes, bytearray, memoryview)):
            return bytes(v)
    raise _Incompatible(f"{v!r} ({type(v).__name__})")


def _value_ok(spec: ColumnSpec, v: Any) -> bool:
    try:
        _norm_value(spec.kind, spec.spark_type, v)
        return True
    except _Incompatible:
        return False


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

    def visit_comparison(self, f: Any) -> bool:
        return _supports_leaf(f, self.specs)

    visit_in = visit_is_null = visit_is_not_null = visit_string_match = visit_comparison


def _supports_leaf(f: Any, specs: Mapping[str, ColumnSpec]) -> bool:
    spec = _lookup(specs, f.column)
    if spec is None or spec.partition:
        return False
    if isinstance(f, (IsNull, IsNotNull)):
        return True
    if spec.kind == "json":
        return False
    if isinstance(f, _STRING_MATCHES):
        return spec.kind in STRING_KINDS and isinstance(f.value, str)
    if isinstance(f, In):
        return isinstance(f.values, (tuple, list)) and all(v is None or _value_ok(spec, v) for v in f.values)
    return f.value is None or _value_ok(spec, f.value)


# ---------------------------------------------------------------------------------------------
# Exact evaluation over Arrow


def _kind_of_arrow(t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "i64"
    if pa.types.is_floating(t):
        return "f64"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    return "json"


def _arrow_spark_type(t: pa.DataType) -> str:
    return "timestamp_ntz" if pa.types.is_timestamp(t) and t.tz is None else "timestamp"


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
        if v > _I64_MAX or v < _I64_MIN:
            return _outside(op, v > _I64_MAX, a)
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
        if v > _I64_MAX or v < _I64_MIN:
            return _outside(op, v > _I64_MAX, a)
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
        col, vs = a.cast(pa.int64()), pa.array([v for v in values if _I64_MIN <= v <= _I64_MAX], pa.int64())
    elif kind == "date":
        col, vs = a.cast(pa.int32()), pa.array(values, pa.int32())
    else:
        col, vs = a, pa.array(values, a.type)
    return pc.if_else(pc.is_valid(a), pc.is_in(col, value_set=vs), _NULL_BOOL)


def _column(data: pa.Table | pa.RecordBatch, name: str, f: Any) -> pa.Array | pa.ChunkedArray:
    col_name = _unquote(name)
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


_INTEGER_TYPES = ("byte", "short", "integer", "long")
_RANGE_NARROWING = re.compile(r"^[^:\s]+:[<>]")
_RANGE_OPS = {GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}


def struct_narrowing(
    path: Sequence[str], values: Sequence[Any], specs: Mapping[str, ColumnSpec], op: str = "="
) -> str | None:
    """A Tantivy query (text) matching a superset of the rows where the struct field at `path`
    (column, field, …) equals one of `values` (op "=") or compares with the one value (op ">",
    ">=", "<", "<=") — `user.name = 'Bob Smith'` → `user.name:"bob smith"`, `user.age > 50` →
    `user.age:>50` in the column's json field — or None.

    Equality on string, integer and boolean fields of struct columns indexed with the default
    tokenizer: a string's tokens as a phrase (every token indexed, none cut for length), an integer
    or boolean as a term of its JSON type (a negative one quoted: `-5` alone reads as a negation).
    Ranges on integer fields, when the column's json field is fast (`indexing.fastfields`: Tantivy
    searches json ranges only in fast fields). The caller still checks the filter on the rows."""
    if len(path) < 2 or not values or (op != "=" and len(values) != 1):
        return None
    spec = specs.get(path[0])
    if spec is None or spec.kind != "json" or spec.partition or not spec.indexed_fields:
        return None
    field_type = _struct_field_type(spec.spark_type, list(path[1:]))
    field = spec.indexed_fields[0]
    if field.tokenizer not in (None, "default") or field.record != "position":
        return None
    if not all(str(p).replace("_", "").isalnum() for p in path[1:]):
        return None  # a path the query syntax would need to escape
    qpath = ".".join([field.name, *path[1:]])
    if op != "=":
        v = values[0]
        if field_type not in _INTEGER_TYPES or not field.fast or not isinstance(v, int) or isinstance(v, bool):
            return None
        return f"{qpath}:{op}{v}"
    parts = []
    for v in values:
        if field_type == "string" and isinstance(v, str):
            from indextables_spark.expr.text import analyzer, token_limit

            limit = token_limit("default", field.token_limit)
            tokens = analyzer("default", field.token_limit).analyze(v)
            if not tokens or any(len(t.encode()) >= limit for t in v.split()) or len(tokens) > 16:
                return None
            parts.append(f'{qpath}:"{" ".join(tokens)}"' if len(tokens) > 1 else f"{qpath}:{tokens[0]}")
        elif field_type in _INTEGER_TYPES and isinstance(v, int) and not isinstance(v, bool):
            parts.append(f"{qpath}:{v}" if v >= 0 else f'{qpath}:"{v}"')
        elif field_type == "boolean" and isinstance(v, bool):
            parts.append(f"{qpath}:{'true' if v else 'false'}")
        else:
            return None
    return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"


def _struct_field_type(spark_type: Any, path: list[str]) -> str | None:
    t = spark_type
    for name in path:
        if not isinstance(t, dict) or t.get("type") != "struct":
            return None
        match = next((x for x in t.get("fields", []) if x.get("name") == name), None)
        if match is None:
            return None
        t = match.get("type")
    return t if isinstance(t, str) else None


def where_narrowing(f: Filter, specs: Mapping[str, ColumnSpec], names: Sequence[str]) -> str | None:
    """struct_narrowing of a parsed `user.name = 'x'`, `user.name IN (…)` or `user.age > 5`
    condition, or None."""
    if not isinstance(f, (EqualTo, In, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)):  # _RANGE_OPS
        return None
    head = struct_column(_unquote(f.column), names)
    if head is None:
        return None
    path = [head, *_unquote(f.column)[len(head) + 1 :].split(".")]
    if isinstance(f, In):
        return struct_narrowing(path, list(f.values), specs)
    return struct_narrowing(path, [f.value], specs, _RANGE_OPS.get(type(f), "="))


def with_narrowing(query: str | None, narrowing: Sequence[str], split_specs: Iterable[ColumnSpec]) -> str | None:
    """An unscored read's query AND the struct-field narrowing the split can search: its json field
    exists (a split written before the column existed has none) and, for a range, is fast (one
    written before `indexing.fastfields` named the column is not)."""
    fields = {f.name: f for s in split_specs for f in s.indexed_fields}

    def usable(q: str) -> bool:
        f = fields.get(q.split(".", 1)[0])
        return f is not None and (f.fast or not _RANGE_NARROWING.match(q))

    parts = ([query] if query is not None else []) + [q for q in narrowing if usable(q)]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else " AND ".join(f"({p})" for p in parts)


def struct_column(name: str, names: Sequence[str]) -> str | None:
    """The column holding a dotted struct path (`user.name` → `user`) when no column has that name."""
    if name in names or "." not in name:
        return None
    head = name.split(".", 1)[0]
    return head if head in names else None


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

    def visit_comparison(self, f: Any) -> pa.Array | pa.ChunkedArray:
        return _eval_leaf(f, self.data)

    visit_in = visit_is_null = visit_is_not_null = visit_string_match = visit_comparison


def _eval(f: Any, data: pa.Table | pa.RecordBatch) -> pa.Array | pa.ChunkedArray:
    return _ArrowEval(data).visit(f)


def _eval_leaf(f: Any, data: pa.Table | pa.RecordBatch) -> pa.Array | pa.ChunkedArray:
    a = _column(data, f.column, f)
    if isinstance(f, IsNull):
        return pc.is_null(a)
    if isinstance(f, IsNotNull):
        return pc.is_valid(a)
    kind = _kind_of_arrow(a.type)
    spark_type = _arrow_spark_type(a.type)
    if isinstance(f, _STRING_MATCHES):
        if kind != "string" or not isinstance(f.value, str):
            raise UnsupportedFilterError(f"filter {f}: column {f.column!r} of type {a.type} is not a string column")
        fn = {StringStartsWith: pc.starts_with, StringEndsWith: pc.ends_with, StringContains: pc.match_substring}[
            type(f)
        ]
        return fn(a, pattern=f.value)
    if kind == "json":
        raise UnsupportedFilterError(f"filter {f}: column {f.column!r} of type {a.type} supports only IS [NOT] NULL")
    try:
        if isinstance(f, In):
            values = [None if v is None else _norm_value(kind, spark_type, v) for v in f.values]
            return _in(a, kind, values, spark_type)
        if f.value is None:  # x <=> NULL is IS NULL; any other comparison with NULL is NULL
            return pc.is_null(a) if isinstance(f, EqualNullSafe) else pa.nulls(len(a), pa.bool_())
        v = _norm_value(kind, spark_type, f.value)
    except _Incompatible as e:
        raise UnsupportedFilterError(
            f"filter {f}: value {e} does not fit column {f.column!r} of type {a.type}"
        ) from None
    r = _compare(_OPS[type(f)], a, kind, v, spark_type)
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
    mask = pc.fill_null(mask, False)
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks() if mask.num_chunks != 1 else mask.chunk(0)
    return mask


# ---------------------------------------------------------------------------------------------
# Narrowing with Tantivy (superset)

_DECIMAL_MARGIN = 1e-9  # relative; decimal → f64 conversion errors are ~1e-16
_MAX_PATTERN_CHARS = 256  # longer regexes are not worth compiling


class _Q(FilterVisitor["tuple[tantivy.Query | None, bool]"]):
    """Query builder bound to one index schema: (query or None, exact) per filter."""

    def __init__(self, schema: tantivy.Schema, specs: Mapping[str, ColumnSpec]) -> None:
        import tantivy

        self.t = tantivy
        self.schema = schema
        self.specs = specs

    # helpers
    def all(self) -> tantivy.Query:
        return self.t.Query.all_query()

    def fast(self, field_name: str) -> bool:
        """Is the Tantivy field fast (exists queries need it; indexing.nonfastfields takes it away)?"""
        return any(f.fast for s in self.specs.values() for f in s.indexed_fields if f.name == field_name)

    def empty(self) -> tantivy.Query:
        return self.t.Query.empty_query()

    def must(self, qs: Iterable[tantivy.Query]) -> tantivy.Query:
        return self.t.Query.boolean_query([(self.t.Occur.Must, q) for q in qs])

    def should(self, qs: Iterable[tantivy.Query]) -> tantivy.Query:
        return self.t.Query.boolean_query([(self.t.Occur.Should, q) for q in qs])

    def must_not(self, q: tantivy.Query) -> tantivy.Query:
        return self.t.Query.boolean_query([(self.t.Occur.Must, self.all()), (self.t.Occur.MustNot, q)])

    def i64_range(
        self, field: str, lo: int | None, hi: int | None, inc_lo: bool = True, inc_hi: bool = True
    ) -> tantivy.Query:
        return self.t.Query.range_query(
            self.schema,
            field,
            self.t.FieldType.Integer,
            lo,
            hi,
            include_lower=inc_lo if lo is not None else True,
            include_upper=inc_hi if hi is not None else True,
        )

    def f64_range(self, field: str, lo: float | None, hi: float | None) -> tantivy.Query:
        if lo is None and hi is None:
            return self.t.Query.exists_query(field)
        return self.t.Query.range_query(self.schema, field, self.t.FieldType.Float, lo, hi)

    # translation: (query or None, exact)
    def build(self, f: Any) -> tuple[tantivy.Query | None, bool]:
        return self.visit(f)

    def visit_and(self, f: And) -> tuple[tantivy.Query | None, bool]:
        (left, le), (right, re_) = self.visit(f.left), self.visit(f.right)
        if left is None or right is None:
            return (left if right is None else right), False
        return self.must([left, right]), le and re_

    def visit_or(self, f: Or) -> tuple[tantivy.Query | None, bool]:
        (left, le), (right, re_) = self.visit(f.left), self.visit(f.right)
        if left is None or right is None:
            return None, False
        return self.should([left, right]), le and re_

    def visit_not(self, f: Not) -> tuple[tantivy.Query | None, bool]:
        q, exact = self.visit(f.child)
        if q is None or not exact:
            return None, False
        child = f.child
        if isinstance(child, (IsNull, IsNotNull, EqualNullSafe)):  # never NULL: NOT is the complement
            return self.must_not(q), True
        # NOT(leaf) is TRUE where the leaf is FALSE: a leaf with a non-NULL value is NULL exactly
        # where its column is, so the complement within the rows that have a value (an exists
        # query: fast fields only). Otherwise the complement keeps NULL rows too: a superset.
        if isinstance(child, _COMPARISONS) and getattr(child, "value", None) is None:
            return self.empty(), True  # NOT(c = NULL) is NULL
        if isinstance(child, _COMPARISONS + _STRING_MATCHES + (In,)) and not (
            isinstance(child, In) and any(v is None for v in child.values)
        ):
            name = self.exists_field(str(getattr(child, "column", "")))
            if name is not None:
                return self.must([self.t.Query.exists_query(name), self.must_not(q)]), True
        return self.must_not(q), False

    def exists_field(self, column: str) -> str | None:
        """The fast field an exists query on the column's values uses (None: it has none)."""
        spec = _lookup(self.specs, column)
        if spec is None or spec.partition or spec.kind in ("text", "json"):
            return None
        field = spec.exact_field if spec.kind in STRING_KINDS else spec.value_field
        return field.name if field is not None and field.fast else None

    def visit_comparison(self, f: Any) -> tuple[tantivy.Query | None, bool]:
        spec = _lookup(self.specs, f.column)
        if spec is None or spec.partition or not spec.indexed_fields:
            return None, False
        try:
            return self.leaf(f, spec)
        except _Incompatible:
            return None, False

    visit_in = visit_is_null = visit_is_not_null = visit_string_match = visit_comparison

    def leaf(self, f: Any, spec: ColumnSpec) -> tuple[tantivy.Query | None, bool]:
        kind = spec.kind
        field = spec.exact_field if kind in STRING_KINDS else spec.value_field
        if kind == "text":
            return self.text(f, spec), False
        if kind == "json" or field is None:
            return None, False
        name = field.name
        if isinstance(f, (IsNull, IsNotNull)):
            return self.exists(f, name) if field.fast else (None, False)
        if isinstance(f, _STRING_MATCHES):
            return self.pattern(f, spec, name)
        if isinstance(f, In):
            return self.in_(f, spec, name)
        if f.value is None:
            if isinstance(f, EqualNullSafe):
                return self.exists(IsNull(f.column), name) if field.fast else (None, False)
            return self.empty(), True
        op = _OPS[type(f)]
        v = _norm_value(kind, spec.spark_type, f.value)
        if kind in ("i64", "date", "timestamp"):
            return self.int_cmp(op, name, v), True
        if kind == "bool":
            if op == "eq":
                return self.t.Query.term_query(self.schema, name, v), True
            return None, False
        if kind in STRING_KINDS:
            if op != "eq":
                return None, False
            term = exact_term(v)
            return self.t.Query.term_query(self.schema, name, term), term == v and not spec.terms_truncated
        if kind == "f64":
            k = f64_key(v)
            lo, hi = {"eq": (k, k), "gt": (k, None), "ge": (k, None), "lt": (None, k), "le": (None, k)}[op]
            return self.f64_range(name, lo, hi), False
        if kind == "decimal":
            if not math.isfinite(float(v)):
                return None, False
            lo, hi = _decimal_bounds(v)
            lo, hi = {"eq": (lo, hi), "gt": (lo, None), "ge": (lo, None), "lt": (None, hi), "le": (None, hi)}[op]
            return self.f64_range(name, lo, hi), False
        return None, False

    def text(self, f: Any, spec: ColumnSpec) -> tantivy.Query | None:
        """Narrowing (never exact) of a string filter on a tokenized column by the terms its
        value implies (text.py); None when it implies none."""
        field = spec.value_field
        tok = field.tokenizer if field is not None else None
        if field is None or tok is None or not text_supported(tok):
            return None
        if isinstance(f, In):
            # NULL in the list never makes a row match (x IN (.., NULL) is true only on a match).
            values = [v for v in f.values if v is not None]
            if not values or not all(isinstance(v, str) for v in values):
                return None
            parts = [self.text_terms(v, field.name, tok, True, True, spec) for v in values]
            queries = [p for p in parts if p is not None]
            return None if len(queries) < len(parts) else self.should(queries)
        anchors = {
            EqualTo: (True, True),
            EqualNullSafe: (True, True),
            StringStartsWith: (True, False),
            StringEndsWith: (False, True),
            StringContains: (False, False),
        }.get(type(f))
        if anchors is None or not isinstance(f.value, str):
            return None
        return self.text_terms(f.value, field.name, tok, *anchors, spec)

    def text_terms(
        self, value: str, name: str, tok: str, left: bool, right: bool, spec: ColumnSpec
    ) -> tantivy.Query | None:
        limit = spec.value_field.token_limit if spec.value_field is not None else None
        implied = pattern_terms(value, tok, left, right, spec.fully_tokenized, limit)
        if implied.empty:
            return None
        qs = [self.t.Query.term_query(self.schema, name, t) for t in implied.terms]
        qs += [self.t.Query.regex_query(self.schema, name, r) for r in implied.regexes]
        return qs[0] if len(qs) == 1 else self.must(qs)

    def exists(self, f: Any, name: str) -> tuple[tantivy.Query | None, bool]:
        q = self.t.Query.exists_query(name)
        return (q if isinstance(f, IsNotNull) else self.must_not(q)), True

    def int_cmp(self, op: str, name: str, v: int) -> tantivy.Query:
        if v > _I64_MAX or v < _I64_MIN:
            above = v > _I64_MAX
            if op == "eq" or (op in ("gt", "ge")) == above:
                return self.empty()
            if not self.fast(name):  # (indexing.nonfastfields) every value: a range over them all
                return self.i64_range(name, _I64_MIN, _I64_MAX)
            return self.t.Query.exists_query(name)
        if op == "eq":
            return self.t.Query.term_query(self.schema, name, v)
        return {
            "gt": lambda: self.i64_range(name, v, None, inc_lo=False),
            "ge": lambda: self.i64_range(name, v, None),
            "lt": lambda: self.i64_range(name, None, v, inc_hi=False),
            "le": lambda: self.i64_range(name, None, v),
        }[op]()

    def in_(self, f: In, spec: ColumnSpec, name: str) -> tuple[tantivy.Query | None, bool]:
        kind = spec.kind
        vals = [_norm_value(kind, spec.spark_type, v) for v in f.values if v is not None]
        if not vals:
            return self.empty(), True
        if kind in ("i64", "date", "timestamp"):
            vals = [v for v in vals if _I64_MIN <= v <= _I64_MAX]
            return (self.t.Query.term_set_query(self.schema, name, vals) if vals else self.empty()), True
        if kind == "bool":
            return self.t.Query.term_set_query(self.schema, name, sorted(set(vals))), True
        if kind in STRING_KINDS:
            terms = [exact_term(v) for v in vals]
            exact = terms == vals and not spec.terms_truncated
            return self.t.Query.term_set_query(self.schema, name, terms), exact
        if len(vals) > 64:
            return None, False
        if kind == "f64":
            return self.should([self.f64_range(name, f64_key(v), f64_key(v)) for v in vals]), False
        if kind == "decimal":
            if not all(math.isfinite(float(v)) for v in vals):
                return None, False
            return self.should([self.f64_range(name, *_decimal_bounds(v)) for v in vals]), False
        return None, False

    def pattern(self, f: Any, spec: ColumnSpec, name: str) -> tuple[tantivy.Query | None, bool]:
        p = f.value
        if not isinstance(p, str) or len(p) > _MAX_PATTERN_CHARS:
            return None, False
        if p == "":
            return (self.t.Query.exists_query(name), True) if self.fast(name) else (None, False)
        esc = regex_escape(p)
        if isinstance(f, StringStartsWith):
            # Cut terms keep their first TRUNCATE_CHARS characters, so prefixes still match.
            return self.t.Query.regex_query(self.schema, name, "(?s)" + esc + ".*"), len(p) <= TRUNCATE_CHARS
        if spec.terms_truncated:
            return None, False
        regex = "(?s).*" + esc if isinstance(f, StringEndsWith) else "(?s).*" + esc + ".*"
        return self.t.Query.regex_query(self.schema, name, regex), True


def _decimal_bounds(v: decimal.Decimal) -> tuple[float, float]:
    """An f64 interval surely holding the indexed (f64-converted) value of any decimal equal to v."""
    x = float(v)
    margin = abs(x) * _DECIMAL_MARGIN + 1e-300
    return x - margin, x + margin


def build_query(
    schema: tantivy.Schema, filters: Sequence[Filter], specs: Mapping[str, ColumnSpec] | Iterable[ColumnSpec]
) -> tuple[tantivy.Query | None, bool]:
    """(query or None, exact): exact means the query matches exactly the rows passing the filters."""
    q = _Q(schema, specs_by_name(specs))
    parts: list[Any] = []
    exact = True
    for f in filters:
        sub, e = q.build(f)
        if sub is None:
            exact = False
        else:
            parts.append(sub)
            exact = exact and e
    if not parts:
        return None, not filters
    return (parts[0] if len(parts) == 1 else q.must(parts)), exact


def index_only_filters(
    filters: Sequence[Filter], specs: Mapping[str, ColumnSpec] | Iterable[ColumnSpec]
) -> tuple[list[Filter], list[Filter]]:
    """(the filters reading an index-only column, the others). The former are the index's to
    answer: the rows hold NULL in place of an index-only column (`indexing.indexonlyfields`)."""
    only = index_only_columns(specs_by_name(specs).values())
    if not only:
        return [], list(filters)
    on = [f for f in filters if any(_unquote(c).lower() in only for c in columns_of(f))]
    return on, [f for f in filters if not any(f is g for g in on)]


def index_only_query(
    schema: tantivy.Schema,
    filters: Sequence[Filter],
    specs: Mapping[str, ColumnSpec] | Iterable[ColumnSpec],
    where: str,
) -> tantivy.Query | None:
    """The index's exact answer to filters on index-only columns (None without filters). A filter
    the index answers only approximately (a superset the rows would re-check) has no answer: the
    rows do not hold the column, so UnsupportedFilterError names the filter and the column."""
    by_name = specs_by_name(specs)
    q = _Q(schema, by_name)
    parts = []
    for f in filters:
        sub, exact = q.build(f)
        if sub is None or not exact:
            raise UnsupportedFilterError(index_only_message(f, by_name, where))
        parts.append(sub)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else q.must(parts)


def _index_only_subject(f: Filter, specs: Mapping[str, ColumnSpec], where: str) -> tuple[str, list[str]]:
    from indextables_spark.expr.model import render

    cols = sorted({_unquote(c) for c in columns_of(f) if (s := _lookup(specs, c)) is not None and s.index_only})
    plural = "s" if len(cols) > 1 else ""
    return f"filter {render(f)} on index-only column{plural} {', '.join(map(repr, cols))} ({where})", cols


def index_only_message(f: Filter, specs: Mapping[str, ColumnSpec], where: str) -> str:
    subject, cols = _index_only_subject(f, specs, where)
    lost = [c for c in cols if (s := _lookup(specs, c)) is not None and not s.indexed_fields]
    if lost:
        return (
            f"{subject}: {', '.join(map(repr, lost))} is an index-only field of a split IndexTables4Spark wrote "
            f"(indexing.indexonlyfields): its values are not in the split's document store, and tantivy-py cannot "
            f"read the reference's term dictionaries, so no filter on it can be answered here (it reads as NULL)"
        )
    kinds = sorted({s.kind for c in cols if (s := _lookup(specs, c)) is not None})
    return (
        f"{subject}: the rows do not hold an index-only column (indexing.indexonlyfields; it reads as NULL), "
        f"and the index answers this filter only approximately (column kind {'/'.join(kinds)}). The index "
        f"answers exactly: =, IN, IS [NOT] NULL and LIKE 'prefix%' on strings (not on tokenized text), "
        f"comparisons on integers, dates and timestamps, = on booleans, AND/OR of those and NOT of one; search text "
        f"with a query (`{cols[0] if cols else 'column'}:term`, it.fieldmatch, indexquery)"
    )


def check_index_only(
    filters: Sequence[Filter], specs: Mapping[str, ColumnSpec] | Iterable[ColumnSpec], where: str
) -> list[Filter]:
    """The filters on index-only columns, checked before any split is read: each must be answered
    exactly by the index (UnsupportedFilterError otherwise) and must not read a partition column
    (those are decided on the rows). Per split the reader checks again with its own doc mapping."""
    from indextables_spark.core.split.doc_mapping import tantivy_schema

    by_name = specs_by_name(specs)
    on, _ = index_only_filters(filters, by_name)
    if not on:
        return []
    for f in on:
        if any((s := _lookup(by_name, c)) is not None and s.partition for c in columns_of(f)):
            raise UnsupportedFilterError(
                f"{_index_only_subject(f, by_name, where)[0]}: it also reads a partition column; the index "
                f"answers filters on an index-only column, the log those on partition columns: filter each in "
                f"its own condition (AND)"
            )
    index_only_query(tantivy_schema([s for s in by_name.values() if not s.partition]), on, by_name, where)
    return on


def tantivy_query(
    index: tantivy.Index, filters: Sequence[Filter], specs: Mapping[str, ColumnSpec] | Iterable[ColumnSpec]
) -> tantivy.Query | None:
    """A Tantivy query matching a superset of the rows satisfying the filters; None = no narrowing."""
    q, _ = build_query(index.schema, filters, specs)
    return q


# ---------------------------------------------------------------------------------------------
# Data skipping with min/max stats


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


def _bounds(add_file: Any, spec: ColumnSpec, nulls: dict[str, int], prefix_max: bool = False) -> _Bounds:
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

    def __init__(self, add_file: Any, specs: Mapping[str, ColumnSpec], nulls: dict[str, int], prefix_max: bool):
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

    def visit_comparison(self, f: Any) -> bool:
        return _cannot_match_leaf(f, self.add_file, self.specs, self.nulls, self.prefix_max)

    visit_in = visit_is_null = visit_is_not_null = visit_string_match = visit_comparison


def _cannot_match(
    f: Any, add_file: Any, specs: Mapping[str, ColumnSpec], nulls: dict[str, int], prefix_max: bool = False
) -> bool:
    return _CannotMatch(add_file, specs, nulls, prefix_max).visit(f)


def _cannot_match_leaf(
    f: Any, add_file: Any, specs: Mapping[str, ColumnSpec], nulls: dict[str, int], prefix_max: bool = False
) -> bool:
    spec = _lookup(specs, f.column)
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
            vals = [order_key(spec.kind, _norm_value(spec.kind, spec.spark_type, v)) for v in f.values if v is not None]
            return all(_outside_bounds(b, v) for v in vals)
        if isinstance(f, _STRING_MATCHES):
            return isinstance(f, StringStartsWith) and spec.kind in STRING_KINDS and _prefix_outside(b, f.value)
        if f.value is None:
            return True  # x = NULL is never true
        v = order_key(spec.kind, _norm_value(spec.kind, spec.spark_type, f.value))
    except _Incompatible:
        return False
    op = _OPS[type(f)]
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
    add_file: Any,
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
    partition_types: Mapping[str, Any],
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


def _hashable(t: Any) -> Any:
    return t if isinstance(t, str) else repr(t)


@functools.lru_cache(maxsize=4096)
def _partition_matches(
    values: tuple[tuple[str, str | None], ...], filters: tuple[Filter, ...], types: tuple[tuple[str, Any], ...]
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
