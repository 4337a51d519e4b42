"""The executor side of a read: a task's splits run the driver's ReadPlan
(core/split/read/plan.py) — their rows joined into batches of the read's schema (TaskRead), or
ranked (top n, scores, snippets: read_ranked) — and the AddFile JSON a task is shipped."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Sequence

import pyarrow as pa

from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.core.storage import open_storage
from indextables_spark.spark.guard import INDEXALL, INDEXGUARD
from indextables_spark.spark.read_options import DISTANCE, SCORE, SNIPPET

if TYPE_CHECKING:
    from indextables_spark.core.log.deletes.delete_logs import SplitDeletes
    from indextables_spark.core.split.read.plan import ReadPlan
    from indextables_spark.core.split.read.reader import SplitReader


PLANNING_ONLY = ("stats", "minValues", "maxValues")  # AddFile fields tasks never read


def task_json(add: AddFile) -> dict[str, Any]:
    """What a task needs of an AddFile: min/max statistics only serve planning, and are two thirds
    of the JSON each task's partition carries (100,000 splits: ~70 MB for a full read)."""
    d = add.to_json()
    # (a split logged with its row count only inside `stats` keeps them: deletes check row counts)
    drop = PLANNING_ONLY if d.get("numRecords") is not None else PLANNING_ONLY[1:]
    return {k: v for k, v in d.items() if k not in drop}


class TaskRead:
    """What every split of one task shares (the plan, storage, cache), worked out once: with
    hundreds of small splits a task's cost is per split, not per row."""

    def __init__(self, plan: ReadPlan, target: pa.Schema):
        from indextables_spark.core.split.cache.cache import (
            get_cache,  # lazy: keeps `import indextables_spark.spark.task_read` free of numpy
        )

        self.plan = plan
        self.target = target
        self.storage = open_storage(plan.path, plan.options)
        self.cache = get_cache(plan.options)

    def fetch(self, adds: Sequence[AddFile]) -> None:
        """Fetch the task's splits the cache lacks (what the plan's index query reads of them) at
        once, before they are read one after another."""
        from indextables_spark.core.split.read.split_threads import (
            fetch_missing,  # lazy: keeps `import indextables_spark.spark.task_read` free of numpy
        )

        fetch_missing(self.storage, self.plan.options, adds, self.plan.index_query, reads=self.plan.index_reads)

    def open(self, add: AddFile) -> SplitReader:
        """The split's reader (fetched into the split cache if needed)."""
        from indextables_spark.core.split.read.reader import (
            SplitReader,  # lazy: keeps `import indextables_spark.spark.task_read` free of numpy
        )

        return SplitReader(self.cache.local_dir(self.storage, add, self.plan.index_query, reads=self.plan.index_reads))

    def deletes(self, add: AddFile, delete_logs: list[dict[str, Any]] | None) -> SplitDeletes | None:
        """The split's SplitDeletes from its shipped deleteLog JSON, None without any."""
        from indextables_spark.core.log.deletes.delete_logs import (
            split_deletes,  # lazy: keeps `import indextables_spark.spark.task_read` free of numpy
        )

        return split_deletes(self.plan.path, self.plan.options, add, delete_logs)

    def pieces(
        self, adds: list[AddFile], deletes: dict[str, list[dict[str, Any]]], limit: int | None
    ) -> Iterator[tuple[AddFile, pa.RecordBatch]]:
        """(split, batch of its data columns) for the splits in order, at most `limit` rows."""
        remaining = limit
        for add in adds:
            for batch in self.plan.rows(self.open(add), self.deletes(add, deletes.get(add.path))):
                if remaining is not None:
                    batch = batch.slice(0, remaining)
                    remaining -= batch.num_rows
                yield add, batch
                if remaining == 0:
                    return

    def batches(
        self, adds: list[AddFile], deletes: dict[str, list[dict[str, Any]]], limit: int | None
    ) -> Iterator[pa.RecordBatch]:
        """The task's output: the pieces joined into batches of the target schema, partition
        values attached once per joined batch (core/split/read/split_rows.joined)."""
        from indextables_spark.core.split.read.split_rows import (
            joined,  # lazy: keeps `import indextables_spark.spark.task_read` free of numpy
        )

        self.fetch(adds)
        pieces = self.pieces(adds, deletes, limit)
        return joined(pieces, self.plan.batch_rows, self.target, self.plan.partition_columns)


