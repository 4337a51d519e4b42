"""Nearest neighbours of query vectors in one split's vector index (format/vector_index.py holds
the files); split_search.py decides which rows of the split a search may return.

The index proposes candidates (an `hnsw` graph REFINE x k, an `ivf_pq` inverted file of codes
REFINE_CODES x k) with its estimates of their distances (`propose`), which are re-ranked by their
exact distance (the vectors file; `refine`): the split's k nearest; a split of few vectors is
compared exactly instead. A table search ranks the estimates of all its splits first and
re-ranks only the best (read/vector/table_search.py). Among some rows only (filters, a
full-text query, deleted rows: `allowed`), the answer is the k nearest of THOSE rows, never fewer
when that many have a vector. The index is searched with the allowed rows as a bitmap (faiss keeps
only those as results, so nothing is over-fetched and filtered away): a graph's candidate list
widened as the allowed fraction f shrinks (efSearch = expansion x FILTERED_EXPANSION / f), because
the walk meets allowed rows more rarely; an inverted file's probed lists likewise (`walk`); when
that search would cost more than comparing the allowed rows exactly (GRAPH_COST, IVF_CODE_COST),
or finds fewer candidates than wanted (a graph of a metric space, whose estimates are float32
distances: fewer than k; `_walk_enough`), they are compared exactly. Exact comparisons pick candidates with float32 distances and rank
them by float64 ones.

A search already runs a thread per split (split_threads.py): its vector math runs with one BLAS
and one OpenMP thread (`one_thread_math`), since their own threads on these small products only
contend (a 10% filtered search of 16 splits of 62,500 vectors: 169 vs 69 ms on 2 cores).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from indextables_spark.core.split.format.vector_index import VectorIndex, distances

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
# An index of compressed codes (kind ivf_pq, vector_kinds.py) proposes more candidates,
# REFINE_CODES per wanted neighbour, for the exact re-rank; an inverted file probes expansion /
# EXPANSION_PER_PROBE lists (16 at the default expansion). Measured (bench/vector_index_choice.py,
# docs/benchmarks.md; and 25,000 isotropic clustered vectors of 16-128 dimensions, 16 of 316 lists
# probed): 4-bit codes of one dimension each gave recall@10 0.993-1.0 at 10 candidates per
# neighbour, 1.0 at 20 (of two dimensions each: 0.63-0.69 and 0.85-0.87); under a 1% filter 16 of
# 707 lists 0.94, 64 lists 0.98; a code read costs about 1/16 of a vector compared exactly.
REFINE_CODES = 16
# Selected rows whose vectors a split on object storage lacks are searched through the index (held
# already) when they are more than this many times its candidates: each lacking vector is a page
# to fetch (bench/cold_vector_s3.py --where 'sel < 1': 1,250 selected rows a split compared
# exactly read 10,202 pages in 12.7 s).
COLD_EXACT = 2
EXPANSION_PER_PROBE = 4
# Under a filter keeping a fraction f an inverted file probes f ** -FILTERED_PROBE_POWER times the
# lists (the nearest kept rows lie farther out), and at least enough lists to hold ALLOWED_CODES x
# the wanted candidates among the kept rows (fewer: the scan finds too few, and the kept rows are
# compared exactly after it). The scan reads every code of a probed list, kept or not (faiss's
# fastscan applies the bitmap to its results), so at 768 dimensions a 10% filter's 80 lists (1/f)
# took 2x the time of 26 (1.51 against 0.73 ms a split of 50,000; 8 lists 0.42). Measured
# recall@10 (1% 3% 10% 30%, expansion 32-64): 1.000 on the bench's data (1,000 clusters; 768-d 4
# splits, 128-d 16 splits) and 0.997-1.000 on the tests' (40 clusters; 24-d, 25,000 a split) with
# 1/f, 1/sqrt(f) and even no widening; on 5,000 tight clusters of 10 (128-d, the kept rows nearest
# a query scattered among other clusters) a 10% filter found 0.97 with 1/f, 0.68 with 1/sqrt(f) at
# expansion 64, 1.00 at expansion 256 (30%: 0.81 / 0.70 at 64, 1.00 / 0.96 at 256): such data
# needs a higher `search.vector.expansion` (docs/benchmarks.md).
FILTERED_PROBE_POWER = 0.5
ALLOWED_CODES = 2
IVF_CODE_COST = 1 / 16

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


@dataclass(frozen=True)
class Proposal:
    """One query's candidates in one split (`propose`): row ids with their exact distances,
    nearest first, at most k; or (`estimated`) the index's candidates with its estimates of their
    distances, of which `refine` ranks any subset exactly (`keep`: how many of them it re-ranks
    for the split's k nearest)."""

    ids: np.ndarray
    dists: np.ndarray
    estimated: bool = False
    keep: int = 0

    def subset(self, chosen: np.ndarray) -> Proposal:
        return Proposal(self.ids[chosen], self.dists[chosen], self.estimated, self.keep)


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
    the module docstring): `propose`, then `refine`."""
    queries = np.asarray(queries, dtype=np.float32).reshape(-1, index.info.spec.dims)
    found = propose(index, queries, k, allowed, expansion=expansion, exact_below=exact_below)
    return [refine(index, p, q, k) for p, q in zip(found, queries)]


@one_thread_math()
def propose(
    index: VectorIndex,
    queries: np.ndarray,
    k: int,
    allowed: np.ndarray | None = None,
    *,
    expansion: int = EXPANSION,
    exact_below: int = EXACT_BELOW,
) -> list[Proposal]:
    """For each query, the split's answer before the exact re-rank of the index's candidates:
    the exact k nearest where the rows are compared exactly, else the index's candidates with
    their estimated distances (table_search.py ranks the estimates of every split together and
    re-ranks only the best of them, whose vectors a split on object storage then fetches). A batch
    of queries shares the work that does not depend on the query: the allowed rows' positions
    and vectors, one graph search call, the rough distances of a chunk of queries in one matrix
    product. Runs under one_thread_math."""
    queries = np.asarray(queries, dtype=np.float32).reshape(-1, index.info.spec.dims)
    if len(index) == 0 or k <= 0:
        return [Proposal(np.empty(0, np.int64), np.empty(0, np.float64)) for _ in range(len(queries))]
    want = k * (REFINE if index.holds_vectors else REFINE_CODES)
    if allowed is None:
        if len(index) <= exact_below or not index.has_graph:
            return [Proposal(ids, d) for ids, d in _exact(index, None, queries, k)]
        found = index.graph_search(queries, want, probes(expansion) if index.inverted_lists else expansion)
        enough = min(want, len(index))  # (fewer: the probed lists held too few; compared exactly)
        return [
            Proposal(ids, est, True, want) if len(ids) >= enough else Proposal(*_exact(index, None, q[None, :], k)[0])
            for (ids, est), q in zip(found, queries)
        ]
    positions = index.positions(allowed)
    ef, cost = walk(index, expansion, want, len(positions))
    if (
        len(positions) <= max(min(exact_below, cost), want) and not _cold(index, positions, want)
    ) or not index.has_graph:
        return [Proposal(ids, d) for ids, d in _exact(index, positions, queries, k)]
    found = index.graph_search(queries, want, ef, positions)
    enough = _walk_enough(index, k, want)
    return [
        Proposal(ids, est, True, want) if len(ids) >= enough else Proposal(*_exact(index, positions, q[None, :], k)[0])
        for (ids, est), q in zip(found, queries)
    ]


@one_thread_math()
def refine(index: VectorIndex, proposal: Proposal, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(row ids, exact distances) of the k nearest of a proposal's rows, nearest first: its own
    when exact, else its candidates' vectors compared exactly (`_exact`)."""
    if not proposal.estimated:
        return proposal.ids[:k], proposal.dists[:k]
    q = np.asarray(query, dtype=np.float32).reshape(1, index.info.spec.dims)
    return _exact(index, index.positions(np.sort(proposal.ids)), q, k)[0]


