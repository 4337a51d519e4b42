"""ReadPlan: one read, decided once, run split by split by every reader.

Where a read is planned — the calling process for the Spark-free API and `indextables_search`
(read/search.py's SearchPlan), the driver for a Spark read (spark/reader.py translates what Spark
pushed) or a streaming micro-batch (spark/streaming.py) — the decisions are made once: the query
(expr/search_query.py's SearchQuery: the text and the struct-field narrowing, analysed and checked
for the splits' doc mappings), the data filters each split applies exactly, the data columns read,
the limit, the snippet fields and the corpus-wide BM25 statistics (read/corpus_stats.py). The plan
is a frozen value: Spark tasks receive it pickled in their InputPartition, and every split of the
read runs the same steps whatever the route: `rows` (matching rows in row order), `ranked` (matches
with `_score`, best first), `count`, `row_ids` (what DELETE removes: ops/write/delete.py) and
`index_selection` (the Tantivy query of the rows when the index alone selects them: aggregations,
core/split/aggregate/aggregate.py). Explain describes the same value (read/search_explain.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.config.options import Options
from indextables_spark.core.split.cache.fetch_plan import IndexQuery, IndexRead
from indextables_spark.core.split.read.corpus_stats import CorpusStats
from indextables_spark.core.split.read.vector.query import NearestQuery
from indextables_spark.core.split.read.reader import (
    ROW_ID_COLUMN,
    SCORE_COLUMN,
    SplitReader,
    top_column,
)
from indextables_spark.core.split.read.row_selection import selected_rows
from indextables_spark.core.split.read.split_rows import (
    columns_of_all,
    conform,
    snippet_column,
    split_rows,
    top_n,
    with_partition_values,
)
from indextables_spark.errors import InvalidOptionError
from indextables_spark.expr.arrow_eval import arrow_mask
from indextables_spark.expr.model import Filter, columns_of, render
from indextables_spark.expr.support import supports
from indextables_spark.expr.values import UnsupportedFilterError

if TYPE_CHECKING:
    import tantivy

    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.core.log.deletes.delete_logs import SplitDeletes
    from indextables_spark.core.schema.types import ColumnSpec
    from indextables_spark.expr.search_query import SearchQuery

SNIPPET_COLUMN = "_snippet"


@dataclass(frozen=True)
class Conditions:
    """A read's conjuncts by where each is decided (every reader divides them so: divide_conditions)."""

    partition_only: tuple[Filter, ...]  # exact on the log's partition values: prune splits
    data_only: tuple[Filter, ...]  # on data columns only: min/max and Bloom skipping
    pushed: tuple[Filter, ...]  # each split applies them exactly (index-only ones: its index alone)
    residual: tuple[Filter, ...]  # the rest, checked on rows with partition values attached


def divide_conditions(
    conjuncts: Sequence[Filter],
    partition_columns: Sequence[str],
    specs: Sequence[ColumnSpec],
    index_only: Sequence[Filter],
) -> Conditions:
    """`conjuncts` divided (index_only: those on index-only columns, check_index_only's answer)."""
    parts = set(partition_columns)
    partition_only = tuple(f for f in conjuncts if columns_of(f) <= parts)
    data_only = tuple(f for f in conjuncts if not (columns_of(f) & parts))
    pushed = tuple(f for f in data_only if any(f is g for g in index_only) or supports(f, specs))
    residual = tuple(
        f for f in conjuncts if not any(f is g for g in partition_only) and not any(f is g for g in pushed)
    )
    return Conditions(partition_only, data_only, pushed, residual)


