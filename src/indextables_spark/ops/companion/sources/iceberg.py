"""Iceberg sources through pyiceberg: a snapshot's live data files, from a catalog or from a
table's metadata file. Delete files are resolved to the positions they delete (iceberg_files.py);
data files that are not Parquet are refused. Identity partitions are partition columns; the files
of one partition tuple (transforms included) are indexed together (SourceFile.cluster)."""

from __future__ import annotations

import datetime as _dt
import os
import re
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.core import storage as storage_layer
from indextables_spark.config.redaction import redact_uri
from indextables_spark.errors import (
    IndexTablesError,
    InvalidOptionError,
    ProtocolVersionError,
    StorageError,
    TableNotFoundError,
    VersionNotFoundError,
)
from indextables_spark.ops.companion.nested_fields import SourceField, SourceNesting
from indextables_spark.ops.companion.sources.credentials import abfss_uri, fileio_properties_for_iceberg
from indextables_spark.ops.companion.sources.iceberg_files import partition_cluster, plan_data_files
from indextables_spark.ops.companion.sources.libraries import describe_error, library_redactor, require_library
from indextables_spark.ops.companion.sources.locations import iceberg_file_uri, scheme_of
from indextables_spark.ops.companion.sources.snapshot import (
    EPOCH,
    SourceFile,
    SourceSnapshot,
    normalize_schema,
    partition_text,
)

if TYPE_CHECKING:
    from pyiceberg.schema import Schema as IcebergSchema
    from pyiceberg.table import Table as IcebergTable
    from pyiceberg.types import IcebergType


def open_iceberg(
    source: str, opts: Options, version: int | None, catalog: str | None, catalog_type: str | None
) -> SourceSnapshot:
    require_library("pyiceberg", "iceberg")
    if catalog is not None:
        table, name = _iceberg_from_catalog(source, opts, catalog, catalog_type)
    else:
        table, name = _iceberg_from_metadata(source, opts)

    if version is not None:
        snapshot = table.snapshot_by_id(version)
        if snapshot is None:
            known = [s.snapshot_id for s in table.snapshots()][-5:]
            raise VersionNotFoundError(f"Iceberg table {name} has no snapshot {version} (latest snapshots: {known})")
    else:
        snapshot = table.current_snapshot()
    schema = table.schema()
    if snapshot is not None and snapshot.schema_id is not None:
        schema = table.schemas().get(snapshot.schema_id, schema)  # time travel reads the snapshot's schema
    planned = plan_data_files(table, snapshot, schema, name) if snapshot is not None else []
    for p in planned:
        fmt = getattr(p.data_file.file_format, "name", str(p.data_file.file_format))
        if str(fmt).upper() != "PARQUET":
            raise ProtocolVersionError(
                f"Iceberg table {name}: data file {p.data_file.file_path} is {fmt}, only Parquet data files can be indexed"
            )

    columns = _iceberg_partition_columns(table, schema, [p.data_file for p in planned])
    files = [
        SourceFile(
            key=p.data_file.file_path,
            uri=iceberg_file_uri(p.data_file.file_path),
            size=int(p.data_file.file_size_in_bytes),
            num_records=None if p.data_file.record_count is None else int(p.data_file.record_count),
            partition_values={
                col: _iceberg_partition_text(p.data_file.partition[pos[p.data_file.spec_id]], ftype)
                for col, ftype, pos in columns
            },
            deleted=p.deleted,
            cluster=partition_cluster(p.data_file),
        )
        for p in planned
    ]
    files.sort(key=lambda f: f.key)
    arrow_schema = normalize_schema(_iceberg_arrow_schema(schema))
    return SourceSnapshot(
        "iceberg",
        source,
        table.location(),
        None if snapshot is None else snapshot.snapshot_id,
        arrow_schema,
        [c for c, _, _ in columns],
        files,
        field_ids={f.name: f.field_id for f in schema.fields},
        nested={f.name: n for f in schema.fields if (n := iceberg_nesting(f.field_type)) is not None},
        bloom_columns=_bucket_columns(table, schema),
    )


