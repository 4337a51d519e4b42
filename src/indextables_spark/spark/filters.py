"""Spark's pushed filters (pyspark.sql.datasource) → the core's filter model (expr/model.py)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Sequence

from pyspark.sql import datasource as sds

from indextables_spark.expr.model import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from indextables_spark.expr.struct_narrowing import struct_narrowing

if TYPE_CHECKING:
    from indextables_spark.core.schema.types import ColumnSpec
    from indextables_spark.expr.model import Comparison, Filter, StringMatch

_BINARY: dict[type[sds.Filter], type[Comparison | StringMatch]] = {
    sds.EqualTo: EqualTo,
    sds.EqualNullSafe: EqualNullSafe,
    sds.GreaterThan: GreaterThan,
    sds.GreaterThanOrEqual: GreaterThanOrEqual,
    sds.LessThan: LessThan,
    sds.LessThanOrEqual: LessThanOrEqual,
    sds.StringStartsWith: StringStartsWith,
    sds.StringEndsWith: StringEndsWith,
    sds.StringContains: StringContains,
}


def _column(attr: Sequence[str]) -> str | None:
    """Top-level column name; None for nested references (not pushed)."""
    if isinstance(attr, (tuple, list)):
        return attr[0] if len(attr) == 1 else None
    return str(attr)


def _value(v: Any, spark_type: str | None) -> Any:
    # PySpark hands timestamp literals over as aware datetimes in the session time zone.
    if isinstance(v, dt.datetime) and spark_type == "timestamp":
        return v.astimezone(dt.timezone.utc) if v.tzinfo else v.replace(tzinfo=dt.timezone.utc)
    if isinstance(v, list):
        return tuple(_value(x, spark_type) for x in v)
    return v


# `f` below: a pyspark.sql.datasource Filter, duck-typed (every kind but Not has `.attribute`).


def nested_narrowing(f: Any, specs: dict[str, ColumnSpec]) -> str | None:
    """The json-field narrowing (expr.struct_narrowing) of a Spark filter on a struct
    field (`=` / `IN` on an attribute path such as ('user', 'name')), or None. Spark re-checks."""
    if isinstance(f, sds.In) and isinstance(f.attribute, (tuple, list)):
        return struct_narrowing(list(f.attribute), list(f.value), specs)
    ops = {
        sds.EqualTo: "=",
        sds.GreaterThan: ">",
        sds.GreaterThanOrEqual: ">=",
        sds.LessThan: "<",
        sds.LessThanOrEqual: "<=",
    }
    if type(f) in ops and isinstance(f.attribute, (tuple, list)):
        return struct_narrowing(list(f.attribute), [f.value], specs, ops[type(f)])
    return None


def convert(f: Any, column_types: dict[str, str]) -> Filter | None:
    """The core filter for a Spark filter, or None when it cannot be represented."""
    if isinstance(f, sds.Not):
        child = convert(f.child, column_types)
        return None if child is None else Not(child)
    col = _column(f.attribute)
    if col is None or col not in column_types:
        return None
    t = column_types[col]
    if isinstance(f, sds.IsNull):
        return IsNull(col)
    if isinstance(f, sds.IsNotNull):
        return IsNotNull(col)
    if isinstance(f, sds.In):
        return In(col, tuple(_value(v, t) for v in f.value))
    cls = _BINARY.get(type(f))
    if cls is None:
        return None
    if isinstance(f.value, (list, tuple, dict)):  # array/map literals: not pushed
        return None
    return cls(col, _value(f.value, t))