def _walk_enough(index: VectorIndex, k: int, want: int) -> int:
    """The fewest candidates a filtered walk answers with (fewer: the allowed rows are compared
    exactly). A graph walk's candidate list of efSearch holds about efSearch x f allowed rows: at 1%
    (efSearch 2,560 of 25,000 vectors) a third of the walks met fewer than the 40 wanted, yet each
    held the 10 nearest (bench/hnsw_recall.py): a graph of a metric space answers with k, its
    estimates being the vectors' own distances. Not a graph built by inner product (a dot graph
    written before the lift: format/vector_space.py), whose walks strand: its fallback stays."""
    metric_graph = index.holds_vectors and (index.metric != "dot" or index.info.lift is not None)
    return k if metric_graph else want


def _cold(index: VectorIndex, positions: np.ndarray, want: int) -> bool:
    """Whether the index, held already, beats comparing the selected rows exactly because their
    vectors are not at hand (a split on object storage: each would be a page fetched, the index
    needs `want` of them): more than COLD_EXACT x `want` of them and some lacking."""
    return (
        index.has_graph
        and len(positions) > COLD_EXACT * want
        and not index.lacks_index()
        and index.lacks_vectors(positions)
    )


def walk(index: VectorIndex, expansion: int, wanted: int, allowed: int) -> tuple[int, float]:
    """(the search knob, its cost in vectors compared exactly) of a filtered search keeping
    `allowed` of the index's vectors: a graph's widened efSearch (filtered_expansion) at
    GRAPH_COST a step; an inverted file's probed lists, widened as the allowed fraction f shrinks
    (probes(expansion) x f ** -FILTERED_PROBE_POWER, and enough to hold ALLOWED_CODES x `wanted`
    allowed rows; at most every list), at IVF_CODE_COST a code read."""
    lists = index.inverted_lists
    if not lists:
        ef = filtered_expansion(expansion, wanted, allowed, len(index))
        return ef, GRAPH_COST * ef
    base = probes(expansion)
    kept = max(allowed, 1)
    widened = base * (len(index) / kept) ** FILTERED_PROBE_POWER
    enough = ALLOWED_CODES * wanted * lists / kept  # a list holds kept / lists allowed rows on average
    nprobe = min(lists, max(base, math.ceil(widened), math.ceil(enough)))
    return nprobe, IVF_CODE_COST * nprobe * len(index) / lists


def probes(expansion: int) -> int:
    """An inverted file's probed lists (faiss nprobe) for the search's expansion."""
    return max(1, math.ceil(expansion / EXPANSION_PER_PROBE))


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
            d = distances(index.vectors(picked), query, index.metric)
            ids = np.asarray(index.ids[picked], dtype=np.int64)
            order = np.lexsort((ids, d))[:k]
            out.append((ids[order], d[order]))
    return out
