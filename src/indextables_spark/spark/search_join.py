"""Many searches at once: a DataFrame of queries (text, vectors or both) joined to the top-k rows of
a table for each query (`it.search_join`; SQL: `indextables_search_join` in table_functions.py).

The queries stay where they are: each partition of the queries DataFrame is searched by the task
that holds it (mapInArrow), against every split of the table version pinned when the join was
planned, through the executor's split cache. The table's rows are never shuffled: only the
matches leave the tasks. Each query runs the Spark-free search (IndexTable.search: the same
pruning, filters, deletes, corpus-wide BM25 and vector search as every other route), so a task's
answer for a query is already the global top k.

Output: the query's columns as they are, `_rank` (1 = best), `_score` (text, or the fused score
of a hybrid search) and/or `_distance` (a vector search), and the table's columns prefixed with
`prefix` ("match_" by default: a de-duplication joins a table with itself). A query whose text and
vector are both NULL matches nothing (no row); a NULL text or vector alone leaves that side out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import numpy as np
import pyarrow as pa

from indextables_spark.config.sessions import with_session_options
from indextables_spark.core.split.read.vector.fusion_spec import FusionArg, parse_fusion
from indextables_spark.errors import InvalidOptionError
from indextables_spark.util.renamed import renamed

if TYPE_CHECKING:
    from indextables_spark.api.table import IndexTable
    from indextables_spark.core.log.read.snapshot import Snapshot

RANK, SCORE, DISTANCE = "_rank", "_score", "_distance"
PREFIX = "match_"  # the table's columns in the joined rows (a de-duplication joins a table with itself)


def search_join(
    queries: Any,
    path: str,
    *,
    text_col: str | None = None,
    vector_col: str | None = None,
    vector_column: str | None = None,
    k: int = 10,
    fusion: FusionArg | None = None,
    where: str | None = None,
    prefix: str = PREFIX,
    options: Mapping[str, Any] | None = None,
    column: str | None = None,
) -> Any:
    """The top-k rows of the table at `path` for each row of `queries` (see the module docstring):
    `text_col` holds full-text queries, `vector_col` query vectors (the queries' columns), searched
    against the table's `vector_column` (needed when it has several; IndexTable.search's name;
    `column=` is its deprecated old name). With both, `fusion` as IndexTable.search: None (the
    default) fuses the two rankings by rrf, "weighted", an it.Fusion or a mapping choose how,
    "none" lets the text only select the rows the vectors rank. `where` selects the table rows
    searched."""
    from indextables_spark.api.table import IndexTable  # lazy: the read path

    vector_column = renamed("search_join", "vector_column", vector_column, "column", column)
    if text_col is None and vector_col is None:
        raise InvalidOptionError("search_join: give text_col, vector_col or both (the queries' columns)")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise InvalidOptionError(f"search_join: k must be a positive integer, got {k!r}")
    names = list(queries.columns)
    missing = [c for c in (text_col, vector_col) if c is not None and c not in names]
    if missing:
        raise InvalidOptionError(f"search_join: the queries have no column {missing} (columns: {names})")
    spark = queries.sparkSession
    opts = dict(with_session_options(spark, options).values)
    table = IndexTable(path, opts)
    snap = table.snapshot()
    version = snap.version
    data = list(snap.schema.fields)
    clash = sorted({prefix + f.name for f in data} & set(names)) + sorted({RANK, SCORE, DISTANCE} & set(names))
    if clash:
        raise InvalidOptionError(f"search_join: the queries already have columns {clash} (rename them, or set prefix)")
    out = join_schema(queries.schema, snap, text_col, vector_col, prefix)
    if vector_col is not None:  # refused now, not in a task: a table without that vector column
        from indextables_spark.core.split.read.scan import table_vector_columns  # lazy: the read path
        from indextables_spark.core.split.read.vector.query import search_column  # lazy: as above

        search_column(vector_column, table_vector_columns(snap, table.options), path, "vector_column=...")
    fuse = fusion if (text_col is not None and vector_col is not None) else None
    parse_fusion(fuse, with_query=True, where="search_join")  # refused now, not in a task
    join = JoinSearch(path, opts, version, text_col, vector_col, vector_column, k, fuse, where, prefix)
    return queries.mapInArrow(join.run, out)


def join_schema(queries: Any, snapshot: Snapshot, text_col: str | None, vector_col: str | None, prefix: str) -> Any:
    """The joined rows' StructType: the queries' columns, `_rank`, `_score` (with text),
    `_distance` (with vectors), the table's columns prefixed."""
    from pyspark.sql.types import DoubleType, FloatType, IntegerType, StructField, StructType  # lazy: pyspark

    extra = [StructField(RANK, IntegerType(), False)]
    if text_col is not None:
        extra.append(StructField(SCORE, FloatType(), True))
    if vector_col is not None:
        extra.append(StructField(DISTANCE, DoubleType(), True))
    table = [StructField(prefix + f.name, f.dataType, f.nullable) for f in snapshot.schema.fields]
    return StructType(list(queries.fields) + extra + table)


