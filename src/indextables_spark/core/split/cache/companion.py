"""Companion splits: a Tantivy index over another table's Parquet files, without the rows.

A companion split is a normal split (index files, footer, doc mapping, `__row` fast field) whose
row store is not in the split: its footer's `companion` section lists the source Parquet files it
indexed, in `__row` order, and for each the row groups it holds:

```
"rows": {"name": "rows.arrow", "length": 0, "format": "companion-parquet", "numRows": N,
         "batchRows": [rows of row group 1, ...]},              # one "batch" per source row group
"companion": {"format": "delta", "source": "<table root>", "version": 12,
              "schema": "<base64 Arrow IPC schema of the indexed columns>",
              "files": [{"key": "part-0.parquet", "uri": "s3://…/part-0.parquet", "size": 123,
                         "rowGroups": [[0, 65536], [1, 1200]]}, ...]}
```

`__row` r of the split is row `r - start(b)` of batch b, i.e. of that row group of that file; a
reader fetches only the row groups and columns it needs (ranged reads through our storage layer)
and checks each file's size against the one indexed, so rows never come from a file that changed.
"""

from __future__ import annotations

import base64
import functools
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pyarrow as pa

from indextables_spark.config.options import PREFIX
from indextables_spark.core.split.cache.lazy_rows import RangedFile, RowSource, source_for
from indextables_spark.core.storage import Storage, open_storage
from indextables_spark.errors import CompanionSourceError, SplitFormatError
from indextables_spark.util.lru import LruCache

if TYPE_CHECKING:
    import pyarrow.parquet as pq

COMPANION_KEY = "companion"

# Metadata configuration of a companion table (besides the indexing settings of any table).
CONFIG_FORMAT = PREFIX + "companion.sourceFormat"
CONFIG_SOURCE = PREFIX + "companion.sourcePath"
CONFIG_ROOT = PREFIX + "companion.sourceRoot"
CONFIG_VERSION = PREFIX + "companion.sourceVersion"


def companion_of(configuration: Mapping[str, str]) -> tuple[str, str] | None:
    """(format, source) when a table's metadata configuration says it is a companion index."""
    fmt = configuration.get(CONFIG_FORMAT)
    return (fmt, configuration.get(CONFIG_SOURCE, "")) if fmt else None


_CACHE_BYTES = 512 << 20  # decoded source columns kept per process


@dataclass(frozen=True)
class CompanionSource:
    """What a companion writer records of its source in each split."""

    format: str  # "delta" | "iceberg" | "parquet"
    source: str  # the path or identifier the user named
    version: int | None  # Delta version / Iceberg snapshot id indexed


@dataclass(frozen=True)
class CompanionFile:
    key: str  # the source's name for it (what sync compares)
    uri: str  # where to read it
    size: int  # bytes when indexed
    row_groups: tuple[tuple[int, int], ...]  # (row group index, rows) in __row order


@dataclass(frozen=True)
class CompanionInfo:
    format: str
    source: str
    version: int | None
    schema: pa.Schema  # the indexed (stored) columns, as the table's Arrow types
    files: tuple[CompanionFile, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "source": self.source,
            "version": self.version,
            "schema": base64.b64encode(self.schema.serialize().to_pybytes()).decode("ascii"),
            "files": [
                {"key": f.key, "uri": f.uri, "size": f.size, "rowGroups": [list(g) for g in f.row_groups]}
                for f in self.files
            ],
        }

    @classmethod
    def from_json(cls, d: Any, where: str) -> "CompanionInfo":
        try:
            schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(d["schema"])))
            files = tuple(
                CompanionFile(
                    str(f["key"]), str(f["uri"]), int(f["size"]), tuple((int(g), int(n)) for g, n in f["rowGroups"])
                )
                for f in d["files"]
            )
            version = d.get("version")
            return cls(str(d["format"]), str(d["source"]), int(version) if version is not None else None, schema, files)
        except (KeyError, TypeError, ValueError, pa.ArrowException) as e:
            raise SplitFormatError(f"split {where}: invalid companion section in the footer ({e!r})") from None


def companion_info(footer_raw: dict[str, Any], where: str) -> CompanionInfo | None:
    d = footer_raw.get(COMPANION_KEY)
    return None if d is None else CompanionInfo.from_json(d, where)


# -- reading source files ------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _storage_for(parent: str, options_key: tuple[tuple[str, Any], ...]) -> Storage:
    return open_storage(parent, dict(options_key))


def _split_uri(uri: str) -> tuple[str, str]:
    parent, name = posixpath.split(uri.rstrip("/"))
    return parent or ".", name


_ColumnKey = tuple[str, int, int, str]  # (file uri, file size, row group, column)

# Per process: open source Parquet files (metadata read once; a file replaced under the same name
# is another file: keyed by size too) and decoded columns (least recently used dropped past
# _CACHE_BYTES; one column over a quarter of that is never kept).
_files: LruCache["pq.ParquetFile"] = LruCache(256)
_columns: LruCache[pa.Array] = LruCache(None, max_weight=_CACHE_BYTES, weigh=lambda col: int(col.nbytes))


