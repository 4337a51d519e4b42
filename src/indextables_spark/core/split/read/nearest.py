"""Nearest neighbours of a query vector in one split (format/vector_index.py holds the files), and
how the rankings of a hybrid search are fused across the splits of a table.

One split: the graph proposes REFINE x k candidates, which are re-ranked by their exact distance
(the vectors file): the split's k nearest; a split of few vectors is compared exactly instead.
Among some rows only (filters, a full-text query, deleted rows: `allowed`), the answer is the k
nearest of THOSE rows, never fewer when that many have a vector. The graph is walked with the
allowed rows as a bitmap (faiss keeps only those as results, so nothing is over-fetched and
filtered away), its candidate list widened as the allowed fraction f shrinks (efSearch =
expansion x FILTERED_EXPANSION / f), because the walk meets allowed rows more rarely; when that
walk would cost more than comparing the allowed rows exactly (GRAPH_COST), or finds fewer
candidates than wanted, they are compared exactly. Exact comparisons pick candidates with float32
distances and rank them by float64 ones.

A search already runs a thread per split (split_threads.py): its vector math runs with one BLAS
and one OpenMP thread (`one_thread_math`), since their own threads on these small products only
contend (a 10% filtered search of 16 splits of 62,500 vectors: 169 vs 69 ms on 2 cores).

A table: every split's k nearest, merged by distance (distances compare across splits, unlike
per-split scores), ties by split and row. A hybrid search fuses the global full-text ranking
(BM25 with the table's statistics) and the global vector ranking of the `window` best of each:
reciprocal rank fusion (`rrf`: sum of 1 / (rrf_k + rank), ranks from 1, as Elasticsearch and
Lance) or a weighted sum of min-max normalised scores (`weighted`: text_weight x BM25 and
(1 - text_weight) x (1 - distance), each scaled to [0, 1] over its list; a row absent from a list
scores 0 there).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from indextables_spark.core.schema.types import ColumnSpec
from indextables_spark.core.split.format.vector_index import VectorIndex, distances
from indextables_spark.errors import InvalidOptionError

EXACT_BELOW = 20_000  # vectors (a split's, or its selection) compared exactly up to this many
REFINE = 4  # graph candidates re-ranked exactly per wanted neighbour
EXPANSION = 64  # the graph search's candidate list (faiss efSearch), at least the candidates
# A filtered graph walk's candidate list: expansion x this / the allowed fraction. Measured on
# splits of 100k clustered 128-d vectors, k 10: recall@10 1.0 at 10% and 25% (ef 256, 103), 0.98
# to 1.0 at 3% (ef 854; a random 3% at ef 64: 0.56).
FILTERED_EXPANSION = 0.4
# A step of the candidate list costs about as much CPU as comparing this many allowed vectors
# exactly (same splits, one thread: a walk at ef 256 and 10,000 vectors compared exactly both
# took 1.3 ms; at 3%, ef 854: 2.7 ms against 0.6 ms exact).
GRAPH_COST = 40
FUSIONS = ("rrf", "weighted")


@dataclass(frozen=True)
class Fusion:
    """How a hybrid search combines its full-text and vector rankings (module docstring)."""

    method: str = "rrf"
    rrf_k: int = 60
    text_weight: float = 0.5
    window: int | None = None  # the best rows of each ranking fused (None: max(k, 50) of each)

    def __post_init__(self) -> None:
        if self.method not in FUSIONS:
            raise InvalidOptionError(f"fusion {self.method!r}: expected one of {FUSIONS}")
        if self.rrf_k < 1:
            raise InvalidOptionError(f"fusion rrf_k={self.rrf_k}: expected a positive integer")
        if not 0.0 <= self.text_weight <= 1.0:
            raise InvalidOptionError(f"fusion text_weight={self.text_weight}: expected a weight in [0, 1]")
        if self.window is not None and self.window < 1:
            raise InvalidOptionError(f"fusion window={self.window}: expected a positive integer")

    def window_for(self, k: int) -> int:
        return self.window if self.window is not None else max(k, 50)


@dataclass(frozen=True)
class NearestQuery:
    """A vector search: the `k` rows whose `column` is nearest `vector`; with `fusion`, fused with
    the read's full-text query (else that query, like the filters, only selects the rows)."""

    column: str
    vector: tuple[float, ...]
    k: int
    fusion: Fusion | None = None
    expansion: int = EXPANSION
    exact_below: int = EXACT_BELOW

    def __post_init__(self) -> None:
        if self.k < 1:
            raise InvalidOptionError(f"a vector search needs k >= 1 (got {self.k})")
        if not self.vector or not all(math.isfinite(v) for v in self.vector):
            raise InvalidOptionError(f"the query vector of {self.column!r} must be non-empty and finite")

    @property
    def array(self) -> np.ndarray:
        return np.asarray(self.vector, dtype=np.float32)

    @property
    def wanted(self) -> int:
        """How many neighbours each split returns: k, or the fusion window."""
        return self.fusion.window_for(self.k) if self.fusion is not None else self.k


