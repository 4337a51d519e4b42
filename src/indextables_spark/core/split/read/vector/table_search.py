"""Vector searches of a table's splits (split_search.py searches one), query then fetch: every
split returns its candidates without rows (row ids, distances and, with fusion, BM25 scores under
the table's statistics), the answer is decided on them (fusion.py with fusion), and only the
winners' rows are read. Without fusion a split's index proposes candidates with estimated
distances, which are ranked table-wide and only the best re-ranked exactly (`_refined`): on
object storage only their vectors are fetched. One routine for every route: `nearest_top` answers for a set of splits
(a Spark task's; a Spark hybrid read is one task over every split, so its answer is the table's),
`nearest_table` for a SearchPlan (IndexTable.search).

Many query vectors at once (`nearest_tables`: IndexTable.search_many, it.search_join) share the
plan, the opened splits, each split's selection of rows (filters, deletes) and one graph search
call per split; each query's answer is the one it would get alone.

Ties are broken by (split ordinal, row id): the order a text search's top-n keeps
(split_rows.top_n, stable).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

import numpy as np
import pyarrow as pa

from indextables_spark.core.split.read.prefetch import fetch_missing
from indextables_spark.core.split.read.reader import DISTANCE_COLUMN, ROW_ID_COLUMN, SCORE_COLUMN, SplitReader
from indextables_spark.core.split.read.split_rows import with_partition_values
from indextables_spark.core.split.read.split_threads import FETCH_SPLITS, map_chunks
from indextables_spark.util.pools import shared_pool
from indextables_spark.core.split.read.vector.fusion import fused_top
from indextables_spark.core.split.read.vector.nearest import Proposal, one_thread_math, refine
from indextables_spark.core.split.read.vector.query import NearestQuery, vector_values
from indextables_spark.core.split.read.vector.split_search import (
    candidates,
    found_table as _found,
    proposals,
)
from indextables_spark.errors import InvalidOptionError

if TYPE_CHECKING:
    from indextables_spark.core.log.deletes.delete_logs import SplitDeletes
    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.core.split.format.vector_index import VectorIndex
    from indextables_spark.core.split.read.plan import Opened, ReadPlan
    from indextables_spark.core.split.read.search import SearchPlan

SPLIT = "_split"  # the candidates' split position, while the answer is decided
# The index's candidates of every split re-ranked exactly, table-wide: this many times a split's
# own (`Proposal.keep`), at most all of them. Measured (tests/test_vector_search.py's recall, 20,000
# clustered vectors in 4 splits, ivf_pq, dot): 1x found 0.945 of the 10 nearest, 2x 0.95+.
TABLE_REFINE = 2
_ROWS = 1 << 40  # (split position, row id) as one int64 key: split position x _ROWS + row id
T = TypeVar("T")


def search_target(fields: Sequence[pa.Field], nearest: NearestQuery) -> pa.Schema:
    """The columns a vector search's rows are completed to: `fields` (the partition and data
    columns), `_score` with fusion, `_rowid` and `_distance`."""
    extra = [pa.field(SCORE_COLUMN, pa.float32())] if nearest.fusion is not None else []
    return pa.schema([*fields, *extra, pa.field(ROW_ID_COLUMN, pa.int64()), pa.field(DISTANCE_COLUMN, pa.float64())])


def nearest_top(
    plan: ReadPlan,
    adds: Sequence[AddFile],
    open_split: Callable[[AddFile], Opened],
    target: pa.Schema,
    ordinals: Sequence[int] | None = None,
    returned: pa.Schema | None = None,
) -> pa.Table:
    """The plan's vector search of these splits: their k nearest rows (nearest first), or with
    fusion and a query the k best of the fused rankings (`_score` the fused score, best first).
    Their rows as `returned` (default `target`, whose columns the residual filters check; both
    search_target: `_score` NULL without fusion). Ties rank by the split's ordinal (`ordinals`,
    default their positions), then by row id."""
    nq = plan.nearest
    assert nq is not None
    if nq.fusion is None or plan.text is None:
        return nearest_top_many(plan, adds, open_split, target, nq.array[None, :], ordinals, returned)[0]
    opened, tables = _search(plan, adds, open_split, lambda s, a, d: candidates(plan, s, a, d, target))
    out = _numbered(tables)
    if out is None:
        return target.empty_table()
    dist = out.column(DISTANCE_COLUMN).to_numpy(zero_copy_only=False).astype(np.float64)
    text = out.column(SCORE_COLUMN).to_numpy(zero_copy_only=False).astype(np.float64)
    order, fused = fused_top(text, dist, nq.fusion, nq.k, nq.wanted, _tie(out, ordinals))
    winners = out.take(pa.array(order))
    winners = winners.set_column(
        winners.schema.get_field_index(SCORE_COLUMN), SCORE_COLUMN, pa.array(fused, pa.float32())
    )
    return _fetch(plan, adds, opened, returned or target, [winners])[0]


def nearest_top_many(
    plan: ReadPlan,
    adds: Sequence[AddFile],
    open_split: Callable[[AddFile], Opened],
    target: pa.Schema,
    queries: np.ndarray,
    ordinals: Sequence[int] | None = None,
    returned: pa.Schema | None = None,
) -> list[pa.Table]:
    """Vector searches without fusion of these splits, one per query vector (a row of
    `queries`): for each, the k nearest rows (nearest first), as nearest_top returns them."""
    nq = plan.nearest
    assert nq is not None
    opened, per_split = _search(plan, adds, open_split, lambda s, a, d: proposals(plan, s, a, d, target, queries))
    answers = _refined(adds, per_split, queries, nq.k)
    winners: list[pa.Table | None] = []
    for q in range(len(queries)):
        out = _numbered([_found(*split_answers[q]) for split_answers in answers])
        if out is None:
            winners.append(None)
            continue
        dist = out.column(DISTANCE_COLUMN).to_numpy(zero_copy_only=False).astype(np.float64)
        order = np.lexsort((_tie(out, ordinals), dist))[: nq.k]
        winners.append(out.take(pa.array(order)))
    rows = returned or target
    found = iter(_fetch(plan, adds, opened, rows, [w for w in winners if w is not None]))
    return [next(found) if w is not None else rows.empty_table() for w in winners]


def nearest_table(plan: SearchPlan) -> pa.Table:
    """A vector search of the plan's splits: the global k nearest (nearest first, `_distance`), or
    with fusion and a query the k best of the fused rankings (`_score` the fused score, best first)."""
    nq = plan.scan.nearest
    assert nq is not None
    if nq.fusion is None or plan.scan.text is None:
        return nearest_tables(plan, nq.array[None, :])[0]
    files = plan.files
    schema = plan.scan.out_schema(False)
    if not files:
        return schema.empty_table()
    statistics = plan.scan.statistics_fetch(files)
    fetch_missing(plan.scan.storage, plan.scan.options, files, plan.scan.index_query, reads=plan.scan.index_reads)
    if statistics is not None:
        statistics.result()
    plan.scan.ranking(nq.wanted)
    found = nearest_top(plan.scan.read, files, plan._open, _target(plan), returned=_target(plan, schema))
    return found.select(schema.names).cast(schema)


def nearest_tables(plan: SearchPlan, queries: np.ndarray) -> list[pa.Table]:
    """Vector searches without fusion of the plan's splits, one per query vector (a row of
    `queries`): for each, the global k nearest (nearest first, `_distance`)."""
    files = plan.files
    schema = plan.scan.out_schema(False)
    if not files:
        return [schema.empty_table() for _ in range(len(queries))]
    fetch_missing(plan.scan.storage, plan.scan.options, files, plan.scan.index_query, reads=plan.scan.index_reads)
    returned = _target(plan, schema)
    found = nearest_top_many(plan.scan.read, files, plan._open, _target(plan), queries, returned=returned)
    return [rows.select(schema.names).cast(schema) for rows in found]


def query_matrix(plan: SearchPlan, vectors: Sequence[Any]) -> np.ndarray:
    """Query vectors as a float32 matrix (one a row) for nearest_tables: each checked as the
    plan's own query vector is (InvalidOptionError naming the vector at fault)."""
    nq = plan.scan.nearest
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


