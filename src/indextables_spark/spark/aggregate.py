"""The Spark job behind `it.aggregate(..., execution="spark")`: one task per group of splits,
each returning the merged partial of its splits; the driver merges the task partials."""
from __future__ import annotations

from typing import Any, Sequence

from ..log.actions import AddFile
from ..options import Options
from .reader import DEFAULT_PARTITION_BYTES, group_by_size


def group_partial(path: str, options: dict, files: list[dict], query: str | None, aggs: Sequence[Any],
                  deletes: dict[str, list[dict]]) -> dict:
    """Executor side: the merged partial of one group of splits (deletes: their deleteLog JSON)."""
    from ..split.aggregate import aggregate_files
    from ..storage import open_storage

    opts = Options.of(options)
    return aggregate_files(open_storage(path, opts), [AddFile.from_json(f) for f in files], query, aggs, opts,
                           deletes=deletes)


def run_job(spark: Any, path: str, opts: Options, files: list[AddFile], query: str | None,
            aggs: Sequence[Any], deletes: dict[str, list[dict]] | None = None) -> dict:
    """One task per group of splits (classic or Spark Connect session: a DataFrame job, no RDDs)."""
    from ..sessions import default_parallelism, run_tasks
    from ..split.aggregate import merge_all

    groups = group_by_size(files, opts.get_size("read.maxPartitionBytes", DEFAULT_PARTITION_BYTES),
                           default_parallelism(spark))
    if not groups:
        return merge_all(aggs, [])
    deletes = deletes or {}
    payload = [([f.to_json() for f in g], {f.path: deletes[f.path] for f in g if f.path in deletes}) for g in groups]
    options = dict(opts.values)

    def task(item: tuple[list[dict], dict]) -> dict:
        group, group_deletes = item
        return group_partial(path, options, group, query, aggs, group_deletes)

    partials = run_tasks(spark, task, payload, description=f"indextables aggregate {path}: {len(payload)} tasks")
    return merge_all(aggs, partials)