def check_vector_query(specs: Sequence[ColumnSpec], nearest: NearestQuery, where: str) -> None:
    """InvalidOptionError unless `nearest` names a vector column and matches its dimensions."""
    vectors = {s.name: s.vector for s in specs if s.vector is not None}
    spec = vectors.get(nearest.column)
    if spec is None:
        raise InvalidOptionError(
            f"table {where}: {nearest.column!r} is not a vector column (vector columns: {sorted(vectors) or 'none'}; "
            f"declare one with indexing.vector.<col> when the table is created)"
        )
    if len(nearest.vector) != spec.dims:
        raise InvalidOptionError(
            f"table {where}: the query vector has {len(nearest.vector)} dimensions, column {nearest.column!r} {spec.dims}"
        )


def vector_values(vector: Any, what: str) -> tuple[float, ...]:
    """A query vector's components (InvalidOptionError naming `what` unless a sequence of numbers)."""
    try:
        return tuple(float(v) for v in vector)
    except (TypeError, ValueError):
        raise InvalidOptionError(f"{what} must be a sequence of numbers, got {str(vector)[:80]}") from None


def vector_columns(specs: Sequence[ColumnSpec]) -> list[str]:
    """The vector columns among these column specs."""
    return [s.name for s in specs if s.vector is not None]


_math_lock = threading.Lock()
_math_users = 0
_math_limit: Any = None  # threadpoolctl's limit while a search does vector math
_math_libraries: Any = None  # threadpoolctl's controller (finding the libraries takes ~2 ms: once)


@contextlib.contextmanager
def one_thread_math() -> Iterator[None]:
    """One BLAS and one OpenMP thread while any search of this process does vector math (module
    docstring); the libraries' own settings come back when the last one ends."""
    global _math_users, _math_limit, _math_libraries
    with _math_lock:
        if _math_users == 0:
            if _math_libraries is None:
                # lazy, vector searches only; faiss first, so that its OpenBLAS and OpenMP are found too
                import faiss  # noqa: F401
                from threadpoolctl import ThreadpoolController  # lazy: as faiss

                _math_libraries = ThreadpoolController()
            _math_limit = _math_libraries.limit(limits=1)
        _math_users += 1
    try:
        yield
    finally:
        with _math_lock:
            _math_users -= 1
            if _math_users == 0:
                _math_limit.restore_original_limits()
                _math_limit = None


QUERY_CHUNK = 256  # queries whose rough distances are computed in one matrix product