@dataclass(frozen=True)
class ReadPlan:
    """What every split of one read runs (see the module docstring)."""

    path: str  # the table
    options: Options  # the read's options (the table's recorded settings included)
    partition_columns: tuple[str, ...]
    data_schema: pa.Schema  # the data columns read from each split, typed as the read returns them
    # the full-text query and the struct-field narrowing (unscored rows; the rows re-check it)
    query: SearchQuery | None = None
    filters: tuple[Filter, ...] = ()  # data-column filters each split applies exactly
    residual: tuple[Filter, ...] = ()  # filters a ranked read checks on rows with partition values
    snippets: tuple[str, ...] = ()  # `_snippet` of these text columns (they are among the data columns)
    limit: int | None = None  # ranked: the best `limit` matches of each split
    corpus: CorpusStats | None = None  # ranked: the table version's BM25 statistics (None: the split's)
    batch_rows: int = 65536
    nearest: NearestQuery | None = None  # a vector search: read/vector/ runs it (split_search.py)

    @property
    def text(self) -> str | None:
        """The full-text query's text (None: none; a read may still narrow by struct fields)."""
        return self.query.text if self.query is not None else None

    @property
    def narrowing(self) -> tuple[str, ...]:
        """The struct-field narrowing texts the query carries."""
        return self.query.narrowing if self.query is not None else ()

    @property
    def index_query(self) -> IndexQuery | None:
        """What a split's index runs when that can be told (no narrowing or snippet): the query
        alone, or with pushed filters an IndexRead (the query, the filters' columns). A remote
        split's index files may then be fetched only as far as those read them (cache/sparse.py);
        None: anything."""
        if self.narrowing or self.snippets:
            return None
        if not self.filters:
            # a vector search alone asks nothing of the text index: its own files are fetched
            # as it reads them (cache/file_pages.py)
            return IndexRead(None) if self.query is None and self.nearest is not None else self.query
        columns = sorted({c for f in self.filters for c in columns_of_all(f)})
        return IndexRead(self.query, tuple(columns))

    @property
    def index_reads(self) -> tuple[SearchQuery | None, tuple[str, ...]]:
        """What a split's index is asked by this plan: (the query with its struct-field narrowing,
        the columns whose filters or snippets it answers). A split the reference implementation
        wrote transcodes only those fields' term dictionaries (reference/native.py)."""
        columns = {c for f in self.filters for c in columns_of_all(f)} | set(self.snippets)
        return self.query, tuple(sorted(columns))

    def with_ranking(self, limit: int | None, corpus: CorpusStats | None) -> ReadPlan:
        return replace(self, limit=limit, corpus=corpus)

    def keep_residual(self, rows: pa.Table) -> pa.Table:
        """The rows (partition values attached) that pass the residual filters."""
        if not self.residual or not rows.num_rows:
            return rows
        return rows.filter(arrow_mask(rows, list(self.residual)))

    def rows(self, split: SplitReader, deletes: SplitDeletes | None) -> Iterator[pa.RecordBatch]:
        """Rows of one split matching the query (and its narrowing) and the filters, in row order:
        the data columns, as `data_schema` (columns the split lacks NULL)."""
        schema = self.data_schema
        types = {f.name: f.type for f in schema}
        for batch in split_rows(split, self.filters, self.query, schema.names, types, self.batch_rows, deletes):
            yield batch if batch.schema.equals(schema) else conform(batch, schema)

    def count(self, add: AddFile, deletes: SplitDeletes | None, open_split: Callable[[], SplitReader]) -> int:
        """Rows of one split matching the query and the filters, minus deleted ones; from the
        log's row count, without opening the split, when neither narrows and the deletes are
        positional only. (Narrowing and residual filters need rows: a count with them reads.)"""
        if (
            self.query is None
            and not self.filters
            and add.num_records is not None
            and (deletes is None or deletes.only_positions)
        ):
            return int(add.num_records) - (int(deletes.positions.size) if deletes is not None else 0)
        return open_split().count(list(self.filters), self.query, deletes)

    def ranked(self, split: SplitReader, add: AddFile, deletes: SplitDeletes | None, target: pa.Schema) -> pa.Table:
        """Matches of one split with `_score`, best first: its best `limit` (every match without
        one), as `target` (partition values attached, columns the split lacks NULL; it holds the
        data columns, `_score`, and whatever else the caller returns), then `_snippet` when asked.
        Filters on columns the split lacks, and the residual filters, are checked on those rows;
        the split's search then returns every match, cut to `limit` after them."""
        if self.text is None:
            raise InvalidOptionError(f"a scored read of {self.path} needs a query")
        present = set(split.schema.names)
        names = [c for c in self.data_schema.names if c in present]
        present |= {s.name for s in split.specs if s.index_only}  # their filters are the index's
        pushed = [f for f in self.filters if columns_of_all(f) <= present]
        residual = [f for f in self.filters if not any(f is g for g in pushed)] + list(self.residual)
        assert self.query is not None  # (it has a text)
        table = split.search_scored(
            self.query,
            None if residual else self.limit,
            pushed,
            names,
            deletes=deletes,
            corpus=self.corpus,
            row_ids=ROW_ID_COLUMN in target.names,
        )
        table = with_partition_values([(add, table)], target, self.partition_columns)
        if residual and table.num_rows:
            table = table.filter(arrow_mask(table, residual))
            if self.limit is not None:
                table = table.slice(0, self.limit)
        if self.snippets:
            table = table.append_column(SNIPPET_COLUMN, snippet_column(split, table, self.query, self.snippets))
        return table

    def candidates(self, split: SplitReader, add: AddFile, deletes: SplitDeletes | None, target: pa.Schema) -> pa.Table:
        """Phase one of a ranked read with a limit (`ranked_top`): the split's best `limit` matches
        as `_score` and `_rowid` only. No data column is read but those the filters, the residual
        and the deletes check (`target`: the caller's ranked schema, of which the partition columns
        and those are kept)."""
        checked = {c for f in (*self.filters, *self.residual) for c in columns_of_all(f)}

        def wanted(name: str) -> bool:
            return name in checked or any(c.startswith(name + ".") for c in checked)

        narrow = replace(self, data_schema=pa.schema([f for f in self.data_schema if wanted(f.name)]), snippets=())
        kept = [
            f
            for f in target
            if f.name in self.partition_columns or (wanted(f.name) and f.name in self.data_schema.names)
        ]
        scored = pa.schema(kept + [pa.field(SCORE_COLUMN, pa.float32()), pa.field(ROW_ID_COLUMN, pa.int64())])
        return narrow.ranked(split, add, deletes, scored).select([SCORE_COLUMN, ROW_ID_COLUMN])

    def rows_local(self, split: SplitReader, candidates: pa.Table) -> bool:
        """Whether ranked_rows of these candidates reads nothing from object storage."""
        names = [c for c in self.data_schema.names if c in set(split.schema.names)]
        return split.rows_local(candidates.column(ROW_ID_COLUMN).to_pylist(), names)

    def ranked_rows(self, split: SplitReader, add: AddFile, candidates: pa.Table, target: pa.Schema) -> pa.Table:
        """Phase two of `ranked_top`: the rows of a split's winning candidates (`_score`,
        `_rowid`), in their order, as `target`, with `_snippet` when asked."""
        table = self.fetch(split, add, candidates, target)
        if self.snippets:
            table = table.append_column(SNIPPET_COLUMN, snippet_column(split, table, self.query, self.snippets))
        return table

    def fetch(self, split: SplitReader, add: AddFile, candidates: pa.Table, target: pa.Schema) -> pa.Table:
        """The rows of a split's candidates (`_rowid` and the columns they carry: ranked_rows', a
        vector search's: vector/split_search.py), in their order, as `target` (the data and
        partition columns, and theirs)."""
        names = [c for c in self.data_schema.names if c in set(split.schema.names)]
        rows = split.rows_in_order(candidates.column(ROW_ID_COLUMN).to_pylist(), names)
        table = with_partition_values([(add, rows)], target, self.partition_columns)
        for name in candidates.schema.names:
            if name in target.names:
                table = _set(table, name, candidates.column(name).cast(target.field(name).type))
        return table

    def row_ids(self, split: SplitReader, add: AddFile, deletes: SplitDeletes | None, target: pa.Schema) -> np.ndarray:
        """Sorted row ids of one split's live rows matching the query, the filters and the residual
        filters (checked on `target`: the partition columns and the stored columns they read):
        from the index alone when it answers them exactly, else from only the columns the checks
        read (a vector column makes rows wide), in one pass (row_selection.py)."""
        if not self.residual:
            return selected_rows(split, self.filters, self.query, deletes)
        names = {f.name.lower(): f.name for f in target}
        reads = {top_column(c, names) for f in self.residual for c in columns_of(f)}
        target = pa.schema([f for f in target if f.name.lower() in reads])
        stored = [c for c in split.schema.names if c.lower() in reads]

        def residual(rows: pa.Table) -> pa.BooleanArray:
            return arrow_mask(with_partition_values([(add, rows)], target, self.partition_columns), self.residual)

        return selected_rows(split, self.filters, self.query, deletes, stored, residual)

    def index_selection(self, split: SplitReader, deletes: SplitDeletes | None) -> tantivy.Query | None:
        """The Tantivy query selecting exactly this plan's live rows of one split (None: all its
        documents), for steps that run on the index alone. UnsupportedFilterError when the rows
        would have to decide (a narrowing, residual filters, a filter the index only narrows)."""
        if self.narrowing or self.residual:
            what = ", ".join([*self.narrowing, *map(render, self.residual)])
            raise UnsupportedFilterError(
                f"{what}: only the rows of {self.path} decide it, and this step reads the index alone"
            )
        q = split.exact_query(self.filters, self.query)
        dead = dead_rows(split, deletes) if deletes is not None else None
        return q if dead is None or not len(dead) else without_rows(split, q, dead)


