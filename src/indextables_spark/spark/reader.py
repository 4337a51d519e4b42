"""Batch reader: plan splits on the driver (prune, skip, group), search them on executors.

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
with per-split statistics (like per-shard scoring in Elasticsearch's default mode).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from indextables_spark.errors import InvalidOptionError, QueryParseError
from indextables_spark.core.log.actions import AddFile
from indextables_spark.config.options import Options
from indextables_spark.core.split.types import index_only_columns
from indextables_spark.spark import filters as spark_filters
from indextables_spark.spark import guard

if TYPE_CHECKING:
    from indextables_spark.spark.guard import SnapshotPin

log = logging.getLogger(__name__)

SCORE = "_score"
SNIPPET = "_snippet"
ARROW_BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"


@dataclass(frozen=True)
class ReadOptions:
    """What the options ask of a read, validated once."""

    query: str | None
    order_by_score: bool
    limit: int | None
    with_score: bool  # a `_score` column is part of the schema
    snippet_fields: tuple[str, ...]
    batch_rows: int
    columns: tuple[str, ...] | None = None  # the `columns` option: the declared columns (None: all)

    @property
    def top_n(self) -> bool:
        """Rows are ranked: each task returns only its best `limit` rows."""
        return self.limit is not None and self.query is not None


def read_options(opts: Options) -> ReadOptions:
    query = opts.get_str("query")
    order = (opts.get_str("orderBy") or "").strip()
    order_by_score = False
    if order:
        parts = order.split()
        if parts[0] != SCORE or len(parts) > 2 or (len(parts) == 2 and parts[1].lower() != "desc"):
            raise InvalidOptionError(
                f"option orderBy={order!r}: only '_score' (best first) is supported; for other orders use "
                f"DataFrame.orderBy(...) on the result"
            )
        order_by_score = True
        if query is None:
            raise InvalidOptionError("option orderBy='_score' needs option 'query' (scores rank query matches)")
    limit = None
    raw_limit = opts.get_str("limit")
    if raw_limit is not None:
        limit = opts.get_int("limit")
        if limit <= 0:
            raise InvalidOptionError(f"option limit={raw_limit!r}: expected a positive number of rows")
    raw_columns = opts.get_str("columns")
    columns = None if raw_columns is None else tuple(c.strip() for c in raw_columns.split(",") if c.strip())
    if columns is not None and len(set(columns)) != len(columns):
        dup = sorted({c for c in columns if columns.count(c) > 1})
        raise InvalidOptionError(f"option columns={raw_columns!r}: {dup} named more than once")
    named_score = columns is not None and SCORE in columns
    if named_score and query is None:
        raise InvalidOptionError(
            f"option columns={raw_columns!r}: '{SCORE}' needs option 'query' (scores rank query matches)"
        )
    with_score = (
        order_by_score or (limit is not None and query is not None) or opts.get_bool("withScore") or named_score
    )
    fields = tuple(f.strip() for f in (opts.get_str("snippetFields") or "").split(",") if f.strip())
    if columns is not None and SNIPPET in columns and not fields:
        raise InvalidOptionError(f"option columns={raw_columns!r}: '{SNIPPET}' needs option snippetFields")
    batch_rows = opts.get_int("read.batchSize")
    if batch_rows <= 0:
        raise InvalidOptionError(f"option read.batchSize={batch_rows}: expected a positive number of rows")
    return ReadOptions(query, order_by_score, limit, with_score, fields, batch_rows, columns)


def declared_fields(ro: ReadOptions, table_fields: list, extra: list) -> tuple[list, list]:
    """(data fields, extra fields) a read declares: every column, or those the `columns` option
    names in its order (unknown names: InvalidOptionError naming them and the table's columns).
    The `_score` column stays while a top-n read orders by it (the load wrapper sorts on it)."""
    if ro.columns is None:
        return table_fields, extra
    by_name = {f.name: f for f in table_fields}
    virtual = {f.name: f for f in extra}
    unknown = [c for c in ro.columns if c not in by_name and c not in virtual]
    if unknown:
        raise InvalidOptionError(
            f"option columns: {unknown} are not columns of the table (columns: {list(by_name)}"
            + (f"; with these options also {list(virtual)}" if virtual else "")
            + ")"
        )
    keep_score = ro.order_by_score or ro.top_n
    wanted_extra = [f for f in extra if f.name in ro.columns or (f.name == SCORE and keep_score)]
    return [by_name[c] for c in ro.columns if c in by_name], wanted_extra


def table_specs(snapshot, opts: Options) -> list:
    """How the table's columns are indexed: its recorded settings (typemap, ...) under these options."""
    from indextables_spark.core.split.column_specs import table_options
    from indextables_spark.core.split.column_specs import column_specs

    return column_specs(snapshot.schema_json, snapshot.partition_columns, table_options(snapshot, opts))


def check_table_query(
    snapshot, opts: Options, query: str, files: list[AddFile] | None = None, every: bool = False
) -> None:
    """Raise QueryParseError for a query the splits cannot parse, without opening one: checked
    against the doc mapping of each split (`files`, default all live ones); every=True → invalid for
    any of them (what a read of those splits would hit), else only when invalid for all of them
    (a table whose newer splits gained a column may still be read by partitions that have it)."""
    from indextables_spark.core.split.query_parsing import check_query
    from indextables_spark.core.split.reference import specs_for_doc_mapping

    if files is None:  # the Arrow column: no AddFile objects built for a large table
        refs = set(snapshot.files_table.column("docMappingRef").unique().to_pylist())
    else:
        refs = {f.doc_mapping_ref for f in files}
    mappings = [m for m in (snapshot.doc_mapping(r) for r in sorted(r for r in refs if r)) if m]
    candidates = [specs_for_doc_mapping(m, snapshot.schema_json, snapshot.partition_columns) for m in mappings] or [
        table_specs(snapshot, opts)
    ]
    errors = []
    for specs in candidates:
        try:
            check_query(specs, query)
        except QueryParseError as e:
            if every:
                raise
            errors.append(e)
    if len(errors) == len(candidates):
        raise errors[0]


def extra_fields(ro: ReadOptions, table_schema: StructType, partition_columns: list[str]) -> list:
    """The `_score` / `_snippet` StructFields a read adds to the table's columns."""
    from pyspark.sql.types import FloatType, MapType, StringType, StructField

    out = []
    if ro.with_score:
        out.append(StructField(SCORE, FloatType(), True))
    if ro.snippet_fields:
        strings = {
            f.name
            for f in table_schema.fields
            if isinstance(f.dataType, StringType) and f.name not in partition_columns
        }
        bad = [c for c in ro.snippet_fields if c not in strings]
        if bad:
            raise InvalidOptionError(
                f"option snippetFields: {bad} are not string columns stored in the splits "
                f"(string columns: {sorted(strings)})"
            )
        if not ro.query:
            raise InvalidOptionError("option snippetFields needs option 'query' (snippets highlight query matches)")
        one = len(ro.snippet_fields) == 1
        out.append(StructField(SNIPPET, StringType() if one else MapType(StringType(), StringType()), True))
    return out


@dataclass
class SplitGroup(InputPartition):
    """One Spark task: a few splits read one after another."""

    files: list[dict]  # AddFile wire JSON
    deletes: dict[str, list[dict]]  # split path -> its delete logs (deleteLog wire JSON); splits with deletes only

    def __init__(self, files: list[dict], deletes: dict[str, list[dict]] | None = None):
        self.files = files
        self.deletes = deletes or {}


class IndexTablesReader(DataSourceReader):
    """One planned read. Which snapshot it reads and whether it takes Spark's filters depends on
    the plan guard (module `spark/guard.py`): a guarded scan is planned afresh by Spark for every
    query, so it reads the latest version and narrows by the pushed filters; an unguarded one may
    be reused by Spark for later scans of the same relation, so it reads the version pinned when
    the DataFrame was loaded and leaves every filter to Spark."""

    def __init__(self, path: str, opts: Options, schema: StructType, pin: "SnapshotPin"):
        self.path = path
        self.opts = opts
        self.schema_json = schema.jsonValue()
        self.pin = pin
        self.read_opts = read_options(opts)
        self.option_query = self.read_opts.query
        self.index_queries: list[str] = []  # from `_indexall = '...'` filters
        self.nested_queries: list[str] = []  # narrowing for filters on struct fields (Spark re-checks)
        self.partition_filters: list = []
        self.data_filters: list = []
        self.guarded = False
        self._snapshot = None

    def _bind(self, snapshot) -> None:
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
        unstored = [c for c in self.read_opts.snippet_fields if any(s.index_only and s.name == c for s in self.specs)]
        if unstored:
            raise InvalidOptionError(
                f"snippets of {unstored} on {self.path}: index-only columns (indexing.indexonlyfields) keep no "
                f"text to cut snippets from"
            )

    def _ensure_bound(self) -> None:
        if self._snapshot is None:
            self._bind(self.pin.snapshot(self.path, self.opts, latest=False))

    def __getstate__(self):
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

    def pushFilters(self, filters):
        from indextables_spark.expr.filters import columns_of, supports

        filters = list(filters)
        verdicts = [indexall_filter(f) for f in filters]
        epoch = next((v.epoch for v in verdicts if isinstance(v, guard.Guard)), None)
        queries = sorted(v for v in verdicts if isinstance(v, str))
        self.guarded = epoch is not None
        self.partition_filters, self.data_filters, self.index_queries = [], [], []
        self.nested_queries = []
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
        from indextables_spark.expr.operators import decode

        # search operators arrive encoded (expr/operators.py): checked against this table now
        self.index_queries = [decode(q, self.specs) for q in queries]
        parts = set(self.partition_columns)
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
            cols = columns_of(core)
            if cols <= parts:
                self.partition_filters.append(core)
            elif not (cols & parts) and supports(core, self.specs):
                self.data_filters.append(core)

    def _take_index_only(self, filters: list) -> None:
        """Add the filters on index-only columns to the data filters, each one the index answers
        exactly (UnsupportedFilterError naming it otherwise: the rows cannot check it)."""
        from indextables_spark.expr.filters import UnsupportedFilterError, check_index_only

        where = f"a Spark read of {self.path}"
        core = []
        for f in filters:
            c = spark_filters.convert(f, self.column_types)
            if c is None:
                raise UnsupportedFilterError(
                    f"filter {f!r} on index-only column {_filter_column(f)!r} ({where}; indexing.indexonlyfields): "
                    f"its value has no index form, and the rows do not hold the column"
                )
            core.append(c)
        self.data_filters.extend(check_index_only(core, self.specs, where))

    def _live_files(self) -> list[AddFile]:
        from indextables_spark.core.split.file_pruning import prune_files

        types = {c: self.column_types[c] for c in self.partition_columns}
        files, (n_total, n_after_partitions, n_after_stats) = prune_files(
            self.path,
            self.opts,
            self._snapshot,
            self.partition_filters,
            self.data_filters,
            self.partition_columns,
            types,
            self.specs,
        )
        log.info(
            "indextables: %s v%d: %d splits; %d pruned by partition filters, %d skipped by data skipping "
            "(min/max stats), %d by Bloom filters; %d to read",
            self.path,
            self.version,
            n_total,
            n_total - n_after_partitions,
            n_after_partitions - n_after_stats,
            n_after_stats - len(files),
            len(files),
        )
        self._pruning = (n_total, n_after_partitions, n_after_stats, len(files))
        return files

    def _explanation(self) -> dict:
        """What this read does, for it.explain(df) (the same fields as IndexTable.explain)."""
        from indextables_spark.expr.model import render
        from indextables_spark.core.split.search_explain import index_translation

        answered, narrowed, rows_only, tantivy_query = index_translation(
            self.specs, self.query, self.data_filters, self.data_filters
        )
        n_total, n_parts, n_stats, n_read = self._pruning
        return {
            "path": self.path,
            "version": self.version,
            "guarded": self.guarded,
            "query": self.query,
            "partition_filters": [render(f) for f in self.partition_filters],
            "index_answered": [render(f) for f in answered],
            "index_narrowed": [render(f) for f in narrowed],
            "rows_only": [render(f) for f in rows_only],
            "struct_field_narrowing": self.nested_queries,
            "tantivy_query": tantivy_query,
            "spark_rechecks_every_filter": True,
            "splits_total": n_total,
            "splits_after_partition_pruning": n_parts,
            "splits_after_data_skipping": n_stats,
            "splits_after_bloom_filters": n_read,
        }

    def partitions(self):
        self._ensure_bound()
        ro = self.read_opts
        if not self.guarded and (ro.limit is not None or ro.order_by_score):
            raise InvalidOptionError(guard.unguarded_ranking_message(self.path))
        files = self._live_files()
        if self.query is not None:  # refused here rather than in every task
            check_table_query(self._snapshot, self.opts, self.query, files, every=True)
        from indextables_spark.core.split.groups import group_by_size

        min_groups = self.opts.get_int("read.minPartitions")
        if self.opts.get_str("read.maxPartitionBytes") is None and (self.query is not None or self.data_filters):
            # A search or pushed filters: a task's work is a few index lookups per split and the
            # rows that match, not the split bytes, while each task costs Spark's Python runner
            # ~50-100 ms. One wave of tasks (read.minPartitions = the cores) answers it.
            target = 1 << 62
        else:
            target = self.opts.get_size("read.maxPartitionBytes")
        groups = group_by_size(files, target, min_groups)
        guard.record_explanation({**self._explanation(), "tasks": max(1, len(groups))})
        if not groups:
            return [SplitGroup([])]
        from indextables_spark.core.log.delete_logs import deletes_json

        return [SplitGroup([task_json(f) for f in g], deletes_json(self._snapshot, g)) for g in groups]

    def read(self, partition: SplitGroup) -> Iterator[pa.RecordBatch]:
        from indextables_spark.core.split.arrow_types import arrow_schema

        target = arrow_schema(self.schema_json, field_metadata=True)  # = Spark's to_arrow_schema
        adds = [AddFile.from_json(d) for d in partition.files]
        ro = self.read_opts
        query = self.query
        if (ro.with_score or SNIPPET in target.names) and query is not None:
            # snippets are made with the split's index, as scores are: the ranked path
            yield from read_ranked(self, adds, target, query, partition.deletes)
            return
        yield from TaskRead(self, target).batches(adds, partition.deletes, ro.limit)


PLANNING_ONLY = ("stats", "minValues", "maxValues")  # AddFile fields tasks never read


def task_json(add: AddFile) -> dict:
    """What a task needs of an AddFile: min/max statistics only serve planning, and are two thirds
    of the JSON each task's partition carries (100,000 splits: ~70 MB for a full read)."""
    d = add.to_json()
    # (a split logged with its row count only inside `stats` keeps them: deletes check row counts)
    drop = PLANNING_ONLY if d.get("numRecords") is not None else PLANNING_ONLY[1:]
    return {k: v for k, v in d.items() if k not in drop}


class TaskRead:
    """What every split of one task shares (storage, cache, the columns to read and their types),
    worked out once: with hundreds of small splits a task's cost is per split, not per row."""

    def __init__(self, reader: IndexTablesReader, target: pa.Schema):
        from indextables_spark.core.split.cache import get_cache
        from indextables_spark.core.storage import open_storage

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

    def open(self, add: AddFile):
        """The split's reader (fetched into the split cache if needed)."""
        from indextables_spark.core.split.reader import SplitReader

        return SplitReader(self.cache.local_dir(self.storage, add, self.index_query))

    def deletes(self, add: AddFile, delete_logs: list[dict] | None):
        """The split's SplitDeletes from its shipped deleteLog JSON, None without any."""
        from indextables_spark.core.log.delete_logs import split_deletes

        return split_deletes(self.reader.path, self.reader.opts, add, delete_logs)

    def split_batches(self, add: AddFile, delete_logs: list[dict] | None) -> Iterator[pa.RecordBatch]:
        """Rows of one split matching the read, its data columns only (`data_schema`)."""
        from indextables_spark.core.split.split_rows import conform, split_rows

        r = self.reader
        split = self.open(add)
        deletes = self.deletes(add, delete_logs)
        query = _narrowed_query(r, split)
        for batch in split_rows(split, r.data_filters, query, self.names, self.types, r.read_opts.batch_rows, deletes):
            yield batch if batch.schema.equals(self.data_schema) else conform(batch, self.data_schema)

    def pieces(
        self, adds: list[AddFile], deletes: dict[str, list[dict]], limit: int | None
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
        self, adds: list[AddFile], deletes: dict[str, list[dict]], limit: int | None
    ) -> Iterator[pa.RecordBatch]:
        """The task's output: the pieces joined into batches of the target schema, partition
        values attached once per joined batch (split.search.joined)."""
        from indextables_spark.core.split.split_rows import joined

        pieces = self.pieces(adds, deletes, limit)
        return joined(pieces, self.reader.read_opts.batch_rows, self.target, self.reader.partition_columns)


class UnpushedReader(IndexTablesReader):
    """The reader Spark plans without filter pushdown (pushdown off, or a scan with no filter it
    can push): it never gets filters, and not overriding pushFilters keeps it valid when the
    session has `spark.sql.python.filterPushdown.enabled=false`."""

    pushFilters = DataSourceReader.pushFilters


def _filter_column(f) -> str | None:
    """The lower-cased top-level column a pushed Spark filter reads (through NOT); None for others."""
    from pyspark.sql import datasource as sds

    while isinstance(f, sds.Not):
        f = f.child
    attr = getattr(f, "attribute", None)
    if isinstance(attr, (tuple, list)):
        return str(attr[0]).lower() if attr else None
    return str(attr).lower() if attr is not None else None


def indexall_filter(f):
    """How a filter on the `_indexall` pseudo-column is consumed: the query text (EqualTo), the
    plan guard (a `guard.Guard`), True for IS NOT NULL (implied by a query), None when not about it."""
    from pyspark.sql import datasource as sds

    from indextables_spark.spark.guard import INDEXALL

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


def _data_names(reader: IndexTablesReader, target: pa.Schema) -> list[str]:
    from indextables_spark.spark.guard import INDEXALL, INDEXGUARD

    virtual = {INDEXALL, INDEXGUARD, SCORE, SNIPPET}
    return [f.name for f in target if f.name not in reader.partition_columns and f.name not in virtual]


def _narrowed_query(reader: IndexTablesReader, split) -> str | None:
    """The read's full-text query AND the narrowing of its struct-field filters (those whose json
    field this split has: a split written before the column existed has none to search). Only for
    unscored reads: the narrowing must not change scores, and Spark re-checks those filters."""
    from indextables_spark.expr.filters import with_narrowing

    return with_narrowing(reader.query, reader.nested_queries, split.specs)


def read_ranked(
    reader: IndexTablesReader,
    adds: list[AddFile],
    target: pa.Schema,
    query: str,
    deletes: dict[str, list[dict]] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Query matches with `_score` (and `_snippet`): every match, or with a limit the task's top n
    (each split's top n, merged)."""
    from indextables_spark.core.split.split_rows import with_partition_values

    ro = reader.read_opts
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
        from indextables_spark.core.split.split_rows import top_n

        merged = top_n(pa.concat_tables(kept), ro.limit)
        yield from merged.combine_chunks().to_batches(max_chunksize=ro.batch_rows)


def with_snippets(split, table: pa.Table, query: str, fields: tuple[str, ...]) -> pa.Table:
    from indextables_spark.core.split.split_rows import snippet_column

    return table.append_column(SNIPPET, snippet_column(split, table, query, fields))


# ---------------------------------------------------------------------------------------------
# Driver side, around `spark.read.format("indextables").load()` (called by the load wrapper)


def load_options(spark, given: Mapping[str, object]) -> dict[str, str]:
    """Session settings a read needs that the data source cannot see (it gets no Spark conf):
    the Arrow batch size, and the cores (so that a small read is one wave of tasks)."""
    keys = {str(k).lower().removeprefix("spark.indextables.") for k in given}
    out = {}
    if "read.batchsize" not in keys:
        size = spark.conf.get(ARROW_BATCH_CONF, None)
        if size:
            out["read.batchSize"] = str(size)
    if "read.minpartitions" not in keys:
        from indextables_spark.util.sessions import default_parallelism

        out["read.minPartitions"] = str(default_parallelism(spark))
    return out


def finish_load(df, given: Mapping[str, object]):
    """The read as the user sees it: the global top n / score order the options ask for, and
    without the virtual `_indexall` column."""
    from indextables_spark.spark.guard import INDEXALL

    ro = read_options(Options.of({str(k): v for k, v in given.items()}))
    df = df.drop(INDEXALL)  # the guard already dropped `_indexguard`
    if ro.order_by_score or ro.top_n:
        df = df.orderBy(df[SCORE].desc())
    if ro.limit is not None:
        df = df.limit(ro.limit)
    return df
