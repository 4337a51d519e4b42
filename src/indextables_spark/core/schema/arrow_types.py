"""Spark type JSON ↔ Arrow types, as PySpark converts them with timezone "UTC" (the package's own
mapping: pyspark's private converters changed between 4.1 and 4.3)."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import pyarrow as pa

from indextables_spark.core.schema.types import (
    SparkType,
    check_nested,
    decimal_precision_scale,
    is_string_type,
    schema_fields,
    type_name,
)
from indextables_spark.errors import SchemaMismatchError, UnsupportedTypeError

# Spark's key for a field's metadata in Arrow field metadata (ArrowUtils.metadataKey).
SPARK_METADATA_KEY = b"SPARK::metadata::json"
# Where a field's string collations live in the schema JSON; PySpark moves them into the type
# (a StructField's metadata never has them), so Arrow never carries them.
_COLLATIONS_KEY = "__COLLATIONS"


def _arrow_field_metadata(field_json: Mapping[str, Any]) -> dict[bytes, bytes] | None:
    md = {k: v for k, v in (field_json.get("metadata") or {}).items() if k != _COLLATIONS_KEY}
    return {SPARK_METADATA_KEY: json.dumps(md).encode("utf-8")} if md else None


def _arrow_field(field_json: Mapping[str, Any], field_metadata: bool) -> pa.Field:
    return pa.field(
        field_json["name"],
        arrow_type(field_json["type"], field_metadata=field_metadata),
        nullable=bool(field_json.get("nullable", True)),
        metadata=_arrow_field_metadata(field_json) if field_metadata else None,
    )


def cast_or_fail(
    col: pa.Array | pa.ChunkedArray, to: pa.DataType, error: type[Exception], message: str
) -> pa.Array | pa.ChunkedArray:
    """An Arrow array or chunked array cast to `to`; where Arrow cannot, `error` saying the message
    and Arrow's reason."""
    try:
        return col.cast(to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise error(f"{message}: {e}") from None


def arrow_type(spark_type: SparkType, *, field_metadata: bool = False) -> pa.DataType:
    """Arrow type of a Spark type JSON, as PySpark converts it with timezone "UTC": string/binary
    are the 32-bit-offset kinds, timestamp is timestamp("us", "UTC"), timestamp_ntz
    timestamp("us"), arrays hold "element", maps "key" (never null) and "value".
    With `field_metadata`, struct fields carry their Spark metadata as PySpark puts it."""
    if isinstance(spark_type, dict):
        t = spark_type.get("type")
        if t == "array":
            return pa.list_(
                pa.field(
                    "element",
                    arrow_type(spark_type["elementType"], field_metadata=field_metadata),
                    nullable=bool(spark_type.get("containsNull", True)),
                )
            )
        if t == "map":
            return pa.map_(
                pa.field("key", arrow_type(spark_type["keyType"], field_metadata=field_metadata), nullable=False),
                pa.field(
                    "value",
                    arrow_type(spark_type["valueType"], field_metadata=field_metadata),
                    nullable=bool(spark_type.get("valueContainsNull", True)),
                ),
            )
        if t == "struct":
            return pa.struct([_arrow_field(f, field_metadata) for f in spark_type.get("fields") or []])
        raise UnsupportedTypeError(f"unsupported Spark type {type_name(spark_type)!r}")
    t = str(spark_type).strip().lower()
    simple = {
        "byte": pa.int8(),
        "short": pa.int16(),
        "integer": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "boolean": pa.bool_(),
        "binary": pa.binary(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "timestamp_ntz": pa.timestamp("us"),
    }
    if t in simple:
        return simple[t]
    if is_string_type(t):
        return pa.string()
    ps = decimal_precision_scale(t)
    if ps is not None:
        return pa.decimal128(*ps)
    raise UnsupportedTypeError(f"unsupported Spark type {type_name(spark_type)!r}")


def arrow_schema(
    schema_json: Mapping[str, Any], columns: Sequence[str] | None = None, *, field_metadata: bool = False
) -> pa.Schema:
    """Arrow schema of (some of) the columns, nullability from the Spark schema.

    With `field_metadata` it is exactly what PySpark's `to_arrow_schema(schema, timezone="UTC")`
    returns (field metadata included): the schema Spark expects of a Python data source's batches.
    """
    fields = schema_fields(schema_json)
    by_name = {f["name"]: f for f in fields}
    if columns is None:
        chosen = fields
    else:
        missing = [c for c in columns if c not in by_name]
        if missing:
            raise SchemaMismatchError(f"columns {missing} are not in the schema (columns: {list(by_name)})")
        chosen = [by_name[c] for c in columns]
    out = []
    for f in chosen:
        try:
            out.append(_arrow_field(f, field_metadata))
        except UnsupportedTypeError:
            check_nested(f["name"], f["name"], f["type"])
            raise
    return pa.schema(out)


def _spark_field_json(f: pa.Field) -> dict[str, Any]:
    md = (f.metadata or {}).get(SPARK_METADATA_KEY)
    return {
        "name": f.name,
        "type": spark_type_json(f.type),
        "nullable": f.nullable,
        "metadata": json.loads(md.decode("utf-8")) if md else {},
    }


def spark_type_json(t: pa.DataType) -> Any:
    """Spark type JSON of an Arrow type, as PySpark's `from_arrow_type` maps it (the timestamp unit
    is ignored; a timestamp without time zone is timestamp_ntz; dictionaries map to their values)."""
    types = pa.types
    if types.is_boolean(t):
        return "boolean"
    simple = (
        (types.is_int8, "byte"),
        (types.is_int16, "short"),
        (types.is_int32, "integer"),
        (types.is_int64, "long"),
        (types.is_float32, "float"),
        (types.is_float64, "double"),
        (types.is_date32, "date"),
        (types.is_null, "void"),
    )
    for test, name in simple:
        if test(t):
            return name
    if types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if types.is_string(t) or types.is_large_string(t):
        return "string"
    if types.is_binary(t) or types.is_large_binary(t) or types.is_fixed_size_binary(t):
        return "binary"
    if types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
        return {"type": "array", "elementType": spark_type_json(t.value_type), "containsNull": t.value_field.nullable}
    if types.is_map(t):
        return {
            "type": "map",
            "keyType": spark_type_json(t.key_type),
            "valueType": spark_type_json(t.item_type),
            "valueContainsNull": t.item_field.nullable,
        }
    if types.is_struct(t):
        return {"type": "struct", "fields": [_spark_field_json(t.field(i)) for i in range(t.num_fields)]}
    if types.is_dictionary(t):
        return spark_type_json(t.value_type)
    raise UnsupportedTypeError(f"Arrow type {t} has no Spark type here{_cast_hint(t)}")


def _cast_hint(t: pa.DataType) -> str:
    """The cast that makes a column writable, for the types users meet (unsigned 64-bit ids, half
    floats, durations)."""
    if pa.types.is_uint64(t):
        return ": cast the column to int64 (values below 2**63) or to decimal(20, 0) before writing"
    if pa.types.is_unsigned_integer(t) or pa.types.is_float16(t):
        return ": cast the column to a signed integer or to float32/float64 before writing"
    if pa.types.is_duration(t):
        return ": cast the column to int64 (a count of its unit) before writing"
    return ": cast the column to a type Spark has before writing"


def spark_schema_json(schema: pa.Schema) -> dict[str, Any]:
    """Spark StructType JSON of an Arrow schema (what `StructType.fromJson` takes), as PySpark's
    `from_arrow_schema` maps it."""
    return {"type": "struct", "fields": [_spark_field_json(f) for f in schema]}
