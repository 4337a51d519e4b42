"""What a source reader returns: the data files of a Delta, Iceberg or Parquet source at one
version, with the Arrow schema and the partition values as Spark and Delta have them."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from indextables_spark.ops.companion.nested_fields import SourceNesting
    from indextables_spark.ops.companion.sources.deletion_vectors import DeletionVector


@dataclass(frozen=True)
class SourceFile:
    key: str  # identity used by sync: the path the source records
    # (Delta/Parquet: relative to the root; Iceberg: absolute)
    uri: str  # full URI / absolute local path to read the file from
    size: int  # bytes, as recorded by the source (checked at read time)
    num_records: int | None  # rows, when the source records it
    partition_values: dict[str, str | None] = field(default_factory=dict)  # partition column -> value as text
    # Rows the source deleted without rewriting the file: Iceberg delete files as sorted positions
    # in the file (`deleted`); Delta its deletion vector (read when needed) and the version of the
    # file's current add action (a sync takes up vectors changed since the version it indexed).
    # The companion logs them as POSITIONAL deletes of the split (ops/companion/deletes.py)
    deleted: tuple[int, ...] = ()
    deletion_vector: DeletionVector | None = None
    log_version: int | None = None
    # Files of one value may share a split (Iceberg: the spec and partition tuple, transforms included,
    # so a split's min/max of a transform's source column stays within one partition)
    cluster: str | None = None


@dataclass(frozen=True)
class SourceSnapshot:
    format: str  # "delta" | "iceberg" | "parquet"
    source: str  # what the user named (path or Iceberg identifier)
    root: str  # the table's root URI
    version: int | None  # Delta version / Iceberg snapshot id / None (Parquet)
    schema: pa.Schema  # every column (partition columns included), Arrow types
    # as Spark reads them (string, not large_string; timestamp[us, UTC])
    partition_columns: list[str]
    files: list[SourceFile]
    # How the files name the columns (ops/companion/rows.py): logical column -> physical name in
    # the files (Delta column mapping; empty without), and top-level column -> Parquet field id
    # (Iceberg; Delta column mapping mode `id`): a file that carries field ids is read by id
    physical_names: dict[str, str] = field(default_factory=dict)
    field_ids: dict[str, int] = field(default_factory=dict)
    # column -> its nested struct fields as the source names them, for the columns whose type
    # holds a struct (Delta column mapping, Iceberg; ops/companion/nested_fields.py)
    nested: dict[str, SourceNesting] = field(default_factory=dict)
    bloom_columns: tuple[str, ...] = ()  # Iceberg: source columns of bucket partitions (Bloom-filtered)


def normalize_schema(schema: pa.Schema) -> pa.Schema:
    """Arrow types as Spark reads them: string/binary/list instead of their large and view variants,
    timestamps in microseconds (tz-aware ones in UTC, naive ones naive), no field or schema
    metadata (Iceberg field ids, pandas metadata). Nullability is kept."""
    return pa.schema([_normalize_field(f) for f in schema])


def _normalize_field(f: pa.Field) -> pa.Field:
    return pa.field(f.name, _normalize_type(f.type), nullable=f.nullable)


def _normalize_type(t: pa.DataType) -> pa.DataType:
    types = pa.types
    if types.is_large_string(t) or types.is_string_view(t):
        return pa.string()
    if types.is_large_binary(t) or types.is_binary_view(t):
        return pa.binary()
    if types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC" if t.tz else None)
    if types.is_dictionary(t):
        return _normalize_type(t.value_type)
    if (
        types.is_list(t)
        or types.is_large_list(t)
        or types.is_fixed_size_list(t)
        or types.is_list_view(t)
        or types.is_large_list_view(t)
    ):
        return pa.list_(_normalize_field(t.value_field))
    if types.is_map(t):
        return pa.map_(_normalize_field(t.key_field), _normalize_field(t.item_field), keys_sorted=t.keys_sorted)
    if types.is_struct(t):
        return pa.struct([_normalize_field(t.field(i)) for i in range(t.num_fields)])
    return t


EPOCH = _dt.datetime(1970, 1, 1)


def partition_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return f"{text}.{value.microsecond:06d}" if value.microsecond else text
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()  # rare (binary partition columns); hex keeps it printable and exact
    return str(value)
