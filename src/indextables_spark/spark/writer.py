"""Batch writer: thin Spark glue around the Spark-free write core (ops/write/write.py):
each task builds splits from Arrow batches; the driver-side commit writes the log. Spark hands
these a table path: they open the table's shared log (driver) or its storage (executors)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from indextables_spark.api.table import IndexTable
from indextables_spark.config.options import Options
from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.core.storage import open_storage
from indextables_spark.ops.write import write as core
from indextables_spark.ops.write.optimize_write import MAX_ROWS, OptimizedWriteConfig
from indextables_spark.ops.write.write import WritePlan, merge_stats, vector_builds
from indextables_spark.spark.worker_errors import short_tracebacks

log = logging.getLogger(__name__)


@dataclass
class SplitsWritten(core.SplitsWritten, WriterCommitMessage):
    """A task's result, as the commit message Spark sends to the driver."""


def plan_write(path: str, opts: Options, schema: StructType, overwrite: bool) -> tuple[WritePlan, int, bool]:
    """core.plan_write for a Spark schema. Returns (plan, read_version, table_exists)."""
    return core.plan_write(IndexTable(path, opts).log, opts, schema.jsonValue(), overwrite)


def write_splits(path: str, opts: Options, plan: WritePlan, batches: Iterator[pa.RecordBatch]) -> SplitsWritten:
    """Executor side: turn this task's rows into splits under the table."""
    m = core.write_splits(open_storage(path, opts), plan, batches)
    return SplitsWritten(adds=m.adds, num_rows=m.num_rows, stats=m.stats)


def delete_written(
    path: str, opts: Options, adds: Iterable[Mapping[str, Any]], stats: Mapping[str, list[str]] | None = None
) -> None:
    """Remove the split files (and their stats files) of a failed job (never referenced by the log)."""
    core.delete_written(open_storage(path, opts), adds, stats)


@short_tracebacks("write", "commit", "abort")
class IndexTablesWriter(DataSourceArrowWriter):
    def __init__(self, path: str, opts: Options, schema: StructType, overwrite: bool):
        self.path = path
        self.opts = opts
        self.overwrite = overwrite
        self.plan, self.read_version, _ = plan_write(path, opts, schema, overwrite)
        # optimized writes shuffle in register's save() wrapper (spark/optimized_write.py), which
        # leaves write.optimizeWrite.maxRowsPerSplit for the tasks; checked here on every route
        if OptimizedWriteConfig.resolve(opts).shuffles and opts.get_str(MAX_ROWS) is None:
            log.warning(
                "indextables: write.optimizeWrite.enabled is set but this write of %s is not optimized: the "
                "shuffle is added by save() (and INSERT into views) after it.register(spark); the rows are "
                "written as they come",
                path,
            )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SplitsWritten:
        return write_splits(self.path, self.opts, self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        written = _written(messages)
        adds = [AddFile.from_json(d) for m in written for d in m.adds]
        version = core.commit_write(
            IndexTable(self.path, self.opts).log,
            self.plan,
            self.read_version,
            self.overwrite,
            adds,
            stats_files=merge_stats(written),
        )
        log.info("indextables: committed %d splits to %s as version %d", len(adds), self.path, version)
        built = vector_builds(adds)
        if built:  # built by the tasks that wrote the splits (each add's tag; the commit sums them)
            log.info(
                "indextables: the write's tasks built the vector indexes of %d splits in %.1f s (the slowest %.1f s)",
                len(built),
                sum(built) / 1000,
                max(built) / 1000,
            )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        written = _written(messages)
        adds = [d for m in written for d in m.adds]
        log.warning("indextables: write to %s failed; deleting %d uncommitted splits", self.path, len(adds))
        delete_written(self.path, self.opts, adds, merge_stats(written))


def _written(messages: list[WriterCommitMessage | None]) -> list[SplitsWritten]:
    """The tasks' results (Spark gives None for a task that failed before sending one)."""
    return [m for m in messages if isinstance(m, SplitsWritten)]
