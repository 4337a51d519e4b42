"""Typed results of the table operations (checkpoint, merge, purge, describe, …).

Each operation returns a frozen dataclass: attributes are snake_case (`res.num_files`), `to_dict()`
gives the camelCase JSON form (the CLI's `--json`), and `arrow_schema()` /
`to_row()` give the SQL front ends their typed columns — the dataclass fields, in order.

The public API documents these results as dicts (`t.maintenance.checkpoint() -> dict`): an
`OperationResult` is therefore also a read-only dict of its `to_dict()` keys (`res["numFiles"]`,
`json.dumps(res)`, `res == {...}` keep working); writing to it raises TypeError. Build a changed
copy with `dataclasses.replace`.

The classes live by kind of operation: record.py (what every result is), state.py (the table's
state), inspect.py (its listings), maintenance.py (the commands that change it), cluster.py (what
every process holds); this package names them all, the public import path
`indextables_spark.results`.
"""

from __future__ import annotations

from indextables_spark.results.cluster import (
    CacheDirectoryRow,
    DiskCacheInfo,
    EnvironmentRow,
    FlushDiskCacheResult,
    PrewarmCacheResult,
    StorageStatsRow,
)
from indextables_spark.results.inspect import (
    ColumnRow,
    ComponentSizeRow,
    DescribeTableResult,
    FileRow,
    HistoryEntry,
    TransactionLogRow,
)
from indextables_spark.results.maintenance import (
    CompanionBuildResult,
    ConvertResult,
    DeleteResult,
    DropPartitionsResult,
    MergeSplitsResult,
    PostWriteResult,
    PurgeResult,
    RepairResult,
    WriteResult,
)
from indextables_spark.results.record import (
    TIMESTAMP,
    OperationResult,
    Progress,
    ProgressArg,
    ProgressCallback,
    Record,
    result,
)
from indextables_spark.results.state import (
    CheckpointResult,
    DescribeStateResult,
    GcStateResult,
    ManifestGcResult,
    SkippedFile,
    StateCleanupResult,
    TruncateTimeTravelResult,
)

__all__ = [
    "TIMESTAMP",
    "CacheDirectoryRow",
    "CheckpointResult",
    "ColumnRow",
    "CompanionBuildResult",
    "ComponentSizeRow",
    "ConvertResult",
    "DeleteResult",
    "DescribeStateResult",
    "DescribeTableResult",
    "DiskCacheInfo",
    "DropPartitionsResult",
    "EnvironmentRow",
    "FileRow",
    "FlushDiskCacheResult",
    "GcStateResult",
    "HistoryEntry",
    "ManifestGcResult",
    "MergeSplitsResult",
    "OperationResult",
    "PostWriteResult",
    "PrewarmCacheResult",
    "Progress",
    "ProgressArg",
    "ProgressCallback",
    "PurgeResult",
    "Record",
    "RepairResult",
    "SkippedFile",
    "StateCleanupResult",
    "StorageStatsRow",
    "TransactionLogRow",
    "TruncateTimeTravelResult",
    "WriteResult",
    "result",
]
