"""Filter values and columns: a filter value in the comparable domain of a column kind, the column
spec a filter names (backticks, case), the shared tables of filter classes. Filter values are Python
values as PySpark gives them: int, float, str, bool, bytes, decimal.Decimal, datetime.date,
datetime.datetime (aware for timestamp columns, naive for timestamp_ntz)."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any, Mapping, Sequence

from indextables_spark.core.schema.partitions import date_to_days, datetime_to_micros
from indextables_spark.core.schema.types import STRING_KINDS, ColumnSpec, SparkType
from indextables_spark.errors import IndexTablesError
from indextables_spark.expr.model import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    LessThan,
    LessThanOrEqual,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)


class UnsupportedFilterError(IndexTablesError):
    """A filter cannot be evaluated on a column (wrong value type, unsupported column kind)."""


OP_CODES = {
    EqualTo: "eq",
    EqualNullSafe: "eq",
    GreaterThan: "gt",
    GreaterThanOrEqual: "ge",
    LessThan: "lt",
    LessThanOrEqual: "le",
}
COMPARISONS = tuple(OP_CODES)
STRING_MATCHES = (StringStartsWith, StringEndsWith, StringContains)
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


def unquote_column(name: str) -> str:
    return name[1:-1].replace("``", "`") if len(name) > 1 and name[0] == name[-1] == "`" else name


def lookup_spec(specs: Mapping[str, ColumnSpec], column: str) -> ColumnSpec | None:
    name = unquote_column(column)
    s = specs.get(name)
    if s is not None:
        return s
    matches = [v for k, v in specs.items() if k.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else None


# ---------------------------------------------------------------------------------------------
# Values: filter value → the comparable domain of a column kind


class IncompatibleValue(Exception):
    """Internal: a value does not fit a column kind."""


def column_value(kind: str, spark_type: SparkType, v: Any) -> Any:
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
    raise IncompatibleValue(f"{v!r} ({type(v).__name__})")


def value_fits(spec: ColumnSpec, v: Any) -> bool:
    try:
        column_value(spec.kind, spec.spark_type, v)
        return True
    except IncompatibleValue:
        return False


def struct_column(name: str, names: Sequence[str]) -> str | None:
    """The column holding a dotted struct path (`user.name` → `user`) when no column has that name."""
    if name in names or "." not in name:
        return None
    head = name.split(".", 1)[0]
    return head if head in names else None