def _iceberg_from_catalog(source: str, opts: Options, catalog: str, catalog_type: str | None) -> tuple[Any, str]:
    from pyiceberg.catalog import load_catalog  # lazy: an optional dependency
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError  # lazy: an optional dependency

    if not isinstance(catalog, str) or not catalog.strip():
        raise InvalidOptionError(f"Iceberg source {source!r}: catalog name must be a non-empty string, got {catalog!r}")
    # FileIO credentials first, so explicit catalog properties win; a credentials provider is asked
    # for the catalog's warehouse location (the tables' locations are known only from the catalog)
    catalog_props = opts.with_prefix(f"iceberg.catalog.{catalog}")
    warehouse = catalog_props.get("warehouse")
    props = {**fileio_properties_for_iceberg(warehouse if scheme_of(warehouse) else None, opts), **catalog_props}
    if catalog_type:
        props["type"] = catalog_type
    redact = library_redactor(opts, props)
    name = f"{catalog}.{source}"
    try:
        cat = load_catalog(catalog, **props)
    except Exception as e:
        keys = sorted(k for k in props if not k.startswith(("s3.", "adls.")))
        raise InvalidOptionError(
            f"cannot load Iceberg catalog {catalog!r} (type {props.get('type', 'not set')}, properties {keys} from the "
            f"options 'spark.indextables.iceberg.catalog.{catalog}.<key>'): {redact(describe_error(e))}"
        ) from None
    try:
        return cat.load_table(source), name
    except (NoSuchTableError, NoSuchNamespaceError) as e:
        raise TableNotFoundError(
            f"no Iceberg table {source!r} in catalog {catalog!r}: {redact(describe_error(e))}"
        ) from None
    except ValueError as e:  # e.g. an identifier the catalog cannot parse
        raise InvalidOptionError(f"Iceberg table {name}: {redact(describe_error(e))}") from None
    except Exception as e:
        raise StorageError(f"cannot load Iceberg table {name}: {redact(describe_error(e))}") from None


def _iceberg_from_metadata(source: str, opts: Options) -> tuple[Any, str]:
    from pyiceberg.table import StaticTable  # lazy: an optional dependency

    location = _iceberg_metadata_location(source, opts)
    props = fileio_properties_for_iceberg(location, opts)
    redact = library_redactor(opts, props)
    name = redact_uri(source)
    try:
        return StaticTable.from_metadata(iceberg_uri(location, opts), properties=props), name
    except FileNotFoundError as e:
        raise TableNotFoundError(
            f"no Iceberg table metadata at {redact_uri(location)}: {redact(describe_error(e))}"
        ) from None
    except IndexTablesError:
        raise
    except Exception as e:
        raise StorageError(
            f"cannot read Iceberg metadata {redact_uri(location)}: {redact(describe_error(e))}"
        ) from None


_METADATA_VERSION = re.compile(r"^v?(\d+)[-.]")


def _iceberg_metadata_location(source: str, opts: Options) -> str:
    """`source` itself when it names a metadata JSON file, else the newest `metadata/*.metadata.json`
    of that table directory (by the version number that starts its name: 00003-<uuid> or v3)."""
    if source.lower().endswith(".json"):
        return source
    storage = storage_layer.open_storage(source, opts)
    best: tuple[int, int, str] | None = None
    for info in storage.list("metadata/"):
        name = info.key.rsplit("/", 1)[-1]
        m = _METADATA_VERSION.match(name)
        if "/" in info.key[len("metadata/") :] or not name.endswith(".metadata.json") or not m:
            continue
        cand = (int(m.group(1)), info.modified_ms, info.key)
        best = cand if best is None or cand > best else best
    if best is None:
        raise TableNotFoundError(
            f"no Iceberg table at {redact_uri(source)}: no metadata/*.metadata.json file "
            "(give the metadata file itself, or a catalog)"
        )
    return storage.local_path(best[2]) or storage.full_uri(best[2])


def _bucket_columns(table: IcebergTable, schema: IcebergSchema) -> tuple[str, ...]:
    """Top-level source columns of the spec's bucket fields: their splits get a Bloom filter, which
    skips a split for `col = v` / IN exactly where bucket pruning would (and more)."""
    from pyiceberg.transforms import BucketTransform  # lazy: an optional dependency

    ids = {pf.source_id for pf in table.spec().fields if isinstance(pf.transform, BucketTransform)}
    return tuple(f.name for f in schema.fields if f.field_id in ids)


