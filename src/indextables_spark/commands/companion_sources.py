"""What a companion index indexes: the data files of a Delta, Iceberg or Parquet source at one version.

Sources are read with well-kept libraries: `deltalake` (delta-rs) for Delta, `pyiceberg` for
Iceberg, our storage layer plus the Parquet footer for plain Parquet directories (hive
partitions). Each returns a `SourceSnapshot`: the files to index, with what a reader needs to read
them again later (full URI, size) and to rebuild the rows (partition values as strings, as Delta
records them). Credentials: our `spark.indextables.*` options mapped onto deltalake's storage
options and pyiceberg's FileIO properties.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

FORMATS = ("delta", "iceberg", "parquet")


@dataclass(frozen=True)
class SourceFile:
    key: str                                  # identity used by sync: the path the source records
                                              # (Delta/Parquet: relative to the root; Iceberg: absolute)
    uri: str                                  # full URI / absolute local path to read the file from
    size: int                                 # bytes, as recorded by the source (checked at read time)
    num_records: int | None                   # rows, when the source records it
    partition_values: dict[str, str | None] = field(default_factory=dict)   # partition column -> value as text


@dataclass(frozen=True)
class SourceSnapshot:
    format: str                               # "delta" | "iceberg" | "parquet"
    source: str                               # what the user named (path or Iceberg identifier)
    root: str                                 # the table's root URI
    version: int | None                       # Delta version / Iceberg snapshot id / None (Parquet)
    schema: pa.Schema                         # every column (partition columns included), Arrow types
                                              # as Spark reads them (string, not large_string; timestamp[us, UTC])
    partition_columns: list[str]
    files: list[SourceFile]