def _target(plan: SearchPlan, returned: pa.Schema | None = None) -> pa.Schema:
    """The columns a SearchPlan's split rows are completed to (search_target), only those of
    `returned` when given (the rows returned: filter columns are not read for them)."""
    assert plan.scan.nearest is not None
    fields = [f for f in plan.scan.row_schema(False) if returned is None or f.name in returned.names]
    return search_target(fields, plan.scan.nearest)


def _search(
    plan: ReadPlan,
    adds: Sequence[AddFile],
    open_split: Callable[[AddFile], Opened],
    search: Callable[[SplitReader, AddFile, SplitDeletes | None], T],
) -> tuple[list[Opened], list[T]]:
    """`search` of every split (opened by `open_split`, kept for the fetch), in threads. Each
    thread opens its splits first and has the vector index files they lack fetched at once
    (`_fetch_indexes`: a remote split's search reads its index whole), then searches them."""
    opened: dict[int, Opened] = {}
    position = {a.path: i for i, a in enumerate(adds)}

    def chunk_search(chunk: list[AddFile]) -> list[T]:
        for a in chunk:
            opened[position[a.path]] = open_split(a)
        _fetch_indexes(plan, [opened[position[a.path]][0] for a in chunk])
        return [_one(search, opened[position[a.path]], a) for a in chunk]

    # contiguous chunks, one per thread (map_chunks): a future per split costs a hand-off each,
    # ~1 ms a query over 8 small splits when a filter is selected again every query
    with one_thread_math():  # held for every split's search at once (nearest.py)
        found: list[T] = map_chunks(chunk_search, adds)
    return [opened[i] for i in range(len(adds))], found