def data_names(partition_columns: Sequence[str], target: pa.Schema) -> list[str]:
    """The data columns (not partition or virtual ones) of a read returning `target`."""
    virtual = {INDEXALL, INDEXGUARD, SCORE, SNIPPET, DISTANCE}
    return [f.name for f in target if f.name not in partition_columns and f.name not in virtual]


def read_ranked(
    plan: ReadPlan, adds: list[AddFile], target: pa.Schema, deletes: dict[str, list[dict[str, Any]]] | None = None
) -> Iterator[pa.RecordBatch]:
    """Query matches with `_score` (and `_snippet`): every match, or with a limit the top n of the
    task's splits (the driver gives a top n one task: spark/reader.py partitions), in two phases."""
    from indextables_spark.core.split.read.plan import (
        ranked_top,  # lazy: keeps `import indextables_spark.spark.task_read` free of numpy
    )
    from indextables_spark.core.split.read.split_threads import (  # lazy: as above
        FETCH_THREADS,
        in_threads,
        search_threads,
    )

    task = TaskRead(plan, target)
    # the splits' matches completed to the target's columns (but `_snippet`, which the plan adds)
    # and the snippets' text columns, which a `columns` read may not declare
    declared = [f for f in target if f.name != SNIPPET]
    extra = [f for f in plan.data_schema if f.name not in target.names]
    ranked_target = pa.schema(declared + extra)
    task.fetch(adds)
    if plan.limit is not None:  # the task's top n in two phases: the winners' rows only
        top = ranked_top(
            plan,
            adds,
            lambda add: (task.open(add), task.deletes(add, (deletes or {}).get(add.path))),
            ranked_target,
            in_threads("search", search_threads(adds)),  # a top n is one task: every split
            in_threads("fetch-rows", FETCH_THREADS),
        )
        yield from top.select(target.names).combine_chunks().to_batches(max_chunksize=plan.batch_rows)
        return
    for add in adds:
        table = plan.ranked(task.open(add), add, task.deletes(add, (deletes or {}).get(add.path)), ranked_target)
        yield from table.select(target.names).to_batches(max_chunksize=plan.batch_rows)


def read_nearest(
    plan: ReadPlan,
    adds: list[AddFile],
    ordinals: list[int],
    target: pa.Schema,
    deletes: dict[str, list[dict[str, Any]]] | None = None,
) -> Iterator[pa.RecordBatch]:
    """A vector read of the task's splits (core/split/read/vector/table_search.nearest_top): their
    k nearest rows, or with fusion the k best of the fused rankings, best first; a hybrid read is
    one task over every split (spark/reader.py partitions), so that is the read's answer."""
    from indextables_spark.core.split.read.vector.table_search import (  # lazy: numpy
        nearest_top,
        search_target,
    )

    assert plan.nearest is not None
    task = TaskRead(plan, target)
    # the target's columns and the data columns the residual filters read (`columns` may not declare them)
    returned = [f for f in target if f.name not in (SCORE, DISTANCE)]
    fields = returned + [f for f in plan.data_schema if f.name not in target.names]
    task.fetch(adds)
    out = nearest_top(
        plan,
        adds,
        lambda add: (task.open(add), task.deletes(add, (deletes or {}).get(add.path))),
        search_target(fields, plan.nearest),
        ordinals,
        search_target(returned, plan.nearest),  # the winners' rows: only the columns Spark reads
    )
    cols = [
        out.column(f.name).cast(f.type) if f.name in out.schema.names else pa.nulls(out.num_rows, f.type)
        for f in target
    ]
    yield from pa.Table.from_arrays(cols, schema=target).to_batches(max_chunksize=plan.batch_rows)