Opened = tuple["SplitReader", "SplitDeletes | None"]
MapSplits = Callable[[Callable[[int], pa.Table], list[int]], list[pa.Table]]


def ranked_top(
    plan: ReadPlan,
    adds: Sequence[AddFile],
    open_split: Callable[[AddFile], Opened],
    target: pa.Schema,
    map_search: MapSplits,
    map_fetch: MapSplits | None = None,
) -> pa.Table:
    """The best `plan.limit` matches of these splits, best first, as `target` (ReadPlan.ranked's
    schema), in two phases as a search engine runs them: every split's best `limit` as scores and
    row ids (ReadPlan.candidates: no row read), the best `limit` of all of those, then the rows of
    only those (ReadPlan.ranked_rows), each split's in one round of reads. `map_search(fn, items)`
    runs fn over items (in threads, or not) and returns the results in order; `map_fetch` runs
    phase two (I/O on remote splits: more threads; map_search when None). Ties rank as one sort of
    every split's rows would: by split order, then the split's own order."""
    assert plan.limit is not None  # a limit is what makes phase one small
    opened: dict[int, Opened] = {}

    def phase_one(i: int) -> pa.Table:
        opened[i] = open_split(adds[i])
        cands = plan.candidates(opened[i][0], adds[i], opened[i][1], target)
        return cands.append_column(_SPLIT, pa.array(np.full(cands.num_rows, i, np.int64)))

    every = [t for t in map_search(phase_one, list(range(len(adds)))) if t.num_rows]
    if not every:
        return target.empty_table()
    best = top_n(pa.concat_tables(every), plan.limit)
    best = best.append_column(_ORDER, pa.array(np.arange(best.num_rows, dtype=np.int64)))
    owners = best.column(_SPLIT).to_numpy()

    mine = {i: best.filter(pa.array(owners == i)) for i in sorted({int(i) for i in owners})}

    def phase_two(i: int) -> pa.Table:
        rows = plan.ranked_rows(opened[i][0], adds[i], mine[i].select([SCORE_COLUMN, ROW_ID_COLUMN]), target)
        return rows.append_column(_ORDER, mine[i].column(_ORDER))

    # rows already here are gathered in this thread (a warm search: handing them to threads costs
    # more than taking them); only the splits whose rows need fetching go to map_fetch
    remote = [i for i in mine if map_fetch is not None and not plan.rows_local(opened[i][0], mine[i])]
    parts = (map_fetch(phase_two, remote) if remote and map_fetch is not None else []) + [
        phase_two(i) for i in mine if i not in remote
    ]
    return pa.concat_tables(parts).sort_by(_ORDER).drop_columns([_ORDER])


_SPLIT, _ORDER = "__split", "__order"  # ranked_top's bookkeeping columns


def _set(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, values)


def dead_rows(split: SplitReader, deletes: SplitDeletes) -> np.ndarray:
    """Sorted row ids of the split's deleted rows (positions, and rows equal to deleted values)."""
    dead = [deletes.positions]
    if deletes.equalities:
        for ids, batch in split.source(None, True):
            assert ids is not None  # asked for with_ids
            keep = deletes.keep_mask(batch, ids)
            if keep is not None:
                dead.append(ids.filter(pc.invert(keep)).to_numpy())
    return np.unique(np.concatenate(dead)) if len(dead) > 1 else dead[0]


def without_rows(split: SplitReader, q: tantivy.Query | None, dead: np.ndarray) -> tantivy.Query:
    """The query (None: every document) minus the documents of these sorted row ids (how a query
    names rows is the split's layout: row_access.SplitRows.without_rows)."""
    query: tantivy.Query = split.rows.without_rows(split.index.schema, q, dead)
    return query
