"""The rows of companion splits (format/companion.py): read from the source's Parquet files by
ranges, only the row groups and columns asked for, each file checked against the size it had when
indexed; open files and decoded columns kept per process."""

from __future__ import annotations

import functools
import posixpath
from typing import TYPE_CHECKING, Any, Sequence

import pyarrow as pa

from indextables_spark.core.split.cache.lazy_rows import RangedFile, RowSource, source_for
from indextables_spark.core.split.format.companion import CompanionFile, CompanionInfo, conform_source_column
from indextables_spark.core.split.format.nested_names import NestedNames
from indextables_spark.core.storage import Storage, open_storage
from indextables_spark.errors import CompanionSourceError
from indextables_spark.util.lru import LruCache

if TYPE_CHECKING:
    import pyarrow.parquet as pq

    from indextables_spark.config.options import Options

_CACHE_BYTES = 512 << 20  # decoded source columns kept per process


@functools.lru_cache(maxsize=64)
def _storage_for(parent: str, options_key: tuple[tuple[str, Any], ...]) -> Storage:
    return open_storage(parent, dict(options_key))


def _split_uri(uri: str) -> tuple[str, str]:
    parent, name = posixpath.split(uri.rstrip("/"))
    return parent or ".", name


# (file uri, file size, row group, column, its type, the file's names of its nested fields): a
# split indexed again after a nested rename reads the same file's column under other names
_ColumnKey = tuple[str, int, int, str, pa.DataType, NestedNames | None]

# Per process: open source Parquet files (metadata read once; a file replaced under the same name
# is another file: keyed by size too) and decoded columns (least recently used dropped past
# _CACHE_BYTES; one column over a quarter of that is never kept).
_files: LruCache["pq.ParquetFile"] = LruCache(256)
_columns: LruCache[pa.Array] = LruCache(None, max_weight=_CACHE_BYTES, weigh=lambda col: int(col.nbytes))


def _parquet_file(f: CompanionFile, options: Options | None, info: CompanionInfo, where: str) -> "pq.ParquetFile":
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


def open_source_parquet(uri: str, size: int, options: Options | None, what: str, remedy: str = "") -> pq.ParquetFile:
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

    def __init__(self, info: CompanionInfo, options: Options | None, where: str):
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
        keys = {n: (f.uri, f.size, group, n, self.schema.field(n).type, f.nested_in_file(n)) for n in names}
        for name in keys:
            col = _columns.get(keys[name])
            if col is None:
                missing.append(name)
            else:
                got[name] = col
        if missing:
            pf = _parquet_file(f, self.options, self.info, self.where)
            present = set(pf.schema_arrow.names)
            rows = pf.metadata.row_group(group).num_rows
            in_file = {c: f.name_in_file(c) for c in missing}  # the files' names (ops/companion/rows.py)
            try:
                table = pf.read_row_group(
                    group, columns=list(dict.fromkeys(n for n in in_file.values() if n in present))
                )
            except (pa.ArrowException, OSError) as e:
                raise CompanionSourceError(
                    f"companion split {self.where}: row group {group} of source file {f.uri} is not readable ({e})"
                ) from e
            for name in missing:
                col = conform_source_column(
                    table.column(in_file[name]) if in_file[name] in present else None,
                    self.schema.field(name),
                    rows,
                    f.nested_in_file(name),
                )
                got[name] = col
                _keep_column(keys[name], col)
        expected = dict(f.row_groups)[group]
        if not names:  # no columns, still the row group's rows (filters and deletes count them)
            return pa.RecordBatch.from_arrays([pa.nulls(expected)], names=["_"]).select([])
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
    options = registered.storage.options if registered is not None else None
    return CompanionRows(info, options, where)
