"""Spark's pushed filters (pyspark.sql.datasource) → the core's filter model (split.filters)."""
from __future__ import annotations

import datetime as dt

from pyspark.sql import datasource as sds

from ..split import filters as F

_BINARY = {
    sds.EqualTo: F.EqualTo,
    sds.EqualNullSafe: F.EqualNullSafe,
    sds.GreaterThan: F.GreaterThan,
    sds.GreaterThanOrEqual: F.GreaterThanOrEqual,
    sds.LessThan: F.LessThan,
    sds.LessThanOrEqual: F.LessThanOrEqual,
    sds.StringStartsWith: F.StringStartsWith,
    sds.StringEndsWith: F.StringEndsWith,
    sds.StringContains: F.StringContains,
}


def _column(attr) -> str | None:
    """Top-level column name; None for nested references (not pushed)."""
    if isinstance(attr, (tuple, list)):
        return attr[0] if len(attr) == 1 else None
    return str(attr)


def _value(v, spark_type: str | None):
    # PySpark hands timestamp literals over as aware datetimes in the session time zone.
    if isinstance(v, dt.datetime) and spark_type == "timestamp":
        return v.astimezone(dt.timezone.utc) if v.tzinfo else v.replace(tzinfo=dt.timezone.utc)
    if isinstance(v, list):
        return tuple(_value(x, spark_type) for x in v)
    return v


def nested_narrowing(f, specs: dict) -> str | None:
    """A Tantivy query (text) matching a superset of the rows where a filter on a struct field
    holds — `user.name = 'Bob Smith'` → `user.name:"bob smith"` in the column's json field — or None.

    Only `=` and `IN` on string, integer and boolean fields of struct columns indexed with the
    default tokenizer: a string's tokens as a phrase (every token indexed, none cut for length),
    an integer or boolean as a term of its JSON type. Spark re-checks the filter on the rows."""
    if isinstance(f, sds.In):
        parts = [nested_narrowing(sds.EqualTo(f.attribute, v), specs) for v in f.value]
        if not parts or any(p is None for p in parts):
            return None
        return "(" + " OR ".join(parts) + ")"
    if not isinstance(f, sds.EqualTo) or not isinstance(f.attribute, (tuple, list)) or len(f.attribute) < 2:
        return None
    spec = specs.get(f.attribute[0])
    if spec is None or spec.kind != "json" or spec.partition or not spec.indexed_fields:
        return None
    field_type = _struct_field_type(spec.spark_type, list(f.attribute[1:]))
    field = spec.indexed_fields[0]
    if field.tokenizer not in (None, "default") or field.record != "position":
        return None
    path = ".".join([field.name, *f.attribute[1:]])
    if not all(str(p).replace("_", "").isalnum() for p in f.attribute[1:]):
        return None                      # a path the query syntax would need to escape
    v = f.value
    if field_type == "string" and isinstance(v, str):
        from ..split.text import analyzer

        tokens = analyzer("default").analyze(v)
        if not tokens or any(len(t.encode()) >= 40 for t in v.split()) or len(tokens) > 16:
            return None
        return f'{path}:"{" ".join(tokens)}"' if len(tokens) > 1 else f"{path}:{tokens[0]}"
    if field_type in ("byte", "short", "integer", "long") and isinstance(v, int) and not isinstance(v, bool):
        return f"{path}:{v}" if v >= 0 else None
    if field_type == "boolean" and isinstance(v, bool):
        return f"{path}:{'true' if v else 'false'}"
    return None


def _struct_field_type(spark_type, path: list) -> str | None:
    t = spark_type
    for name in path:
        if not isinstance(t, dict) or t.get("type") != "struct":
            return None
        match = next((x for x in t.get("fields", []) if x.get("name") == name), None)
        if match is None:
            return None
        t = match.get("type")
    return t if isinstance(t, str) else None


def convert(f, column_types: dict[str, str]):
    """The core filter for a Spark filter, or None when it cannot be represented."""
    if isinstance(f, sds.Not):
        child = convert(f.child, column_types)
        return None if child is None else F.Not(child)
    col = _column(f.attribute)
    if col is None or col not in column_types:
        return None
    t = column_types[col]
    if isinstance(f, sds.IsNull):
        return F.IsNull(col)
    if isinstance(f, sds.IsNotNull):
        return F.IsNotNull(col)
    if isinstance(f, sds.In):
        return F.In(col, tuple(_value(v, t) for v in f.value))
    cls = _BINARY.get(type(f))
    if cls is None:
        return None
    if isinstance(f.value, (list, tuple, dict)):  # array/map literals: not pushed
        return None
    return cls(col, _value(f.value, t))