def _one(search: Callable[[SplitReader, AddFile, SplitDeletes | None], T], opened: Opened, add: AddFile) -> T:
    split, deletes = opened
    return search(split, add, deletes)


def _fetch_indexes(plan: ReadPlan, splits: Sequence[SplitReader]) -> None:
    """The vector index files and row ids the splits' searches will read (when they search more
    vectors than are compared exactly) and their directories lack, fetched in parallel (I/O);
    nothing when they hold them (no thread hand-off)."""
    nq = plan.nearest
    assert nq is not None
    spec = nq.spec
    indexes = [split.vector_index(nq.column, spec) for split in splits]
    lacking = [i for i in indexes if i is not None and i.has_graph and len(i) > nq.exact_below and i.lacks_index()]
    if len(lacking) == 1:
        lacking[0].fetch_index()
    elif lacking:
        list(shared_pool("vector-fetch", FETCH_SPLITS).map(lambda index: index.fetch_index(), lacking))


def _refined(
    adds: Sequence[AddFile],
    per_split: Sequence[tuple[VectorIndex | None, list[Proposal]]],
    queries: np.ndarray,
    k: int,
) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Each split's exact answer to each query (row ids, distances) from its proposals: the
    index's estimates of every split are ranked together and only the table's best of them
    (TABLE_REFINE x a split's `keep`, and any tied with the last) are compared exactly, each in
    its split — as one index of the whole table would re-rank its candidates. A split on object storage then fetches the
    vectors of those few rows (all splits at once), not of every split's own candidates."""
    chosen = [list(proposed) for _index, proposed in per_split]
    for q in range(len(queries)):
        estimated = [(i, p) for i, (_x, ps) in enumerate(per_split) if (p := ps[q]).estimated and len(p.ids)]
        if not estimated:
            continue
        keep = min(TABLE_REFINE * max(p.keep for _i, p in estimated), sum(p.keep for _i, p in estimated))
        pooled = np.concatenate([p.dists for _i, p in estimated])
        if len(pooled) > keep:
            bound = np.partition(pooled, keep - 1)[keep - 1]
            for i, p in estimated:
                chosen[i][q] = p.subset(p.dists <= bound)

    lacking = []  # the chosen rows' vectors a split's directory lacks: fetched for every split at once (I/O)
    for i, (index, _ps) in enumerate(per_split):
        wanted = [p.ids for p in chosen[i] if p.estimated and len(p.ids)]
        if index is not None and index.held_in_part and wanted:  # (a split held whole: nothing to look up)
            positions = index.positions(np.unique(np.concatenate(wanted)))
            if index.lacks_vectors(positions):
                lacking.append((index, positions))
    list(shared_pool("vector-fetch", FETCH_SPLITS).map(lambda x: x[0].fetch_vectors(x[1]), lacking))

    def answer(i: int) -> list[tuple[np.ndarray, np.ndarray]]:
        index = per_split[i][0]
        if index is None:
            return [(p.ids[:k], p.dists[:k]) for p in chosen[i]]
        return [refine(index, p, queries[q], k) for q, p in enumerate(chosen[i])]

    position = {a.path: i for i, a in enumerate(adds)}
    with one_thread_math():
        return map_chunks(lambda chunk: [answer(position[a.path]) for a in chunk], adds)


def _numbered(tables: Sequence[pa.Table]) -> pa.Table | None:
    """The splits' candidates in one table with their split's position (None: no candidate)."""
    internal = [
        t.append_column(SPLIT, pa.array(np.full(t.num_rows, i, np.int64))) for i, t in enumerate(tables) if t.num_rows
    ]
    return pa.concat_tables(internal).combine_chunks() if internal else None


def _tie(found: pa.Table, ordinals: Sequence[int] | None) -> np.ndarray:
    """The tie-break key of candidates: split ordinal, then row id."""
    splits = found.column(SPLIT).to_numpy()
    if ordinals is not None:
        splits = np.asarray(ordinals, np.int64)[splits]
    return np.asarray(splits * _ROWS + found.column(ROW_ID_COLUMN).to_numpy(), np.int64)


def _fetch(
    plan: ReadPlan,
    adds: Sequence[AddFile],
    opened: Sequence[Opened],
    target: pa.Schema,
    winners: Sequence[pa.Table],
) -> list[pa.Table]:
    """The rows of each answer's winners (`_split`: their split's position, `_rowid` and the
    columns they carry), in their order, as `target`: each split's winners are taken by row id
    once for all the answers, only the data columns `target` holds."""
    if not winners:
        return []
    keys = [w.column(SPLIT).to_numpy() * _ROWS + w.column(ROW_ID_COLUMN).to_numpy() for w in winners]
    every = np.unique(np.concatenate(keys))  # (split, row id), sorted: the order the rows are taken in
    names = [f.name for f in plan.data_schema if f.name in target.names]
    pieces = []
    for i in np.unique(every // _ROWS).tolist():
        split = opened[i][0]
        ids = (every[every // _ROWS == i] % _ROWS).tolist()
        batches = split.take(ids, [c for c in names if c in split.schema.names])
        pieces.append(with_partition_values([(adds[i], b) for b in batches], target, plan.partition_columns))
    rows = pa.Table.from_batches(pieces, schema=target)
    out = []
    for w, key in zip(winners, keys):
        table = rows.take(pa.array(np.searchsorted(every, key)))
        for name in w.schema.names:  # the candidates' own columns (`_rowid`, `_distance`, `_score`)
            if name in target.names:
                field = target.field(name)
                table = table.set_column(target.get_field_index(name), field, w.column(name).cast(field.type))
        out.append(table)
    return out