def _iceberg_partition_columns(
    table: IcebergTable, schema: IcebergSchema, data_files: list[Any]
) -> list[tuple[str, IcebergType, dict[int, int]]]:
    """(column, Iceberg type, {spec id: position in the file's partition tuple}) for each source column
    of an identity partition field of the table's spec that every file's spec also holds (files
    written before a spec change may lack it: then it is no partition column)."""
    from pyiceberg.transforms import IdentityTransform  # lazy: an optional dependency

    specs = table.specs()
    used_specs = {f.spec_id for f in data_files}
    out = []
    for pf in table.spec().fields:
        if not isinstance(pf.transform, IdentityTransform):
            continue
        try:
            source_field = schema.find_field(pf.source_id)
        except ValueError:  # the column was dropped from this snapshot's schema
            continue
        positions: dict[int, int] = {}
        for spec_id in used_specs:
            spec = specs.get(spec_id)
            pos = (
                None
                if spec is None
                else next(
                    (
                        i
                        for i, f in enumerate(spec.fields)
                        if f.source_id == pf.source_id and isinstance(f.transform, IdentityTransform)
                    ),
                    None,
                )
            )
            if pos is None:
                break
            positions[spec_id] = pos
        else:
            out.append((source_field.name, source_field.field_type, positions))
    return out


def _iceberg_partition_text(value: Any, field_type: IcebergType) -> str | None:
    """An identity partition value as Delta would write it: dates/timestamps arrive as numbers."""
    from pyiceberg import types as it  # lazy: an optional dependency

    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if isinstance(field_type, it.DateType):
            return (EPOCH.date() + _dt.timedelta(days=value)).isoformat()
        if isinstance(field_type, (it.TimestampType, it.TimestamptzType)):
            return partition_text(EPOCH + _dt.timedelta(microseconds=value))  # UTC for timestamptz
        if isinstance(field_type, it.TimeType):
            return (EPOCH + _dt.timedelta(microseconds=value)).time().isoformat()
        nanos = getattr(it, "TimestampNanoType", None), getattr(it, "TimestamptzNanoType", None)
        if any(n is not None and isinstance(field_type, n) for n in nanos):
            return partition_text(EPOCH + _dt.timedelta(microseconds=value // 1000))
    return partition_text(value)


def iceberg_nesting(t: IcebergType) -> SourceNesting | None:
    """The nested struct fields of an Iceberg type by field id (None when it holds no struct): a
    nested field renamed after a file was written is read from it by id."""
    from pyiceberg import types as it  # lazy: an optional dependency

    if isinstance(t, it.StructType):
        return SourceNesting(
            tuple(SourceField(f.name, f.name, f.field_id, iceberg_nesting(f.field_type)) for f in t.fields)
        )
    if isinstance(t, it.ListType):
        element = iceberg_nesting(t.element_type)
        return SourceNesting(element=element) if element is not None else None
    if isinstance(t, it.MapType):
        key, value = iceberg_nesting(t.key_type), iceberg_nesting(t.value_type)
        return SourceNesting(key=key, value=value) if key is not None or value is not None else None
    return None


def _iceberg_arrow_schema(schema: IcebergSchema) -> pa.Schema:
    from pyiceberg.io.pyarrow import schema_to_pyarrow  # lazy: an optional dependency

    return schema_to_pyarrow(schema, include_field_ids=False)


def iceberg_uri(uri: str, opts: Options) -> str:
    """A metadata location in a form pyiceberg accepts: local paths absolute, az:// / azure://
    (unknown to pyiceberg) as abfss://container@account.dfs.<suffix>/path."""
    scheme = scheme_of(uri)
    if scheme == "":
        return os.path.abspath(uri)
    if scheme in ("az", "azure"):
        return abfss_uri(
            uri, opts, f"Iceberg source {redact_uri(uri)}", "use abfss://container@account.dfs.core.windows.net/..."
        )
    return uri
