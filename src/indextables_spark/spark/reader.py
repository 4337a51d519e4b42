"""Batch reader: plan splits on the driver (prune, skip, group), search them on executors
(task_read.py); the options: read_options.py.

Read options (besides the table's):
- `query`: full-text query (Tantivy syntax), ANDed with every `_indexall = '...'` filter.
- `orderBy` = `_score`: rows best first; adds a float `_score` column (needs a query).
- `limit` = n: with a query, the n best rows (top-n by `_score`); without one, any n rows.
- `withScore` = true: the `_score` column without ordering (e.g. on SQL views).
- `snippetFields` = `body[,title]`: a `_snippet` column with highlighted fragments (HTML `<b>`);
  a string for one field, a map field → snippet for several.
- `columns` = `a,b[,_score][,_snippet]`: the only columns the read declares (in that order), so
  Spark receives only those (Python data sources get no column pruning from Spark); an empty
  value declares none, for counts. Partition columns may be named; `_score` asks for the score
  column (needs a query), `_snippet` for the snippets of `snippetFields`.
- `read.batchSize`: rows per Arrow batch handed to Spark (default: the session's
  `spark.sql.execution.arrow.maxRecordsPerBatch`, copied by the load wrapper; else 10,000).

Spark 4.3 pushes no limit or sort into a Python data source, so a top-n read is two-level: every
task searches its splits for their top n, merges them into its own top n, and the load wrapper
(`finish_load`) adds `orderBy(_score desc).limit(n)`, which Spark runs as TakeOrderedAndProject:
each partition's top n, merged on the driver. The result is the global top n. Scores are BM25
with the table version's statistics, which the driver gathers (core/split/read/corpus_stats.py)
and ships to the tasks inside the plan.

The driver decides the read once (`partitions`: the pushed filters translated, the query checked,
the statistics gathered) into a ReadPlan (core/split/read/plan.py) that every task receives in its
SplitGroup and runs split by split (task_read.py), as the Spark-free search runs the same plan.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

import pyarrow as pa
from pyspark.sql import datasource as sds
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from indextables_spark.config.options import Options
from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.schema.types import index_only_columns
from indextables_spark.core.storage import open_storage
from indextables_spark.core.split.read.groups import group_by_size
from indextables_spark.errors import InvalidOptionError
from indextables_spark.expr.model import render
from indextables_spark.expr.operators import decode
from indextables_spark.expr.values import UnsupportedFilterError
from indextables_spark.spark import filters as spark_filters
from indextables_spark.spark import guard
from indextables_spark.spark.guard import INDEXALL
from indextables_spark.spark.read_options import SNIPPET, nearest_query, read_options, table_specs, where_conditions
from indextables_spark.spark.task_read import TaskRead, data_names, read_nearest, read_ranked, task_json
from indextables_spark.spark.worker_errors import short_tracebacks

if TYPE_CHECKING:
    from indextables_spark.core.log.read.snapshot import Snapshot
    from indextables_spark.core.split.read.plan import ReadPlan
    from indextables_spark.core.split.read.scan import TableScan
    from indextables_spark.expr.search_query import SearchQuery
    from indextables_spark.expr.model import Filter
    from indextables_spark.spark.guard import SnapshotPin


log = logging.getLogger(__name__)


@dataclass
class SplitGroup(InputPartition):
    """One Spark task: a few splits read one after another, and the plan each of them runs."""

    files: list[dict[str, Any]]  # AddFile wire JSON
    # split path -> its delete logs (deleteLog wire JSON); splits with deletes only
    deletes: dict[str, list[dict[str, Any]]]
    plan: ReadPlan
    ordinals: list[int]  # each split's position among the read's splits (a vector read's tie-break)

    def __init__(
        self,
        files: list[dict[str, Any]],
        deletes: dict[str, list[dict[str, Any]]] | None,
        plan: ReadPlan,
        ordinals: list[int] | None = None,
    ):
        self.files = files
        self.deletes = deletes or {}
        self.plan = plan
        self.ordinals = ordinals if ordinals is not None else list(range(len(files)))


@short_tracebacks("pushFilters", "partitions", "read")
class IndexTablesReader(DataSourceReader):
    """One planned read. Which snapshot it reads and whether it takes Spark's filters depends on
    the plan guard (module `spark/guard.py`): a guarded scan is planned afresh by Spark for every
    query, so it reads the latest version and narrows by the pushed filters; an unguarded one may
    be reused by Spark for later scans of the same relation, so it reads the version pinned when
    the DataFrame was loaded and leaves every filter to Spark."""

    def __init__(
        self, path: str, opts: Options, schema: StructType, pin: "SnapshotPin", checked: SearchQuery | None = None
    ):
        self.path = path
        self.opts = opts
        self.schema_json = schema.jsonValue()
        self.pin = pin
        self.read_opts = read_options(opts)
        self.option_query = self.read_opts.query
        # the `query` option as load() checked it (spark/datasource.py): its checks are not repeated
        self.checked = checked
        self.index_queries: list[str] = []  # from `_indexall = '...'` filters
        self.nested_queries: list[str] = []  # narrowing for filters on struct fields (Spark re-checks)
        self.rechecked: list[Filter] = []  # Spark's pushed filters it checks again: they prune and narrow
        self.index_only: list[Filter] = []  # filters on index-only columns: the index's alone
        self.guarded = False
        self._snapshot: Snapshot | None = None

    def _bind(self, snapshot: Snapshot) -> None:
        """Read this snapshot: its schema, partitioning and indexing settings."""
        self._snapshot = snapshot
        self.table_schema_json = snapshot.schema_json
        self.partition_columns = snapshot.partition_columns
        self.version = snapshot.version
        self.column_types = {
            f["name"]: (f["type"] if isinstance(f["type"], str) else f["type"].get("type"))
            for f in self.table_schema_json["fields"]
        }
        self.specs = table_specs(snapshot, self.opts)

    def _ensure_bound(self) -> None:
        if self._snapshot is None:
            self._bind(self.pin.snapshot(self.path, self.opts, latest=False))

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles the read function before it calls partitions(): bind now if nothing did
        self._ensure_bound()
        state = dict(self.__dict__)
        state.pop("_snapshot", None)  # executors only need the plan
        return state

    @property
    def query(self) -> str | None:
        """The full-text query: the `query` option AND every `_indexall = '...'` filter."""
        parts = ([self.option_query] if self.option_query else []) + self.index_queries
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else " AND ".join(f"({p})" for p in parts)

    def pushFilters(self, filters: list[sds.Filter]) -> Iterable[sds.Filter]:
        filters = list(filters)
        verdicts = [indexall_filter(f) for f in filters]
        epoch = next((v.epoch for v in verdicts if isinstance(v, guard.Guard)), None)
        queries = sorted(v for v in verdicts if isinstance(v, str))
        self.guarded = epoch is not None
        self.rechecked, self.index_only, self.index_queries, self.nested_queries = [], [], [], []
        if not self.guarded:
            if queries:
                raise InvalidOptionError(guard.unguarded_query_message(self.path))
            self._ensure_bound()
            unstored = index_only_columns(self.specs)
            on = [f for f in filters if _filter_column(f) in unstored]
            if on:
                raise InvalidOptionError(guard.unguarded_index_only_message(self.path, _filter_column(on[0])))
            yield from filters  # Spark applies them all (see the class docstring)
            return
        assert epoch is not None  # guarded
        self._bind(self.pin.snapshot(self.path, self.opts, latest=True))
        others = [f for f, v in zip(filters, verdicts) if v is None]
        # Filters on index-only columns are the index's alone (Spark would see NULL in the rows), like
        # the full-text query: never handed back, and sibling scans must agree on them.
        unstored = index_only_columns(self.specs)
        index_only = [f for f in others if _filter_column(f) in unstored]
        others = [f for f in others if not any(f is g for g in index_only)]
        self._take_index_only(index_only)
        recorded = queries + sorted(f"index-only filter {f!r}" for f in index_only)
        narrow = guard.record_scan(self.pin.relation_id, epoch, recorded, others, self.path)

        # search operators arrive encoded (expr/operators.py): checked against this table now
        self.index_queries = [decode(q, self.specs) for q in queries]
        for f in others:
            # Every filter goes back to Spark too: the reader planned last for this relation may
            # serve another scan of it in the same query (spark/guard.py), so Spark keeps each
            # scan's own filters; narrowing only removes rows they would remove anyway.
            yield f
            core = spark_filters.convert(f, self.column_types) if narrow else None
            if core is None:
                nested = spark_filters.nested_narrowing(f, {s.name: s for s in self.specs}) if narrow else None
                if nested is not None:
                    self.nested_queries.append(nested)
                continue
            self.rechecked.append(core)

    def _take_index_only(self, filters: list[sds.Filter]) -> None:
        """The filters on index-only columns as conditions the read decides (the scan checks that
        the index answers each exactly); UnsupportedFilterError naming one without an index form."""

        for f in filters:
            c = spark_filters.convert(f, self.column_types)
            if c is None:
                raise UnsupportedFilterError(
                    f"filter {f!r} on index-only column {_filter_column(f)!r} (a Spark read of {self.path}; "
                    f"indexing.indexonlyfields): its value has no index form, and the rows do not hold the column"
                )
            self.index_only.append(c)

    def _explanation(self, scan: TableScan) -> dict[str, Any]:
        """What this read does, for it.explain(df): the pruning, then the plan every split runs
        (described as IndexTable.explain describes it: core/split/read/search_explain.py)."""
        from indextables_spark.core.split.read.search_explain import (
            describe,  # lazy: keeps `import indextables_spark.spark.reader` free of numpy
        )

        plan, pruning = scan.read, scan.pruning
        assert pruning is not None  # (live_files counted it)
        seen = describe(plan, self.specs, scan.snapshot.num_files)
        return {
            "path": self.path,
            "version": self.version,
            "guarded": self.guarded,
            "query": self.query,
            "partition_filters": [render(f) for f in scan.part_only],
            "index_answered": list(seen.answered),
            "index_narrowed": list(seen.narrowed),
            "rows_only": list(seen.rows_only),
            "struct_field_narrowing": list(plan.narrowing),
            "tantivy_query": seen.tantivy_query,
            "statistics": seen.statistics if self.read_opts.with_score else None,
            "vector_search": seen.vector_search,
            "spark_rechecks_every_filter": True,
            "splits_total": pruning.total,
            "splits_after_partition_pruning": pruning.after_partitions,
            "splits_after_data_skipping": pruning.after_stats,
            "splits_after_bloom_filters": pruning.read,
        }

    def _scan(self) -> TableScan:
        """The read planned (core/split/read/scan.py) from what Spark pushed and the options."""
        from indextables_spark.core.split.read.scan import (
            TableScan,  # lazy: keeps `import indextables_spark.spark.reader` free of numpy
        )

        assert self._snapshot is not None  # bound
        ro = self.read_opts
        target = arrow_schema(self.schema_json, field_metadata=True)  # = Spark's to_arrow_schema
        names = set(target.names)
        text = self.query
        # load()'s checks of the `query` option carry over when no `_indexall` filter joined it
        query = self.checked if self.checked is not None and self.checked.text == text else text
        return TableScan(
            open_storage(self.path, self.opts),
            self._snapshot,
            self.opts,
            conditions=[*self.index_only, *where_conditions(self.opts, self.table_schema_json)],
            rechecked=self.rechecked,
            query=query,
            narrowing=self.nested_queries,
            nearest=nearest_query(ro, self.specs, self.opts, self.path) if ro.vector is not None else None,
            columns=[c for c in self.partition_columns if c in names] + data_names(self.partition_columns, target),
            snippets=ro.snippet_fields if SNIPPET in names and text is not None else (),
            typed=target,
            read_filter_columns=False,
            limit=ro.limit,
            batch_rows=ro.batch_rows,
            subject=f"a Spark read of {self.path}",
        )

    def partitions(self) -> list[SplitGroup]:
        self._ensure_bound()
        assert self._snapshot is not None  # bound
        ro = self.read_opts
        if not self.guarded and (ro.limit is not None or ro.order_by_score):
            raise InvalidOptionError(guard.unguarded_ranking_message(self.path))
        scan = self._scan()
        tasks = scan.plan_files()
        files = [t.file for t in tasks]
        assert scan.pruning is not None  # (plan_files counted it)
        log.info(
            "indextables: %s v%d: %d splits; %d pruned by partition filters, %d skipped by data skipping "
            "(min/max stats), %d by Bloom filters; %d to read",
            self.path,
            self.version,
            scan.pruning.total,
            scan.pruning.total - scan.pruning.after_partitions,
            scan.pruning.after_partitions - scan.pruning.after_stats,
            scan.pruning.after_stats - len(files),
            len(files),
        )
        if ro.with_score and scan.text is not None:
            scan.ranking(ro.limit)  # the version's BM25 statistics, gathered here and shipped

        if self._ranked_top_n() and files:
            # A top n by score: one task ranks every split (scores and row ids only) and fetches
            # the rows of the global n alone, as the Spark-free search does (plan.ranked_top);
            # a task per core would each fetch its own n rows (cores x n small reads).
            groups = [list(files)]
        else:
            groups = task_groups(self.opts, files, self.query is not None or bool(scan.pushed))
        plan = scan.read
        guard.record_explanation({**self._explanation(scan), "tasks": max(1, len(groups))})
        if not groups:
            return [SplitGroup([], None, plan)]
        # each split's delete logs and ordinal as plan_files found them (not looked up again)
        task_of = {t.file.path: t for t in tasks}
        return [
            SplitGroup(
                [task_json(f) for f in g],
                {f.path: [d.to_json() for d in task_of[f.path].delete_logs] for f in g if task_of[f.path].delete_logs},
                plan,
                [task_of[f.path].ordinal for f in g],
            )
            for g in groups
        ]

    def _ranked_top_n(self) -> bool:
        """A top n one task answers: a full-text top n (the read ranks its matches: read's ranked
        path, and keeps `limit`), or a hybrid vector read (its fusion ranks every split's candidates)."""
        ro = self.read_opts
        ranked = ro.with_score or SNIPPET in arrow_schema(self.schema_json).names
        return ro.hybrid or (ro.limit is not None and ro.vector is None and self.query is not None and ranked)

    # Spark hands back the SplitGroups partitions() made
    def read(self, partition: SplitGroup) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        plan = partition.plan
        if not partition.files:
            return
        target = arrow_schema(self.schema_json, field_metadata=True)  # = Spark's to_arrow_schema
        adds = [AddFile.from_json(d) for d in partition.files]
        if plan.nearest is not None:
            yield from read_nearest(plan, adds, partition.ordinals, target, partition.deletes)
            return
        if (self.read_opts.with_score or SNIPPET in target.names) and plan.text is not None:
            # snippets are made with the split's index, as scores are: the ranked path
            yield from read_ranked(plan, adds, target, partition.deletes)
            return
        yield from TaskRead(plan, target).batches(adds, partition.deletes, plan.limit)


class UnpushedReader(IndexTablesReader):
    """The reader Spark plans without filter pushdown (pushdown off, or a scan with no filter it
    can push): it never gets filters, and not overriding pushFilters keeps it valid when the
    session has `spark.sql.python.filterPushdown.enabled=false`."""

    pushFilters = DataSourceReader.pushFilters


def task_groups(opts: Options, files: Sequence[AddFile], searched: bool) -> list[list[AddFile]]:
    """A read's splits divided into Spark tasks (a batch read's, a stream's micro-batch)."""
    if opts.get_str("read.maxPartitionBytes") is None and searched:
        # A search or pushed filters: a task's work is a few index lookups per split and the
        # rows that match, not the split bytes, while each task costs Spark's Python runner
        # ~50-100 ms. One wave of tasks (read.minPartitions = the cores) answers it.
        target = 1 << 62
    else:
        target = opts.get_size("read.maxPartitionBytes")
    return group_by_size(files, target, opts.get_int("read.minPartitions"))


def _filter_column(f: sds.Filter) -> str | None:
    """The lower-cased top-level column a pushed Spark filter reads (through NOT); None for others."""

    while isinstance(f, sds.Not):
        f = f.child
    attr = getattr(f, "attribute", None)
    if isinstance(attr, (tuple, list)):
        return str(attr[0]).lower() if attr else None
    return str(attr).lower() if attr is not None else None


def indexall_filter(f: sds.Filter) -> str | guard.Guard | bool | None:
    """How a filter on the `_indexall` pseudo-column is consumed: the query text (EqualTo), the
    plan guard (a `guard.Guard`), True for IS NOT NULL (implied by a query), None when not about it."""

    if isinstance(f, sds.EqualTo) and tuple(f.attribute) == (INDEXALL,) and isinstance(f.value, str):
        return f.value
    if (  # the DataFrame helpers' form (it.textsearch(...)): NOT (_indexall <=> '<condition>')
        isinstance(f, sds.Not)
        and isinstance(f.child, sds.EqualNullSafe)
        and tuple(f.child.attribute) == (INDEXALL,)
        and isinstance(f.child.value, str)
    ):
        return f.child.value
    if isinstance(f, sds.IsNotNull) and tuple(f.attribute) == (INDEXALL,):
        return True
    if (
        isinstance(f, sds.Not)
        and isinstance(f.child, sds.EqualNullSafe)
        and tuple(f.child.attribute) == (guard.INDEXGUARD,)
        and isinstance(f.child.value, str)
    ):
        return guard.parse(f.child.value)
    return None
