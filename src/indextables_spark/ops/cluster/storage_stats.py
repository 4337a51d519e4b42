"""DESCRIBE INDEXTABLES STORAGE STATS: what was fetched from object storage (S3, Azure), bytes and
GET requests, by the driver and by each executor host, since their processes started.

The reference reports tantivy4java's SplitCacheManager counters, one row for the driver and one
per executor JVM. Here the reads are made by Python processes (core/storage/fetch_stats.py counts
them): the `driver` row is the process that ran the command (over Spark Connect: the client, which
reads the transaction log; reads of splits happen in the executors' Python workers), and each
`executor-<n>` row sums the worker processes of one host that ran the command's Spark job
(`processes`: how many; worker processes that were not asked, or have exited, are not in it).
Without a SparkSession (the command line, a table function's worker), the one row is this process."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from indextables_spark.core.storage.fetch_stats import fetch_stats
from indextables_spark.ops.cluster.executors import Report, by_host, in_spark_task, on_executors, this_process
from indextables_spark.ops.command import CommandParser, Context
from indextables_spark.results.cluster import StorageStatsRow


def _counters() -> Report:
    stats = fetch_stats()
    return {"bytes": stats.bytes_fetched, "requests": stats.requests}


def storage_stats(spark: Any = None) -> list[StorageStatsRow]:
    """The driver's row (this process), then one row per executor host when `spark` is given."""
    me = this_process(_counters)
    rows = [
        StorageStatsRow(
            executor_id="executor-0" if in_spark_task() else "driver",
            host=me["host"],
            bytes_fetched=me["bytes"],
            requests=me["requests"],
        )
    ]
    if spark is None:
        return rows
    for i, (host, procs) in enumerate(by_host(on_executors(spark, _counters))):
        rows.append(
            StorageStatsRow(
                executor_id=f"executor-{i}",
                host=host,
                bytes_fetched=sum(p["bytes"] for p in procs),
                requests=sum(p["requests"] for p in procs),
                processes=len(procs),
            )
        )
    return rows


@dataclass(frozen=True)
class DescribeStorageStats:
    """DESCRIBE INDEXTABLES STORAGE STATS: bytes and GET requests fetched from object storage by
    the driver and by each executor host (as a Spark job, when a SparkSession is given)."""

    result: ClassVar[type[StorageStatsRow]] = StorageStatsRow

    @classmethod
    def parse(cls, p: CommandParser) -> DescribeStorageStats:
        return cls()

    def run(self, ctx: Context) -> list[StorageStatsRow]:
        return storage_stats(ctx.spark)
