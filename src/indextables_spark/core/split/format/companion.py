"""Companion splits: a Tantivy index over another table's Parquet files, without the rows. What a
companion split records of its source (the footer's `companion` section), the metadata
configuration of a companion table, and a source column as the table's Arrow type; reading the
rows from the source files is `core/split/cache/companion_rows.py`.

A companion split is a normal split (index files, footer, doc mapping, `__row` fast field) whose
row store is not in the split: its footer's `companion` section lists the source Parquet files it
indexed, in `__row` order, and for each the row groups it holds:

```
"rows": {"name": "rows.arrow", "length": 0, "format": "companion-parquet", "numRows": N,
         "batchRows": [rows of row group 1, ...]},              # one "batch" per source row group
"companion": {"format": "delta", "source": "<table root>", "version": 12,
              "schema": "<base64 Arrow IPC schema of the indexed columns>",
              "files": [{"key": "part-0.parquet", "uri": "s3://…/part-0.parquet", "size": 123,
                         "rowGroups": [[0, 65536], [1, 1200]],
                         "columns": [["Name", "col-5f3e…"]],            # only when names differ
                         "nested": {"Geo": {"fields": [["lat", "col-1c…", null]]}}}, ...]}
```

(`nested`: the file's names of nested struct fields where they differ, format/nested_names.py.)

`__row` r of the split is row `r - start(b)` of batch b, i.e. of that row group of that file; a
reader fetches only the row groups and columns it needs (ranged reads through our storage layer)
and checks each file's size against the one indexed, so rows never come from a file that changed.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow as pa

from indextables_spark.config.options import PREFIX
from indextables_spark.core.split.format.nested_names import NestedNames, rename_nested
from indextables_spark.errors import CompanionSourceError, SplitFormatError

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
    # (column, its name in the file; "" when the file has none) where they differ: Delta column
    # mapping, Iceberg columns matched by field id (renamed after the file was written), see
    # ops/companion/rows.py; empty when the file uses the table's names
    columns: tuple[tuple[str, str], ...] = ()
    # (column, the file's names of its nested struct fields) where any differs (format/nested_names.py)
    nested: tuple[tuple[str, NestedNames], ...] = ()

    def name_in_file(self, column: str) -> str:
        return dict(self.columns).get(column, column)

    def nested_in_file(self, column: str) -> NestedNames | None:
        return dict(self.nested).get(column)


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
                {
                    "key": f.key,
                    "uri": f.uri,
                    "size": f.size,
                    "rowGroups": [list(g) for g in f.row_groups],
                    **({"columns": [list(c) for c in f.columns]} if f.columns else {}),
                    **({"nested": {c: n.to_json() for c, n in f.nested}} if f.nested else {}),
                }
                for f in self.files
            ],
        }

    @classmethod
    def from_json(cls, d: Any, where: str) -> "CompanionInfo":
        try:
            schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(d["schema"])))
            files = tuple(
                CompanionFile(
                    str(f["key"]),
                    str(f["uri"]),
                    int(f["size"]),
                    tuple((int(g), int(n)) for g, n in f["rowGroups"]),
                    tuple((str(c), str(n)) for c, n in f.get("columns", ())),
                    tuple((str(c), NestedNames.from_json(n)) for c, n in (f.get("nested") or {}).items()),
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


def conform_source_column(
    col: pa.ChunkedArray | pa.Array | None, field: pa.Field, rows: int, nested: NestedNames | None = None
) -> pa.Array:
    """A source column as the table's Arrow type (a column missing from an older file is null);
    `nested`: the file's names of its nested fields where they differ (renamed before the cast,
    which matches struct children by name)."""
    if col is None:
        return pa.nulls(rows, field.type)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    col = rename_nested(col, field.type, nested)
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
