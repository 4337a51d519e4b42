"""The executor side of a read: what a task's splits share (TaskRead), their rows joined into
batches of the read's schema, the ranked (top-n, scored, snippets) path, and the AddFile JSON a
task is shipped."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Protocol, Sequence

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.core.log.actions import AddFile
from indextables_spark.core.storage import open_storage
from indextables_spark.expr.struct_narrowing import with_narrowing
from indextables_spark.spark.guard import INDEXALL, INDEXGUARD
from indextables_spark.spark.read_options import SCORE, SNIPPET, ReadOptions

if TYPE_CHECKING:
    from indextables_spark.core.log.delete_logs import SplitDeletes
    from indextables_spark.core.split.read.reader import SplitReader


class ReadPlan(Protocol):
    """What a task's read needs of the driver's reader: reader.IndexTablesReader, or the streaming
    source's change-feed context (streaming.py)."""

    @property
    def path(self) -> str: ...

    @property
    def opts(self) -> Options: ...

    @property
    def read_opts(self) -> ReadOptions: ...

    @property
    def query(self) -> str | None: ...

    @property
    def partition_columns(self) -> Sequence[str]: ...

    @property
    def data_filters(self) -> Sequence[Any]: ...

    @property
    def nested_queries(self) -> Sequence[Any]: ...


PLANNING_ONLY = ("stats", "minValues", "maxValues")  # AddFile fields tasks never read


def task_json(add: AddFile) -> dict[str, Any]:
    """What a task needs of an AddFile: min/max statistics only serve planning, and are two thirds
    of the JSON each task's partition carries (100,000 splits: ~70 MB for a full read)."""
    d = add.to_json()
    # (a split logged with its row count only inside `stats` keeps them: deletes check row counts)
    drop = PLANNING_ONLY if d.get("numRecords") is not None else PLANNING_ONLY[1:]
    return {k: v for k, v in d.items() if k not in drop}


class TaskRead:
    """What every split of one task shares (storage, cache, the columns to read and their types),
    worked out once: with hundreds of small splits a task's cost is per split, not per row."""

    def __init__(self, reader: ReadPlan, target: pa.Schema):
        from indextables_spark.core.split.cache.cache import (
            get_cache,  # lazy: keeps `import indextables_spark.spark.task_read` free of numpy
        )

        self.reader = reader
        self.target = target
        self.storage = open_storage(reader.path, reader.opts)
        self.cache = get_cache(reader.opts)
        self.names = _data_names(reader, target)
        self.types = {n: target.field(n).type for n in self.names}
        self.data_schema = pa.schema([pa.field(n, self.types[n]) for n in self.names])
        # only the query text goes to the index (no data filter, struct narrowing or snippet), as
        # in SearchPlan: a remote split's index files may be fetched only as far as it reads them
        alone = not (reader.data_filters or reader.nested_queries or reader.read_opts.snippet_fields)
        self.index_query = reader.query if alone else None

    def open(self, add: AddFile) -> SplitReader:
        """The split's reader (fetched into the split cache if needed)."""
        from indextables_spark.core.split.read.reader import (
            SplitReader,  # lazy: keeps `import indextables_spark.spark.task_read` free of numpy
        )

        return SplitReader(self.cache.local_dir(self.storage, add, self.index_query))

    def deletes(self, add: AddFile, delete_logs: list[dict[str, Any]] | None) -> SplitDeletes | None:
        """The split's SplitDeletes from its shipped deleteLog JSON, None without any."""
        from indextables_spark.core.log.delete_logs import (
            split_deletes,  # lazy: keeps `import indextables_spark.spark.task_read` free of numpy
        )

        return split_deletes(self.reader.path, self.reader.opts, add, delete_logs)

    def split_batches(self, add: AddFile, delete_logs: list[dict[str, Any]] | None) -> Iterator[pa.RecordBatch]:
        """Rows of one split matching the read, its data columns only (`data_schema`)."""
        from indextables_spark.core.split.read.split_rows import (  # lazy: keeps `import indextables_spark.spark.task_read` free of numpy
            conform,
            split_rows,
        )

        r = self.reader
        split = self.open(add)
        deletes = self.deletes(add, delete_logs)
        query = _narrowed_query(r, split)
        for batch in split_rows(split, r.data_filters, query, self.names, self.types, r.read_opts.batch_rows, deletes):
            yield batch if batch.schema.equals(self.data_schema) else conform(batch, self.data_schema)

    def pieces(
        self, adds: list[AddFile], deletes: dict[str, list[dict[str, Any]]], limit: int | None
    ) -> Iterator[tuple[AddFile, pa.RecordBatch]]:
        """(split, batch of its data columns) for the splits in order, at most `limit` rows."""
        remaining = limit
        for add in adds:
            for batch in self.split_batches(add, deletes.get(add.path)):
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

        pieces = self.pieces(adds, deletes, limit)
        return joined(pieces, self.reader.read_opts.batch_rows, self.target, self.reader.partition_columns)


