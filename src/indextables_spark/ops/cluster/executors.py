"""Asking the Python processes of every executor something (DESCRIBE INDEXTABLES STORAGE STATS,
ENVIRONMENT): a Spark job of two tasks per core, as ops/cluster/cache.py's, so that every executor's
worker processes are reached (`mapInArrow` over `spark.range`: classic and Spark Connect); each
task answers for its process, as JSON."""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any, Callable, Iterator

import pyarrow as pa

from indextables_spark.config.sessions import default_parallelism

_TASK_SCHEMA = pa.schema([("payload", pa.string())])

Report = dict[str, Any]


def in_spark_task() -> bool:
    """Whether this process is running a Spark task now (a Python worker: a table function's, or a
    job's), not a driver or a Spark-free process. pyspark is not imported here (this layer is
    Spark-free): a worker has loaded its task context module already."""
    tc = sys.modules.get("pyspark.taskcontext")
    return tc is not None and tc.TaskContext.get() is not None


def this_process(report: Callable[[], Report]) -> Report:
    """`report()` of this process, with its host and pid."""
    return {"host": socket.gethostname(), "pid": os.getpid(), **report()}


def on_executors(spark: Any, report: Callable[[], Report]) -> list[Report]:
    """`report()` of the worker processes that ran the job's tasks (several a process when Spark
    reuses its workers: group them by `pid`)."""
    tasks = max(2, 2 * default_parallelism(spark))

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pylist([{"payload": json.dumps(this_process(report))}], schema=_TASK_SCHEMA)

    rows = spark.range(0, tasks, numPartitions=tasks).mapInArrow(task, "payload string").collect()
    return [json.loads(r.payload) for r in rows]


def by_host(reports: list[Report]) -> list[tuple[str, list[Report]]]:
    """The reports of each host (hosts sorted), one a process (the last of each pid)."""
    hosts: dict[str, dict[int, Report]] = {}
    for r in reports:
        hosts.setdefault(r["host"], {})[r["pid"]] = r
    return [(host, list(procs.values())) for host, procs in sorted(hosts.items())]
