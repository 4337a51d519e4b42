"""Plain Parquet directories (hive partitions `k=v`, as Spark writes them) through our storage
layer: the data files Spark would read, their footers (ranged reads), one schema for all."""

from __future__ import annotations

import datetime as _dt
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import unquote

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.core import storage as storage_layer
from indextables_spark.config.redaction import redact_uri
from indextables_spark.errors import SchemaMismatchError, TableNotFoundError
from indextables_spark.ops.companion.sources.libraries import describe_error
from indextables_spark.ops.companion.sources.locations import file_uri
from indextables_spark.ops.companion.sources.snapshot import SourceFile, SourceSnapshot, normalize_schema

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_FOOTER_TAIL = 64 << 10  # one ranged read fetches most footers whole
_FOOTER_THREADS = 16
_INT = re.compile(r"[+-]?\d+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _hidden_segment(segment: str) -> bool:
    """Spark's rule for paths it skips: '_x' (unless a partition 'k=v'), '.x'."""
    return segment.startswith(".") or (segment.startswith("_") and "=" not in segment)


def _is_data_key(key: str) -> bool:
    segments = key.split("/")
    return key.lower().endswith(".parquet") and not any(_hidden_segment(s) for s in segments)


def _hive_partitions(key: str) -> list[tuple[str, str | None]]:
    """(column, value) of the `k=v` directories of a key, decoded (Spark percent-escapes both)."""
    out = []
    for segment in key.split("/")[:-1]:
        if "=" not in segment:
            continue
        k, v = segment.split("=", 1)
        value = unquote(v)
        out.append((unquote(k), None if value in (HIVE_NULL, "") else value))
    return out


def _infer_partition_type(values: list[str | None]) -> pa.DataType:
    """Spark's partition discovery, reduced: integers -> int32 (int64 when too big), ISO dates ->
    date32, anything else -> string; nulls do not count."""
    present = [v for v in values if v is not None]
    if not present:
        return pa.string()
    if all(_INT.fullmatch(v) for v in present):
        ints = [int(v) for v in present]
        if all(-(1 << 31) <= i < (1 << 31) for i in ints):
            return pa.int32()
        if all(-(1 << 63) <= i < (1 << 63) for i in ints):
            return pa.int64()
        return pa.string()
    if all(_DATE.fullmatch(v) and _valid_date(v) for v in present):
        return pa.date32()
    return pa.string()


def _valid_date(text: str) -> bool:
    try:
        _dt.date.fromisoformat(text)
        return True
    except ValueError:
        return False


@dataclass(frozen=True)
class _Footer:
    schema: pa.Schema
    num_rows: int


def _read_footer(storage: storage_layer.Storage, key: str, size: int) -> _Footer:
    """The Parquet footer through ranged reads: the tail (64 KiB), then more only for big footers."""
    import pyarrow.parquet as pq  # lazy: only a Parquet source needs it; keeps importing the readers cheap

    where = storage.full_uri(key)
    if size < 12:
        raise SchemaMismatchError(f"{where} is not a Parquet file ({size} bytes)")
    start = max(0, size - _FOOTER_TAIL)
    tail = storage.read_range(key, start, size)
    if tail[-4:] != b"PAR1":
        kind = "an encrypted Parquet file" if tail[-4:] == b"PARE" else "not a Parquet file"
        raise SchemaMismatchError(f"{where} is {kind} (no PAR1 magic at its end)")
    length = int.from_bytes(tail[-8:-4], "little")
    if length + 12 > size:
        raise SchemaMismatchError(f"{where} is not a valid Parquet file (footer length {length} > file size {size})")
    if length + 8 > len(tail):
        tail = storage.read_range(key, size - length - 8, size)
    try:
        meta = pq.read_metadata(pa.BufferReader(tail[-(length + 8) :]))
    except (pa.ArrowException, OSError) as e:
        raise SchemaMismatchError(f"{where} is not a valid Parquet file: {describe_error(e)}") from None
    return _Footer(meta.schema.to_arrow_schema(), int(meta.num_rows))


def _schema_difference(a: pa.Schema, b: pa.Schema) -> str | None:
    """How two file schemas differ in column names or types (nullability aside), or None."""
    if a.names != b.names:
        return f"columns {a.names} vs {b.names}"
    for fa, fb in zip(a, b):
        if fa.type != fb.type:
            return f"column {fa.name!r} is {fa.type} vs {fb.type}"
    return None


def open_parquet(source: str, opts: Options) -> SourceSnapshot:
    storage = storage_layer.open_storage(source, opts)
    where = redact_uri(source)
    infos = [i for i in storage.list("") if _is_data_key(i.key)]
    if not infos:
        raise TableNotFoundError(f"no Parquet data files (*.parquet) under {where}")

    partitions = [_hive_partitions(i.key) for i in infos]
    names = [k for k, _ in partitions[0]]
    for info, parts in zip(infos, partitions):
        if [k for k, _ in parts] != names:
            raise SchemaMismatchError(
                f"Parquet source {where}: partition directories disagree: {infos[0].key} has {names or 'none'}, "
                f"{info.key} has {[k for k, _ in parts] or 'none'} (every file needs the same k=v directories, "
                "in the same order)"
            )

    with ThreadPoolExecutor(max_workers=max(1, min(_FOOTER_THREADS, len(infos)))) as pool:
        footers = list(pool.map(lambda i: _read_footer(storage, i.key, i.size), infos))
    schema = normalize_schema(footers[0].schema)
    for info, footer in zip(infos[1:], footers[1:]):
        diff = _schema_difference(schema, normalize_schema(footer.schema))
        if diff:
            raise SchemaMismatchError(
                f"Parquet source {where}: {info.key} does not have the schema of {infos[0].key}: {diff}"
            )
    clash = [n for n in names if n in schema.names]
    if clash:
        raise SchemaMismatchError(
            f"Parquet source {where}: partition column(s) {clash} are also columns of the files (e.g. {infos[0].key})"
        )
    for i, name in enumerate(names):
        schema = schema.append(pa.field(name, _infer_partition_type([p[i][1] for p in partitions]), nullable=True))

    root = storage.root if isinstance(storage, storage_layer.LocalStorage) else storage.uri
    files = [
        SourceFile(
            key=info.key,
            uri=storage.local_path(info.key) or file_uri(storage.uri, info.key),
            size=int(info.size),
            num_records=footer.num_rows,
            partition_values=dict(parts),
        )
        for info, footer, parts in zip(infos, footers, partitions)
    ]
    return SourceSnapshot("parquet", source, root, None, schema, names, files)
