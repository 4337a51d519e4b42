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
from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.core.log.deletes.delete_logs import deletes_json
from indextables_spark.core.log.read.snapshot import Snapshot
from indextables_spark.core.split.aggregate.agg_request import plan as plan_aggregations
from indextables_spark.core.split.aggregate.agg_result import merge_all, result
from indextables_spark.core.split.aggregate.aggregate import aggregate_files
from indextables_spark.core.split.format.column_specs import column_specs
from indextables_spark.core.split.read.groups import group_by_size
from indextables_spark.core.split.read.plan import ReadPlan
from indextables_spark.core.split.read.scan import TableScan
from indextables_spark.core.storage import Storage, open_storage
from indextables_spark.errors import InvalidOptionError
from indextables_spark.expr.search_query import SearchQuery

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


def aggregation_plan(storage: Storage, snapshot: Snapshot, options: Options, query: SearchQuery | None) -> ReadPlan:
    """The read plan of an aggregation over `snapshot` (the scan's, core/split/read/scan.py): the
    rows matching `query` (all without one; planned for the doc mappings of its live splits: a
    bad query fails here); each split runs its `index_selection` (core/split/read/plan.py)."""
    scan = TableScan(storage, snapshot, options, query=query, columns=(), subject=f"an aggregation of {storage.uri}")
    scan.plan_query(None)
    return scan.read


def aggregate(
    storage: Storage,
    snapshot: Snapshot,
    files: list[AddFile],
    plan: ReadPlan,
    aggs: Mapping[str, Any] | str | None,
    *,
    spark: Any = None,
    execution: str = "auto",
) -> dict[str, Any]:
    """Aggregations over the rows of `files` (of `snapshot`) the plan selects: IndexTable.aggregate's
    work. Returns {"doc_count": n, <name>: <result>, ...} in Elasticsearch's shape:
    terms/histogram/date_histogram/range → {"buckets": [{"key", "doc_count", <sub-aggs>}]}, stats →
    {"count", "min", "max", "sum", "avg"}, avg/min/max/sum/value_count/cardinality → {"value"},
    percentiles → {"values": {"50.0": v}}."""
    if aggs is None:
        raise InvalidOptionError("aggregate: give aggs, e.g. {'by_tag': {'terms': {'field': 'tag'}}}")
    requested = plan_aggregations(aggs, column_specs(snapshot.schema_json, snapshot.partition_columns, plan.options))
    deletes = deletes_json(snapshot, files)  # row-level deletes: those rows are in no aggregation
    if choose_execution(spark, execution) == "spark":
        merged = run_job(spark, plan, files, requested, deletes)
    else:
        merged = aggregate_files(storage, files, plan, requested, threads=os.cpu_count() or 1, deletes=deletes)
    return result(requested, merged)


def group_partial(
    plan: ReadPlan, files: list[dict[str, Any]], aggs: Sequence[Any], deletes: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """Executor side: the merged partial of one group of splits (deletes: their deleteLog JSON)."""
    storage = open_storage(plan.path, plan.options)
    return aggregate_files(storage, [AddFile.from_json(f) for f in files], plan, aggs, deletes=deletes)


def run_job(
    spark: Any,
    plan: ReadPlan,
    files: list[AddFile],
    aggs: Sequence[Any],
    deletes: dict[str, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The Spark job of execution="spark": one task per group of splits, each returning the merged
    partial of its splits under the plan it receives (classic or Spark Connect session: a
    DataFrame job, no RDDs)."""
    groups = group_by_size(files, plan.options.get_size("read.maxPartitionBytes"), sessions.default_parallelism(spark))
    if not groups:
        return merge_all(aggs, [])
    deletes = deletes or {}
    payload = [([f.to_json() for f in g], {f.path: deletes[f.path] for f in g if f.path in deletes}) for g in groups]

    def task(item: tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
        group, group_deletes = item
        return group_partial(plan, group, aggs, group_deletes)

    partials = sessions.run_tasks(
        spark, task, payload, description=f"indextables aggregate {plan.path}: {len(payload)} tasks"
    )
    return merge_all(aggs, partials)
