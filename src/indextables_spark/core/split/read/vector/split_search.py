"""A vector search in one split under a read's plan (ReadPlan.nearest: read/plan.py), without
its rows: the rows its filters, residual filters, deletes and (without fusion) query select
(`selection`, kept for the next search with the same selection: selections.py), the split's
vector index searched among them (nearest.py): without fusion the index's candidates with their
estimated distances (`proposals`), which table_search.py ranks table-wide before re-ranking the
best exactly; with fusion each split's exact nearest and the query's best matches beside them
(`candidates`). table_search.py ranks the candidates of every split and reads the winners' rows."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from indextables_spark.core.split.format.vector_index import distances
from indextables_spark.core.split.read.reader import DISTANCE_COLUMN, ROW_ID_COLUMN, SCORE_COLUMN, SplitReader
from indextables_spark.core.split.read.vector import selections
from indextables_spark.core.split.read.vector.nearest import Proposal, nearest, propose, refine
from indextables_spark.core.split.read.vector.query import NearestQuery
from indextables_spark.errors import InvalidOptionError

if TYPE_CHECKING:
    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.core.log.deletes.delete_logs import SplitDeletes
    from indextables_spark.core.split.format.vector_index import VectorIndex
    from indextables_spark.core.split.read.plan import ReadPlan


def candidates(
    plan: ReadPlan, split: SplitReader, add: AddFile, deletes: SplitDeletes | None, target: pa.Schema
) -> pa.Table:
    """A vector search in one split, without its rows: the row ids (`_rowid`) of its k nearest
    rows among those the filters, the residual filters, the deletes and (without fusion) the
    query select, nearest first, with `_distance`; with fusion, also its best `window` matches of
    the query, and `_score` (BM25 with the plan's statistics; NULL for rows only the vectors
    found) and `_distance` (NULL without a vector) of every candidate, for table_search.py to rank
    across splits. `target`: the partition and data columns the residual filters read."""
    nq = _nearest_query(plan)
    if nq.fusion is None:
        index, (found,) = proposals(plan, split, add, deletes, target, nq.array[None, :])
        return (
            found_table(*refine(index, found, nq.array, nq.k))
            if index is not None
            else found_table(found.ids, found.dists)
        )
    index = split.vector_index(nq.column, nq.spec)
    ids, dists = np.empty(0, np.int64), np.empty(0, np.float64)
    if index is not None:
        text_free = replace(plan, query=plan.query.without_text() if plan.query is not None else None)
        allowed = selection(text_free, split, add, deletes, target) if selects(text_free, deletes) else None
        ids, dists = nearest(index, nq.array, nq.wanted, allowed, expansion=nq.expansion, exact_below=nq.exact_below)[0]
    text_ids, text_scores = np.empty(0, np.int64), np.empty(0, np.float32)
    if plan.text is not None:  # the query's best `window`, rows read only for residual filters
        ranked = replace(
            plan, limit=nq.wanted, snippets=(), data_schema=plan.data_schema if plan.residual else pa.schema([])
        )
        wanted = [pa.field(SCORE_COLUMN, pa.float32()), pa.field(ROW_ID_COLUMN, pa.int64())]
        ranked_target = pa.schema([*target, *(f for f in wanted if f.name not in target.names)])
        text = ranked.ranked(split, add, deletes, ranked_target)
        text_ids = text.column(ROW_ID_COLUMN).to_numpy()
        text_scores = text.column(SCORE_COLUMN).to_numpy(zero_copy_only=False)
    score_of = dict(zip(text_ids.tolist(), text_scores.tolist()))
    only_text = ~np.isin(text_ids, ids)
    extra_ids = text_ids[only_text]
    extra_d = np.full(len(extra_ids), np.nan)
    if index is not None and len(extra_ids):
        order = np.argsort(extra_ids)
        positions = index.positions(extra_ids[order])  # those with a vector, in row id order
        with_vector = np.isin(extra_ids[order], np.asarray(index.ids[positions]))
        extra_d[order[with_vector]] = distances(index.vectors(positions), nq.array, index.metric)
    all_d = np.concatenate([dists, extra_d])
    return pa.table(
        {
            ROW_ID_COLUMN: pa.array(np.concatenate([ids, extra_ids]), pa.int64()),
            DISTANCE_COLUMN: pa.array(all_d, pa.float64(), mask=np.isnan(all_d)),
            SCORE_COLUMN: pa.array(
                [score_of.get(i) for i in ids.tolist()] + text_scores[only_text].tolist(), pa.float32()
            ),
        }
    )


def proposals(
    plan: ReadPlan,
    split: SplitReader,
    add: AddFile,
    deletes: SplitDeletes | None,
    target: pa.Schema,
    queries: np.ndarray,
) -> tuple[VectorIndex | None, list[Proposal]]:
    """A vector search without fusion in one split for each of many query vectors (a matrix, one
    a row; the plan's `nearest` gives the column, k and the search settings), before the exact
    re-rank of the index's candidates (nearest.propose): the split's index (None: it holds no
    vectors of the column) and a Proposal per query. The rows the filters, the query and the
    deletes select are found once for all of them."""
    nq = _nearest_query(plan)
    index = split.vector_index(nq.column, nq.spec)
    if index is None:
        return None, [Proposal(np.empty(0, np.int64), np.empty(0, np.float64)) for _ in range(len(queries))]
    allowed = selection(plan, split, add, deletes, target) if selects(plan, deletes) else None
    return index, propose(index, queries, nq.k, allowed, expansion=nq.expansion, exact_below=nq.exact_below)


def selects(plan: ReadPlan, deletes: SplitDeletes | None) -> bool:
    """Whether a vector search searches only some of a split's rows (else all its vectors)."""
    text = plan.text if plan.nearest is None or plan.nearest.fusion is None else None
    return bool(plan.filters or plan.narrowing or plan.residual or text or deletes is not None)


def selection(
    plan: ReadPlan, split: SplitReader, add: AddFile, deletes: SplitDeletes | None, target: pa.Schema
) -> np.ndarray:
    """The rows a vector search may return (ReadPlan.row_ids), kept for the next search that
    selects the same rows of the split (selections.py; option cache.selections.enabled)."""
    if not plan.options.get_bool("cache.selections.enabled"):
        return plan.row_ids(split, add, deletes, target)
    key = (split.local_dir, plan.filters, plan.residual, plan.query, selections.deletes_key(deletes))
    return selections.selection(key, lambda: plan.row_ids(split, add, deletes, target))


def _nearest_query(plan: ReadPlan) -> NearestQuery:
    if plan.nearest is None:
        raise InvalidOptionError(f"a vector search of {plan.path} needs a query vector")
    return plan.nearest


def found_table(ids: np.ndarray, dists: np.ndarray) -> pa.Table:
    """One split's answer without fusion: row ids and distances, nearest first."""
    return pa.table({ROW_ID_COLUMN: pa.array(ids, pa.int64()), DISTANCE_COLUMN: pa.array(dists, pa.float64())})
