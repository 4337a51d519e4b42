"""Output columns of each command, shared by the three front ends (SQL, table functions, CLI).

An operation returns a typed result (../api/results.py: a frozen dataclass, also a read-only dict of its
camelCase JSON form) or a pyarrow Table (many rows). The SQL front end, the SQL table functions and
the command line show the result's dataclass fields as typed columns (snake_case, as in the
reference implementation's SQL output). DESCRIBE TRANSACTION LOG's rows are built as dicts keyed
by its column names (describe.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa

from indextables_spark.api import results as r


@dataclass(frozen=True)
class ResultSpec:
    """The columns of one command's output: the fields of its result class."""

    command: str
    record: type[r.Record]

    @property
    def schema(self) -> pa.Schema:
        return self.record.arrow_schema()

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    def spark_schema(self) -> Any:
        from pyspark.sql.types import StructType

        from indextables_spark.core.split.arrow_types import spark_schema_json

        return StructType.fromJson(spark_schema_json(self.schema))

    def table(self, rows: Sequence[r.Record]) -> pa.Table:
        """Result records → an Arrow table of these columns."""
        bad = [x for x in rows if not isinstance(x, self.record)]
        if bad:
            raise TypeError(f"{self.command}: expected {self.record.__name__} rows, got {type(bad[0]).__name__}")
        return self.record.table(rows)

    def row(self, result: r.Record) -> pa.Table:
        return self.table([result])


def python_value(v: Any, t: pa.DataType) -> Any:
    """Arrow's Python value with maps as dicts (Arrow gives lists of pairs)."""
    if v is None:
        return None
    if pa.types.is_struct(t):
        return {t.field(i).name: python_value(v[t.field(i).name], t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_list(t):
        return [python_value(x, t.value_type) for x in v]
    if pa.types.is_map(t):
        return {k: x for k, x in v}
    return v


def python_rows(table: pa.Table) -> list[dict[str, Any]]:
    fields = list(table.schema)
    return [{f.name: python_value(row[f.name], f.type) for f in fields} for row in table.to_pylist()]


def _of(command: str, record: type[r.Record]) -> ResultSpec:
    return ResultSpec(command, record)


CHECKPOINT = _of("CHECKPOINT", r.CheckpointResult)
COMPACT = _of("COMPACT", r.CheckpointResult)

DESCRIBE_STATE = _of("DESCRIBE STATE", r.DescribeStateResult)

TRANSACTION_LOG = _of("DESCRIBE TRANSACTION LOG", r.TransactionLogRow)

MERGE_SPLITS = _of("MERGE SPLITS", r.MergeSplitsResult)

PURGE = _of("PURGE", r.PurgeResult)

TRUNCATE_TIME_TRAVEL = _of("TRUNCATE TIME TRAVEL", r.TruncateTimeTravelResult)

DROP_PARTITIONS = _of("DROP PARTITIONS", r.DropPartitionsResult)

DELETE = _of("DELETE", r.DeleteResult)

REPAIR = _of("REPAIR TRANSACTION LOG", r.RepairResult)

HISTORY = _of("HISTORY", r.HistoryEntry)

FILES = _of("FILES", r.FileRow)


PREWARM_CACHE = _of("PREWARM CACHE", r.PrewarmCacheResult)

DESCRIBE_DISK_CACHE = _of("DESCRIBE DISK CACHE", r.DiskCacheInfo)

FLUSH_DISK_CACHE = _of("FLUSH DISK CACHE", r.FlushDiskCacheResult)

BUILD_COMPANION = _of("BUILD COMPANION", r.CompanionBuildResult)

CONVERT = _of("CONVERT", r.ConvertResult)