@dataclass(frozen=True)
class JoinSearch:
    """One search join's queries searched and their matches joined to them, the same way for both
    forms: it.search_join's tasks (`run`, over Arrow batches) and indextables_search_join's UDTF
    (vector_functions.py: `matches`, over buffered rows). Pickled into the tasks."""

    path: str
    options: dict[str, str]
    version: int  # the table version every query reads
    text_col: str | None
    vector_col: str | None
    vector_column: str | None  # the table's vector column (None: its only one)
    k: int
    fusion: FusionArg | None  # with text and vectors: how the two rankings fuse (IndexTable.search's argument)
    where: str | None
    prefix: str

    def matches(self, table: IndexTable, texts: list[Any] | None, vectors: list[Any] | None) -> list[pa.Table]:
        """Each query's matches (IndexTable.search_many on `table`, this join's IndexTable: the
        vector searches share the table's plan and each split's work), ranked, as join_schema's
        columns after the query's: `_rank`, `_score` (with text) and `_distance` (with vectors),
        NULL where that query had no such side, then the table's columns prefixed. A query
        without text and vector matches nothing."""
        found = table.search_many(
            texts,
            vectors=vectors,
            vector_column=self.vector_column,
            fusion=self.fusion,
            where=self.where,
            limit=self.k,
            version=self.version,
        )
        return [self._conformed(f) for f in found]

    def run(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Each batch of queries searched at once (`matches`), the matches beside their query's
        columns."""
        from indextables_spark.api.table import IndexTable  # lazy: the read path, in the task

        table = IndexTable(self.path, self.options)
        for batch in batches:
            texts = batch.column(self.text_col).to_pylist() if self.text_col is not None else None
            vectors = batch.column(self.vector_col).to_pylist() if self.vector_col is not None else None
            hits = [(i, f) for i, f in enumerate(self.matches(table, texts, vectors)) if f.num_rows]
            if hits:
                which = pa.array(np.repeat([i for i, _ in hits], [f.num_rows for _, f in hits]), pa.int64())
                found = pa.concat_tables([f for _, f in hits])
                cols = {name: batch.column(j).take(which) for j, name in enumerate(batch.schema.names)}
                cols.update({name: found.column(name) for name in found.schema.names})
                yield from pa.table(cols).to_batches()

    def _conformed(self, found: pa.Table) -> pa.Table:
        n = found.num_rows
        cols: dict[str, pa.Array] = {RANK: pa.array(np.arange(1, n + 1), pa.int32())}
        if self.text_col is not None:
            cols[SCORE] = found.column(SCORE) if SCORE in found.schema.names else pa.nulls(n, pa.float32())
        if self.vector_col is not None:
            cols[DISTANCE] = found.column(DISTANCE) if DISTANCE in found.schema.names else pa.nulls(n, pa.float64())
        for name in found.schema.names:
            if name not in (SCORE, DISTANCE):
                cols[self.prefix + name] = found.column(name)
        return pa.table(cols)
