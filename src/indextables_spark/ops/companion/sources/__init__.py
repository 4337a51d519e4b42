"""What a companion index indexes: the data files of a Delta, Iceberg or Parquet source at one version.

Sources are read with well-kept libraries, one module each: `delta.py` (deltalake, delta-rs),
`iceberg.py` (pyiceberg), `parquet.py` (plain Parquet directories with hive partitions, through our
storage layer plus the Parquet footer). Each returns a `SourceSnapshot` (snapshot.py): the files to
index, with what a reader needs to read them again later (full URI, size) and to rebuild the rows
(partition values as strings, as Delta records them). `credentials.py` maps our
`spark.indextables.*` options onto deltalake's storage options and pyiceberg's FileIO properties;
`locations.py` turns the paths the sources record into URIs; `libraries.py` imports the optional
libraries and words their errors.

A companion index addresses rows by their position in a data file; rows a source deleted without
rewriting the file are logged as deletes of the splits (ops/companion/deletes.py). Iceberg delete
files are resolved to positions per file in `iceberg_files.py` (SourceFile.deleted); Delta deletion
vectors are read from the log by `delta_log.py` (SourceFile.deletion_vector) and decoded by
`deletion_vectors.py`. The files' names of the columns: Delta column mapping in `column_mapping.py`
(SourceSnapshot.physical_names), Iceberg field ids (SourceSnapshot.field_ids); both are resolved
per file by ops/companion/rows.py.

    open_source(format, source, *, options, version, catalog, catalog_type) -> SourceSnapshot
    latest_version(format, source, *, options) -> int | None   (Delta: from the log only; others: None)
    storage_options_for_deltalake(uri, options) -> dict   (deltalake / object_store keys)
    fileio_properties_for_iceberg(uri, options) -> dict   (pyiceberg FileIO properties)
    normalize_schema(schema) -> pa.Schema                  (Arrow types as Spark reads them)
"""

from __future__ import annotations

from typing import Any, Mapping

from indextables_spark.config.options import Options
from indextables_spark.config.redaction import redact_uri
from indextables_spark.errors import InvalidOptionError
from indextables_spark.ops.companion.sources.credentials import (
    fileio_properties_for_iceberg,
    storage_options_for_deltalake,
)
from indextables_spark.ops.companion.sources.delta import delta_latest_version, open_delta
from indextables_spark.ops.companion.sources.iceberg import open_iceberg
from indextables_spark.ops.companion.sources.parquet import open_parquet
from indextables_spark.ops.companion.sources.snapshot import SourceFile, SourceSnapshot, normalize_schema

FORMATS = ("delta", "iceberg", "parquet")


def open_source(
    format: str,
    source: str,
    *,
    options: "Options | Mapping[str, Any] | None" = None,
    version: int | None = None,
    catalog: str | None = None,
    catalog_type: str | None = None,
) -> SourceSnapshot:
    """The data files of `source` at `version` (Delta version / Iceberg snapshot id; latest when None).

    Iceberg: with `catalog`, `source` is a table identifier ("db.table") of that catalog (its
    properties come from the options `iceberg.catalog.<catalog>.<key>`); without, the path of a
    table metadata JSON file or of a table directory (its newest `metadata/*.metadata.json`)."""
    fmt = _check_format(format)
    if not isinstance(source, str) or not source.strip():
        raise InvalidOptionError(f"companion source: expected a non-empty path or table name, got {source!r}")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise InvalidOptionError(f"companion source {source!r}: version must be an integer, got {version!r}")
    if fmt != "iceberg" and (catalog is not None or catalog_type is not None):
        raise InvalidOptionError(
            f"companion source {source!r}: a catalog is only used by format 'iceberg', not {fmt!r}"
        )
    opts = options if isinstance(options, Options) else Options.of(options)
    if fmt == "delta":
        return open_delta(source, opts, version)
    if fmt == "iceberg":
        return open_iceberg(source, opts, version, catalog, catalog_type)
    if version is not None:
        raise InvalidOptionError(
            f"Parquet source {redact_uri(source)}: a plain Parquet directory has no versions (got version {version})"
        )
    return open_parquet(source, opts)


def latest_version(format: str, source: str, *, options: "Options | Mapping[str, Any] | None" = None) -> int | None:
    """The source's newest version without listing its files (Delta); None when the format has no
    cheap probe (Iceberg, Parquet: the streaming sync lists them each poll)."""
    if _check_format(format) != "delta":
        return None
    return delta_latest_version(source, options if isinstance(options, Options) else Options.of(options))


def _check_format(format: str) -> str:
    fmt = format.strip().lower() if isinstance(format, str) else None
    if fmt not in FORMATS:
        raise InvalidOptionError(
            f"companion source format {format!r} is not supported; use one of {', '.join(FORMATS)}"
        )
    return fmt


__all__ = [
    "FORMATS",
    "SourceFile",
    "SourceSnapshot",
    "open_source",
    "latest_version",
    "storage_options_for_deltalake",
    "fileio_properties_for_iceberg",
    "normalize_schema",
]
