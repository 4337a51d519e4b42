"""`IndexTable.aggregate(aggs, query=…, spark=…)`: exact aggregations without scanning rows.

Per split, Tantivy aggregates the fast fields of the matching documents (core/split/aggregate/aggregate.py has
the kinds and why each merge is exact); the partials are merged on the driver.

Where the per-split work runs (`execution`):
- "spark": one Spark job, a task per group of splits (executors download and cache splits).
- "driver": threads of the calling process (Tantivy releases the GIL); needs no SparkSession.
- "auto" (default): "driver" when there is no session or it runs in local mode (executors are
  threads of this very machine, so a job adds only its ~0.15 s of scheduling), else "spark";
  always "spark" over Spark Connect (the server may run elsewhere).
Classic and Spark Connect sessions both work (the job is a DataFrame `mapInArrow`, the options
come from `spark.conf`).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from indextables_spark.config import sessions
from indextables_spark.config.options import Options
from indextables_spark.core.log.actions import AddFile
from indextables_spark.core.log.delete_logs import deletes_json
from indextables_spark.core.log.snapshot import Snapshot
from indextables_spark.core.split.aggregate.agg_request import plan as plan_aggregations
from indextables_spark.core.split.aggregate.agg_result import merge_all, result
from indextables_spark.core.split.aggregate.aggregate import aggregate_files
from indextables_spark.core.split.format.column_specs import column_specs, table_options
from indextables_spark.core.split.read.groups import group_by_size
from indextables_spark.core.storage import Storage, open_storage
from indextables_spark.errors import InvalidOptionError

EXECUTIONS = ("auto", "spark", "driver")


def choose_execution(spark: Any, execution: str) -> str:
    if execution not in EXECUTIONS:
        raise InvalidOptionError(f"execution={execution!r}: expected one of {EXECUTIONS}")
    if execution != "auto":
        if execution == "spark" and spark is None:
            raise InvalidOptionError("execution='spark' needs a SparkSession")
        return execution
    if spark is None:
        return "driver"
    if sessions.is_connect(spark):  # the server (and its storage access) may be elsewhere
        return "spark"
    return "driver" if sessions.master(spark).startswith("local") else "spark"


def aggregate(
    storage: Storage,
    snapshot: Snapshot,
    files: list[AddFile],
    options: Options,
    aggs: Mapping[str, Any] | str | None,
    *,
    query: str | None = None,
    spark: Any = None,
    execution: str = "auto",
) -> dict[str, Any]:
    """Aggregations over the rows of `files` (of `snapshot`) matching `query` (all rows when None):
    IndexTable.aggregate's work. Returns {"doc_count": n, <name>: <result>, ...} in
    Elasticsearch's shape: terms/histogram/date_histogram/range → {"buckets": [{"key",
    "doc_count", <sub-aggs>}]}, stats → {"count", "min", "max", "sum", "avg"},
    avg/min/max/sum/value_count/cardinality → {"value"}, percentiles → {"values": {"50.0": v}}."""
    if aggs is None:
        raise InvalidOptionError("aggregate: give aggs, e.g. {'by_tag': {'terms': {'field': 'tag'}}}")
    plan = plan_aggregations(
        aggs, column_specs(snapshot.schema_json, snapshot.partition_columns, table_options(snapshot, options))
    )
    deletes = deletes_json(snapshot, files)  # row-level deletes: those rows are in no aggregation
    if choose_execution(spark, execution) == "spark":
        merged = run_job(spark, storage.uri, options, files, query, plan, deletes)
    else:
        merged = aggregate_files(storage, files, query, plan, options, threads=os.cpu_count() or 1, deletes=deletes)
    return result(plan, merged)


def group_partial(
    path: str,
    options: dict[str, str],
    files: list[dict[str, Any]],
    query: str | None,
    aggs: Sequence[Any],
    deletes: dict[str, list[dict[str, Any]]],
) -> dict[str, Any]:
    """Executor side: the merged partial of one group of splits (deletes: their deleteLog JSON)."""
    opts = Options.of(options)
    return aggregate_files(
        open_storage(path, opts), [AddFile.from_json(f) for f in files], query, aggs, opts, deletes=deletes
    )


def run_job(
    spark: Any,
    path: str,
    opts: Options,
    files: list[AddFile],
    query: str | None,
    aggs: Sequence[Any],
    deletes: dict[str, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The Spark job of execution="spark": one task per group of splits, each returning the merged
    partial of its splits (classic or Spark Connect session: a DataFrame job, no RDDs)."""
    groups = group_by_size(files, opts.get_size("read.maxPartitionBytes"), sessions.default_parallelism(spark))
    if not groups:
        return merge_all(aggs, [])
    deletes = deletes or {}
    payload = [([f.to_json() for f in g], {f.path: deletes[f.path] for f in g if f.path in deletes}) for g in groups]
    options = dict(opts.values)

    def task(item: tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
        group, group_deletes = item
        return group_partial(path, options, group, query, aggs, group_deletes)

    partials = sessions.run_tasks(
        spark, task, payload, description=f"indextables aggregate {path}: {len(payload)} tasks"
    )
    return merge_all(aggs, partials)