def _parquet_file(f: CompanionFile, options: Any, info: CompanionInfo, where: str) -> "pq.ParquetFile":
    def open_file() -> "pq.ParquetFile":
        sync = (
            f"Run BUILD INDEXTABLES COMPANION FOR {info.format.upper()} '{info.source}' again to sync the index "
            f"(it holds the source at version {info.version})"
        )
        return open_source_parquet(f.uri, f.size, options, f"companion split {where}", sync)

    return _files.get_or_build((f.uri, f.size), open_file)


def _keep_column(key: _ColumnKey, col: pa.Array) -> None:
    if col.nbytes <= _CACHE_BYTES // 4:
        _columns.put_if_absent(key, col)


def forget_source_files() -> None:
    """Drop this process's open source files and cached columns (a fresh process's view). Cached
    columns of a file deleted since are still its indexed rows, never another version's."""
    _files.clear()
    _columns.clear()


def conform_source_column(col: pa.ChunkedArray | pa.Array | None, field: pa.Field, rows: int) -> pa.Array:
    """A source column as the table's Arrow type (a column missing from an older file is null)."""
    if col is None:
        return pa.nulls(rows, field.type)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if col.type.equals(field.type):
        return col
    # Timestamps may be stored in ns (INT96, pandas): cut to µs as Spark reads them.
    safe = not (pa.types.is_timestamp(col.type) and pa.types.is_timestamp(field.type))
    try:
        return col.cast(field.type, safe=safe)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise CompanionSourceError(
            f"source column {field.name!r}: cannot read Parquet type {col.type} as {field.type} ({e})"
        ) from None


def open_source_parquet(uri: str, size: int, options: Any, what: str, remedy: str = "") -> Any:
    """A pyarrow ParquetFile of a source file, read by ranges (memory-mapped when local), after
    checking it still has the size it had when listed or indexed."""
    import pyarrow.parquet as pq  # lazy: keeps importing the split reader cheap for tables without companions

    parent, name = _split_uri(uri)
    storage = _storage_for(parent, tuple(sorted(options.items())) if options is not None else ())
    stat = storage.stat(name)
    if stat is None:
        raise CompanionSourceError(
            f"{what}: source file {uri} is gone (the source table moved on: vacuumed, "
            f"optimized or overwritten). {remedy}".rstrip()
        )
    if stat.size != size:
        raise CompanionSourceError(
            f"{what}: source file {uri} has {stat.size} bytes, {size} when listed or indexed "
            f"(replaced in place?). {remedy}".rstrip()
        )
    local = storage.local_path(name)
    try:
        if local is not None:
            source = local
        else:
            source = pa.PythonFile(RangedFile(RowSource(storage, name, 0, size), what, f"source file {uri}"), mode="r")
        return pq.ParquetFile(source, memory_map=local is not None)
    except (pa.ArrowException, OSError) as e:
        raise CompanionSourceError(f"{what}: source file {uri} is not readable Parquet ({e})") from e


class CompanionRows:
    """The row store of a companion split: batch i is one row group of one source file."""

    def __init__(self, info: CompanionInfo, options: Any, where: str):
        self.info, self.options, self.where = info, options, where
        self.schema: pa.Schema = info.schema
        self._batches = [(f, g) for f in info.files for g, _ in f.row_groups]
        self.num_record_batches = len(self._batches)

    def batch(self, i: int, columns: Sequence[str] | None = None) -> pa.RecordBatch:
        f, group = self._batches[i]
        names = list(columns) if columns is not None else self.schema.names
        fields = [self.schema.field(c) for c in names]
        got: dict[str, pa.Array] = {}
        missing = []
        for name in dict.fromkeys(names):
            col = _columns.get((f.uri, f.size, group, name))
            if col is None:
                missing.append(name)
            else:
                got[name] = col
        if missing:
            pf = _parquet_file(f, self.options, self.info, self.where)
            present = set(pf.schema_arrow.names)
            rows = pf.metadata.row_group(group).num_rows
            try:
                table = pf.read_row_group(group, columns=[c for c in missing if c in present])
            except (pa.ArrowException, OSError) as e:
                raise CompanionSourceError(
                    f"companion split {self.where}: row group {group} of source file {f.uri} is not readable ({e})"
                ) from e
            for name in missing:
                col = conform_source_column(
                    table.column(name) if name in present else None, self.schema.field(name), rows
                )
                got[name] = col
                _keep_column((f.uri, f.size, group, name), col)
        expected = dict(f.row_groups)[group]
        arrays = [got[c] for c in names]
        if any(len(a) != expected for a in arrays):
            raise CompanionSourceError(
                f"companion split {self.where}: row group {group} of source file {f.uri} "
                f"has {len(arrays[0])} rows, {expected} when indexed"
            )
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def open_rows(local_dir: str, info: CompanionInfo, where: str) -> CompanionRows:
    """The companion rows of an extracted split; credentials are those of the storage the split
    cache registered for the directory (the index table's options)."""
    registered = source_for(local_dir)
    options = getattr(registered.storage, "options", None) if registered is not None else None
    return CompanionRows(info, options, where)
