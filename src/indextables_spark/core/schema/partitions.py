"""Partition values: typed value ↔ the string kept in `partitionValues`, and Hive-style paths.

String encoding (what the log stores; null is None, never a string):
- string: the value itself; integers: decimal digits; boolean: `true`/`false`
- float/double: Python `repr` for finite values, `NaN`, `Infinity`, `-Infinity` otherwise
- decimal: plain notation (`12.50`, never exponent form)
- date: ISO `YYYY-MM-DD`
- timestamp: `YYYY-MM-DD HH:MM:SS[.ffffff]` in UTC; timestamp_ntz: the same, wall clock
Paths escape the characters Spark/Hive escape (`%XX`); null becomes `__HIVE_DEFAULT_PARTITION__`.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any, Mapping, Sequence

import pyarrow as pa

from indextables_spark.core.schema.types import SparkType
from indextables_spark.errors import SchemaMismatchError

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=UTC)

# Characters Spark's ExternalCatalogUtils.escapePathName escapes.
_ESCAPE = set(chr(c) for c in range(0x01, 0x20)) | set("\"#%'*/:=?\\\x7f{[]^")


def escape_path_name(s: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in s)


def unescape_path_name(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        if s[i] == "%" and _is_hex(s[i + 1 : i + 3]):
            out.append(chr(int(s[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def _is_hex(s: str) -> bool:
    return len(s) == 2 and all(c in "0123456789abcdefABCDEF" for c in s)


def partition_path(partition_columns: Sequence[str], values: Mapping[str, str | None]) -> str:
    """`col=value/col2=value2` (no trailing slash); empty string when unpartitioned."""
    parts = []
    for c in partition_columns:
        v = values.get(c)
        parts.append(f"{escape_path_name(c)}={HIVE_DEFAULT_PARTITION if v is None else escape_path_name(v)}")
    return "/".join(parts)


def _type_str(spark_type: SparkType) -> str:
    return str(spark_type).strip().lower() if not isinstance(spark_type, dict) else str(spark_type.get("type"))


def format_float(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(float(v))


def micros_to_text(micros: int) -> str:
    t = _EPOCH + dt.timedelta(microseconds=micros)
    return t.isoformat(sep=" ", timespec="microseconds" if t.microsecond else "seconds")


def datetime_to_micros(v: dt.datetime) -> int:
    """Exact microseconds since the epoch (aware: UTC instant; naive: wall clock as if UTC)."""
    delta = v - (_EPOCH_UTC if v.tzinfo is not None else _EPOCH)
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def date_to_days(v: dt.date) -> int:
    return (v - dt.date(1970, 1, 1)).days


def format_partition_value(value: Any, spark_type: SparkType) -> str | None:
    """The `partitionValues` string of a typed partition value (None stays None)."""
    if value is None:
        return None
    t = _type_str(spark_type)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_float(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        return micros_to_text(datetime_to_micros(value))
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, int):
        if t in ("timestamp", "timestamp_ntz"):
            return micros_to_text(value)
        return str(value)
    if isinstance(value, str):
        return value
    raise SchemaMismatchError(
        f"partition value {value!r} of type {type(value).__name__} cannot be used for a {t} partition column"
    )


def parse_partition_value(text: str | None, spark_type: SparkType) -> Any:
    """The typed Python value of a `partitionValues` string (for the column's Spark type)."""
    if text is None:
        return None
    t = _type_str(spark_type)
    try:
        if t in ("byte", "short", "integer", "long"):
            return int(text)
        if t in ("float", "double"):
            return float(text)
        if t == "boolean":
            low = text.strip().lower()
            if low not in ("true", "false"):
                raise ValueError(text)
            return low == "true"
        if t == "date":
            return dt.date.fromisoformat(text)
        if t == "timestamp":
            v = dt.datetime.fromisoformat(text)
            return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
        if t == "timestamp_ntz":
            return dt.datetime.fromisoformat(text).replace(tzinfo=None)
        if t.startswith("decimal"):
            return decimal.Decimal(text)
    except (ValueError, decimal.InvalidOperation):
        raise SchemaMismatchError(f"partition value {text!r} is not a valid {t}") from None
    return text


def spark_type_of_arrow(t: pa.DataType) -> str | None:
    """The Spark type name of an atomic Arrow type (`long`, `timestamp_ntz`, `binary`, ...); None
    for nested and other types."""
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return "long"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    return None


def partition_value_array(value: str | None, arrow_type: pa.DataType, n: int) -> pa.Array:
    """A constant column of n rows holding a partition value (for rebuilding full rows)."""
    if value is None:
        return pa.nulls(n, type=arrow_type)
    py = parse_partition_value(value, spark_type_of_arrow(arrow_type) or "string")  # other types: as text
    try:
        scalar = pa.scalar(py, type=arrow_type)
    except (OverflowError, pa.ArrowException) as e:  # out of range for the column, NaN decimal, ...
        raise SchemaMismatchError(
            f"partition value {value!r} does not fit the column type {arrow_type} ({e})"
        ) from None
    return pa.repeat(scalar, n)
