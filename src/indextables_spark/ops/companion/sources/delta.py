"""Delta sources through deltalake (delta-rs): the add actions of one version, with each file's
deletion vector read from the log (sources/delta_log.py; the companion deletes those rows,
ops/companion/deletion_vectors.py) and the column mapping of the schema (sources/column_mapping.py)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.config.redaction import Redactor, redact_uri
from indextables_spark.errors import (
    CompanionSourceError,
    ProtocolVersionError,
    StorageError,
    TableNotFoundError,
    VersionNotFoundError,
)
from indextables_spark.ops.companion.sources.column_mapping import delta_column_mapping
from indextables_spark.ops.companion.sources.delta_log import LiveFile, live_files
from indextables_spark.ops.companion.sources.credentials import abfss_uri, storage_options_for_deltalake
from indextables_spark.ops.companion.sources.libraries import describe_error, library_redactor, require_library
from indextables_spark.ops.companion.sources.locations import file_uri, is_local, local_path, scheme_of
from indextables_spark.ops.companion.sources.snapshot import (
    SourceFile,
    SourceSnapshot,
    normalize_schema,
    partition_text,
)

if TYPE_CHECKING:
    from deltalake import DeltaTable


def open_delta(source: str, opts: Options, version: int | None) -> SourceSnapshot:
    require_library("deltalake", "delta")
    where = redact_uri(source)
    if version is not None and version < 0:
        raise VersionNotFoundError(f"Delta table {where} has no version {version} (versions start at 0)")
    uri = deltalake_uri(source, opts)
    storage_options = storage_options_for_deltalake(source, opts)
    redact = library_redactor(opts, storage_options)
    dt = _load_delta(uri, where, version, storage_options, redact)

    metadata = dt.metadata()
    mode = (metadata.configuration or {}).get("delta.columnMapping.mode", "none") or "none"
    physical_names, field_ids, nested = delta_column_mapping(json.loads(dt.schema().to_json()), mode, where)
    in_log = _deletion_vectors(dt, source, opts, where)

    root = local_path(source) if is_local(source) else source.rstrip("/")
    partition_columns = list(metadata.partition_columns or [])
    actions = pa.table(dt.get_add_actions(flatten=True))
    paths = actions.column("path").to_pylist()
    sizes = actions.column("size_bytes").to_pylist()
    counts: list[Any] = (
        actions.column("num_records").to_pylist() if "num_records" in actions.column_names else [None] * len(paths)
    )
    parts = {
        c: (
            actions.column(f"partition.{c}").to_pylist()
            if f"partition.{c}" in actions.column_names
            else [None] * len(paths)
        )
        for c in partition_columns
    }
    files = []
    for i, raw in enumerate(paths):
        key = unquote(raw)  # the log holds an RFC 2396 URI (a '%20' directory is logged as '%2520')
        files.append(
            SourceFile(
                key=key,
                uri=file_uri(root, key),
                size=int(sizes[i]),
                num_records=None if counts[i] is None else int(counts[i]),
                partition_values={c: partition_text(parts[c][i]) for c in partition_columns},
                deletion_vector=in_log[key].deletion_vector if key in in_log else None,
                log_version=in_log[key].version if key in in_log else None,
            )
        )
    if in_log and set(in_log) != {f.key for f in files}:
        raise CompanionSourceError(
            f"Delta table {where} (version {dt.version()}): its log lists other files than deltalake does "
            f"(e.g. {sorted(set(in_log) ^ {f.key for f in files})[:3]}); its deletion vectors cannot be placed"
        )
    files.sort(key=lambda f: f.key)
    schema = normalize_schema(pa.schema(dt.schema().to_arrow()))
    return SourceSnapshot(
        "delta", source, root, dt.version(), schema, partition_columns, files, physical_names, field_ids, nested
    )


_LOG_VERSION = re.compile(
    r"_delta_log/(\d{20})\.(?:json|checkpoint(?:\.\d+\.\d+)?\.parquet|checkpoint\.[0-9a-fA-F-]{36}\.(?:json|parquet))"
)


def delta_latest_version(source: str, opts: Options) -> int:
    """The newest version of a Delta table from one listing of its `_delta_log/` (no log replay, no
    file list): the streaming sync's probe (ops/companion/stream.py)."""
    from indextables_spark.core.storage import open_storage  # lazy: as the Parquet source's listing

    where = redact_uri(source)
    try:
        keys = [i.key for i in open_storage(source, opts).list("_delta_log/")]
    except OSError as e:
        raise StorageError(f"cannot list the log of Delta table {where}: {describe_error(e)}") from None
    versions = [int(m.group(1)) for k in keys if (m := _LOG_VERSION.fullmatch(k))]
    if not versions:
        raise TableNotFoundError(f"no Delta table at {where} (no _delta_log/ versions)")
    return max(versions)


def _load_delta(
    uri: str, where: str, version: int | None, storage_options: dict[str, str], redact: Redactor
) -> DeltaTable:
    from deltalake import DeltaTable  # lazy: an optional dependency
    from deltalake.exceptions import DeltaError, DeltaProtocolError  # lazy: an optional dependency
    from deltalake.exceptions import TableNotFoundError as DeltaTableNotFound  # lazy: an optional dependency

    def load(v: int | None) -> DeltaTable:
        return DeltaTable(uri, version=v, storage_options=storage_options or None)

    try:
        return load(version)
    except DeltaTableNotFound as e:
        raise TableNotFoundError(f"no Delta table at {where}: {redact(describe_error(e))}") from None
    except DeltaProtocolError as e:
        raise ProtocolVersionError(f"Delta table {where}: {redact(describe_error(e))}") from None
    except (DeltaError, OSError) as e:
        if version is None:
            raise StorageError(f"cannot open Delta table {where}: {redact(describe_error(e))}") from None
        first = e
    # the version failed: tell a missing version from a table that cannot be read at all
    try:
        latest = load(None).version()
    except Exception:
        raise StorageError(
            f"cannot open Delta table {where} at version {version}: {redact(describe_error(first))}"
        ) from None
    raise VersionNotFoundError(
        f"Delta table {where} has no version {version} (latest is {latest}; old versions disappear with log "
        f"cleanup): {redact(describe_error(first))}"
    ) from None


def _deletion_vectors(dt: DeltaTable, source: str, opts: Options, where: str) -> dict[str, LiveFile]:
    """{file key: its deletion vector and add version} read from the log (sources/delta_log.py),
    when the protocol enables deletion vectors (else no file has one: empty)."""
    from indextables_spark.core.storage import open_storage  # lazy: as the Parquet source's listing

    if "deletionVectors" not in (dt.protocol().reader_features or []):
        return {}
    try:
        return live_files(open_storage(source, opts), dt.version(), where)
    except OSError as e:
        raise StorageError(f"cannot read the log of Delta table {where}: {describe_error(e)}") from None


def deltalake_uri(uri: str, opts: Options) -> str:
    """The table URI in a form delta-rs accepts: local paths absolute, s3n:// as s3://, wasb(s)://
    (unknown to delta-rs) as abfss:// on the dfs endpoint of the same account."""
    scheme = scheme_of(uri)
    if scheme in ("", "file"):
        return local_path(uri)
    if scheme == "s3n":
        return "s3" + uri[len("s3n") :]
    if scheme in ("wasb", "wasbs"):
        return abfss_uri(uri, opts, f"Delta source {redact_uri(uri)}", "name it in the path").rstrip("/")
    return uri.rstrip("/")
