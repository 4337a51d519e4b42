"""Vector searches of a table (read/nearest.py searches one split), query then fetch: every split
returns its candidates without rows (row ids, distances and, with fusion, BM25 scores under the
table's statistics), the global answer is decided on them, and only the winners' rows are read.

Many query vectors at once (`nearest_tables`: IndexTable.search_many, it.search_join) share the
plan, the opened splits, each split's selection of rows (filters, deletes) and one graph search
call per split; each query's answer is the one it would get alone.

Ties are broken by (split ordinal, row id): the order a text search's top-n keeps
(split_rows.top_n, stable).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa

from indextables_spark.core.split.read.nearest import fused_scores, one_thread_math, vector_values
from indextables_spark.core.split.read.prefetch import fetch_missing
from indextables_spark.core.split.read.reader import DISTANCE_COLUMN, ROW_ID_COLUMN, SCORE_COLUMN
from indextables_spark.core.split.read.split_threads import map_chunks
from indextables_spark.errors import InvalidOptionError

if TYPE_CHECKING:
    from indextables_spark.core.split.read.search import SearchPlan

SPLIT = "_split"  # the candidates' split ordinal, while the global answer is decided


def nearest_table(plan: SearchPlan) -> pa.Table:
    """A vector search of the plan's splits: the global k nearest (nearest first, `_distance`), or
    with fusion and a query the k best of the fused rankings (`_score` the fused score, best first)."""
    nq = plan.nearest
    assert nq is not None
    if nq.fusion is None or plan.text is None:
        return nearest_tables(plan, nq.array[None, :])[0]
    files = plan.live_files()
    plan.plan_query(files)
    schema = plan.out_schema(False)
    if not files:
        return schema.empty_table()
    statistics = plan.statistics_fetch(files)
    fetch_missing(plan.storage, plan.options, files, None, None, reads=plan.index_reads)
    if statistics is not None:
        statistics.result()
    plan.ranking(nq.wanted)
    with one_thread_math():  # held for every split's search at once (nearest.py)
        tables = map_chunks(lambda chunk: [plan.nearest_split(f) for f in chunk], files)
    out = _numbered(tables)
    if out is None:
        return schema.empty_table()
    dist = out.column(DISTANCE_COLUMN).to_numpy(zero_copy_only=False).astype(np.float64)
    text = out.column(SCORE_COLUMN).to_numpy(zero_copy_only=False).astype(np.float64)
    fused = fused_scores(text, dist, nq.fusion, nq.wanted, _tie(out))
    order = np.lexsort((_tie(out), np.nan_to_num(dist, nan=np.inf), -fused))
    order = order[fused[order] > 0][: nq.k]
    winners = out.take(pa.array(order))
    winners = winners.set_column(
        winners.schema.get_field_index(SCORE_COLUMN), SCORE_COLUMN, pa.array(fused[order], pa.float32())
    )
    return _fetch(plan, files, [winners])[0].select(schema.names).cast(schema)


def nearest_tables(plan: SearchPlan, queries: np.ndarray) -> list[pa.Table]:
    """Vector searches without fusion of the plan's splits, one per query vector (a row of
    `queries`): for each, the global k nearest (nearest first, `_distance`; `_score` NULL)."""
    nq = plan.nearest
    assert nq is not None
    files = plan.live_files()
    plan.plan_query(files)
    schema = plan.out_schema(False)
    if not files:
        return [schema.empty_table() for _ in range(len(queries))]
    fetch_missing(plan.storage, plan.options, files, None, None, reads=plan.index_reads)
    with one_thread_math():
        per_split = map_chunks(lambda chunk: [plan.nearest_split_batch(f, queries) for f in chunk], files)
    winners: list[pa.Table | None] = []
    for q in range(len(queries)):
        out = _numbered([tables[q] for tables in per_split])
        if out is None:
            winners.append(None)
            continue
        dist = out.column(DISTANCE_COLUMN).to_numpy(zero_copy_only=False).astype(np.float64)
        order = np.lexsort((_tie(out), dist))[: nq.k]
        winners.append(out.take(pa.array(order)))
    found = _fetch(plan, files, [w for w in winners if w is not None])
    results = []
    for w in winners:
        if w is None:
            results.append(schema.empty_table())
            continue
        rows = found.pop(0)
        rows = rows.drop_columns([SCORE_COLUMN]) if SCORE_COLUMN in rows.schema.names else rows
        rows = rows.append_column(SCORE_COLUMN, pa.nulls(rows.num_rows, pa.float32()))
        results.append(rows.select(schema.names).cast(schema))
    return results


def query_matrix(plan: SearchPlan, vectors: Sequence[Any]) -> np.ndarray:
    """Query vectors as a float32 matrix (one a row) for nearest_tables: each checked as the
    plan's own query vector is (InvalidOptionError naming the vector at fault)."""
    nq = plan.nearest
    assert nq is not None
    rows = []
    for i, vector in enumerate(vectors):
        values = vector_values(vector, f"query vector {i}")
        if len(values) != len(nq.vector):
            raise InvalidOptionError(
                f"query vector {i} has {len(values)} dimensions, column {nq.column!r} {len(nq.vector)}"
            )
        rows.append(replace(nq, vector=values).array)  # NearestQuery checks them (finite)
    return np.stack(rows) if rows else np.empty((0, len(nq.vector)), np.float32)


def _numbered(tables: Sequence[pa.Table]) -> pa.Table | None:
    """The splits' candidates in one table with their split ordinal (None: no candidate)."""
    internal = [
        t.append_column(SPLIT, pa.array(np.full(t.num_rows, i, np.int64))) for i, t in enumerate(tables) if t.num_rows
    ]
    return pa.concat_tables(internal).combine_chunks() if internal else None


def _tie(candidates: pa.Table) -> np.ndarray:
    """The tie-break key of candidates: split ordinal, then row id."""
    return np.asarray(
        candidates.column(SPLIT).to_numpy() * (1 << 40) + candidates.column(ROW_ID_COLUMN).to_numpy(), np.int64
    )


def _fetch(plan: SearchPlan, files: Sequence[Any], winners: Sequence[pa.Table]) -> list[pa.Table]:
    """The rows of each answer's winners (`_split`, `_rowid` and the columns they carry), in their
    order: each split's rows are read once for all the answers (ReadPlan.fetch)."""
    if not winners:
        return []
    splits = [w.column(SPLIT).to_numpy() for w in winners]
    rowids = [w.column(ROW_ID_COLUMN).to_numpy() for w in winners]
    needed = np.unique(np.concatenate(splits))
    pieces, ids_of, offset = [], {}, {}
    at = 0
    for i in needed.tolist():
        ids = np.unique(np.concatenate([r[s == i] for s, r in zip(splits, rowids)]))
        pieces.append(plan.fetch_split(files[i], pa.table({ROW_ID_COLUMN: pa.array(ids, pa.int64())})))
        ids_of[i], offset[i] = ids, at
        at += len(ids)
    rows = pa.concat_tables(pieces)
    out = []
    for w, s, r in zip(winners, splits, rowids):
        positions = np.empty(len(r), np.int64)
        for i in np.unique(s).tolist():
            mine = s == i
            positions[mine] = offset[i] + np.searchsorted(ids_of[i], r[mine])
        table = rows.take(pa.array(positions))
        for name in w.schema.names:  # the candidates' own columns (`_distance`, `_score`)
            if name in table.schema.names and name != ROW_ID_COLUMN:
                field = table.schema.field(name)
                table = table.set_column(table.schema.get_field_index(name), field, w.column(name).cast(field.type))
        out.append(table)
    return out