@one_thread_math()
def nearest(
    index: VectorIndex,
    queries: np.ndarray,
    k: int,
    allowed: np.ndarray | None = None,
    *,
    expansion: int = EXPANSION,
    exact_below: int = EXACT_BELOW,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each query (a matrix, one query vector a row): (row ids, exact distances) of the k rows
    nearest it, nearest first (ties by row id), among the sorted row ids `allowed` when given (see
    the module docstring). A batch of queries shares the work that does not depend on the query:
    the allowed rows' positions and vectors, one graph search call, the rough distances of a
    chunk of queries in one matrix product. Runs under one_thread_math."""
    queries = np.asarray(queries, dtype=np.float32).reshape(-1, index.info.spec.dims)
    if len(index) == 0 or k <= 0:
        return [(np.empty(0, np.int64), np.empty(0, np.float64)) for _ in range(len(queries))]
    if allowed is None:
        if len(index) <= exact_below or not index.has_graph:
            return _exact(index, None, queries, k)
        found = index.graph_search(queries, k * REFINE, expansion)
        return [_exact(index, index.positions(np.sort(f)), q[None, :], k)[0] for f, q in zip(found, queries)]
    positions = index.positions(allowed)
    want = k * REFINE
    ef = filtered_expansion(expansion, want, len(positions), len(index))
    if len(positions) <= max(min(exact_below, GRAPH_COST * ef), want) or not index.has_graph:
        return _exact(index, positions, queries, k)
    found = index.graph_search(queries, want, ef, positions)
    return [
        _exact(index, index.positions(np.sort(f)) if len(f) >= want else positions, q[None, :], k)[0]
        for f, q in zip(found, queries)
    ]


def filtered_expansion(expansion: int, wanted: int, allowed: int, total: int) -> int:
    """The candidate list (faiss efSearch) of a graph walk that keeps `allowed` of `total` vectors."""
    return max(expansion, wanted, math.ceil(expansion * FILTERED_EXPANSION * total / max(allowed, 1)))


def _exact(
    index: VectorIndex, positions: np.ndarray | None, queries: np.ndarray, k: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each query, the k nearest of the vectors at `positions` (None: all): float32 distances
    of every one pick REFINE x k candidates (and any tied with the last of them), whose float64
    distances rank. The rough distances of QUERY_CHUNK queries are one matrix product."""
    n = len(index) if positions is None else len(positions)
    if n == 0:
        return [(np.empty(0, np.int64), np.empty(0, np.float64)) for _ in range(len(queries))]
    every = positions if positions is not None else np.arange(n)
    want = k * REFINE
    out = []
    for start in range(0, len(queries), QUERY_CHUNK):
        chunk = queries[start : start + QUERY_CHUNK]
        rough = index.rough_distances(positions, chunk) if n > want else None
        for j, query in enumerate(chunk):
            picked = every
            if rough is not None:
                col = rough[j]
                bound = np.partition(col, want)[want]
                picked = every[col <= bound + np.float32(1e-4) * max(1.0, abs(float(bound)))]
            d = distances(index.matrix[picked], query, index.metric)
            ids = np.asarray(index.ids[picked], dtype=np.int64)
            order = np.lexsort((ids, d))[:k]
            out.append((ids[order], d[order]))
    return out


# ---- fusion of the global rankings -----------------------------------------------------------------


def fused_scores(
    text_scores: np.ndarray, dists: np.ndarray, fusion: Fusion, window: int, tie: np.ndarray
) -> np.ndarray:
    """Fused scores (higher first) of candidate rows given their BM25 scores and their vector
    distances (NaN: not in that ranking's candidates): each ranking is cut to its `window` best,
    equal values ranked by `tie` (ascending)."""
    n = len(text_scores)
    text_rank = _ranks(text_scores, descending=True, window=window, tie=tie)
    vec_rank = _ranks(dists, descending=False, window=window, tie=tie)
    if fusion.method == "rrf":
        out = np.zeros(n)
        for rank in (text_rank, vec_rank):
            inside = rank > 0
            out[inside] += 1.0 / (fusion.rrf_k + rank[inside])
        return out
    text = _normalised(np.where(text_rank > 0, text_scores, np.nan), higher_better=True)
    vec = _normalised(np.where(vec_rank > 0, dists, np.nan), higher_better=False)
    w = fusion.text_weight
    return np.nan_to_num(w * text, nan=0.0) + np.nan_to_num((1.0 - w) * vec, nan=0.0)


def _ranks(values: np.ndarray, *, descending: bool, window: int, tie: np.ndarray) -> np.ndarray:
    """1-based ranks of the non-NaN values among their `window` best (0: outside), ties by `tie`."""
    ranks = np.zeros(len(values), dtype=np.int64)
    present = np.flatnonzero(~np.isnan(values))
    if not len(present):
        return ranks
    key = -values[present] if descending else values[present]
    order = present[np.lexsort((tie[present], key))][:window]
    ranks[order] = np.arange(1, len(order) + 1)
    return ranks


def _normalised(values: np.ndarray, *, higher_better: bool) -> np.ndarray:
    """Min-max scaled to [0, 1] (1 the best) over the non-NaN values; all equal: 1."""
    present = ~np.isnan(values)
    if not present.any():
        return values
    lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
    if hi == lo:
        return np.where(present, 1.0, np.nan)
    scaled = (values - lo) / (hi - lo)
    return scaled if higher_better else 1.0 - scaled