def _data_names(reader: ReadPlan, target: pa.Schema) -> list[str]:
    virtual = {INDEXALL, INDEXGUARD, SCORE, SNIPPET}
    return [f.name for f in target if f.name not in reader.partition_columns and f.name not in virtual]


def _narrowed_query(reader: ReadPlan, split: SplitReader) -> str | None:
    """The read's full-text query AND the narrowing of its struct-field filters (those whose json
    field this split has: a split written before the column existed has none to search). Only for
    unscored reads: the narrowing must not change scores, and Spark re-checks those filters."""

    return with_narrowing(reader.query, reader.nested_queries, split.specs)


def read_ranked(
    reader: ReadPlan,
    adds: list[AddFile],
    target: pa.Schema,
    query: str,
    deletes: dict[str, list[dict[str, Any]]] | None = None,
    corpus: dict[str, Any] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Query matches with `_score` (and `_snippet`): every match, or with a limit the task's top n
    (each split's top n, merged). `corpus`: the table version's BM25 statistics (CorpusStats JSON)
    the driver gathered; None: each split's own."""
    from indextables_spark.core.split.read.corpus_stats import (
        CorpusStats,  # lazy: keeps `import indextables_spark.spark.task_read` free of numpy
    )

    from indextables_spark.core.split.read.split_rows import (
        with_partition_values,  # lazy: keeps `import indextables_spark.spark.task_read` free of numpy
    )

    ro = reader.read_opts
    stats = CorpusStats.from_json(corpus) if corpus is not None else None
    task = TaskRead(reader, target)
    # snippets are made from their fields' text, which a `columns` read may not declare
    names = task.names + [f for f in ro.snippet_fields if f not in task.names and SNIPPET in target.names]
    kept: list[pa.Table] = []
    for add in adds:
        split = task.open(add)
        stored = set(split.schema.names)  # columns the split lacks (index-only, added later) come back NULL
        table = split.search_scored(
            query,
            ro.limit,
            reader.data_filters,
            [n for n in names if n in stored],
            deletes=task.deletes(add, (deletes or {}).get(add.path)),
            corpus=stats,
        )
        if ro.snippet_fields and SNIPPET in target.names:
            table = with_snippets(split, table, query, ro.snippet_fields)
        if len(names) > len(task.names):
            table = table.drop_columns([n for n in names[len(task.names) :] if n in stored])
        table = with_partition_values([(add, table)], target, reader.partition_columns)
        if ro.limit is None:
            yield from table.to_batches(max_chunksize=ro.batch_rows)
        else:
            kept.append(table)
    if kept:
        from indextables_spark.core.split.read.split_rows import (
            top_n,  # lazy: keeps `import indextables_spark.spark.task_read` free of numpy
        )

        assert ro.limit is not None  # tables are kept only for a limit
        merged = top_n(pa.concat_tables(kept), ro.limit)
        yield from merged.combine_chunks().to_batches(max_chunksize=ro.batch_rows)


def with_snippets(split: SplitReader, table: pa.Table, query: str, fields: tuple[str, ...]) -> pa.Table:
    from indextables_spark.core.split.read.split_rows import (
        snippet_column,  # lazy: keeps `import indextables_spark.spark.task_read` free of numpy
    )

    return table.append_column(SNIPPET, snippet_column(split, table, query, fields))
