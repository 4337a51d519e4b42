"""The space a split's vector index searches in (vector_index.py), and its distances brought back
to the metric's scale (smaller is nearer: cosine 1 - cos, l2 the squared distance, dot -a.b).

- cosine: the vectors normalised, compared by L2 (2 - 2 cos: the same order); a graph written
  before the index kinds (a footer without `kind`) compares them by inner product (cos);
- l2: the vectors as they are;
- dot: by inner product, except an `hnsw` graph written since LIFT_KEY: the vectors lifted to the
  L2 space of one more dimension (`lift_norm`, `index_vectors`, `query_vectors`).

Why the lift: faiss's HNSW under inner product builds its graph with a similarity that is no metric
(a vector is not its own nearest): every vector's neighbours are the few of largest norm in its
direction, and vectors of small norm get hardly any links to them. An unfiltered search, whose answer
is those large-norm vectors, does well; a walk under a filter (its answer: the best of the allowed
rows, of any norm) strands among the hubs. On 25,000 clustered 24-d vectors (tests/test_vector_kinds.py)
the inner-product graph found 0.4 of the 10 nearest under a 1% filter and 0.73 under 10% at any
efSearch; the lifted graph 1.0 at the walk's efSearch. The lift (Bachrach et al. 2014, the MIPS-to-L2
transform): each vector x gets sqrt(M^2 - |x|^2) appended (M: the split's largest norm, so every
lifted vector has norm M), a query q a 0: |q' - x'|^2 = |q|^2 + M^2 - 2 q.x, the dot order, in a
metric space. The footer records M under LIFT_KEY; a footer without it (an `ivf_pq` index, a graph
written before) searches by inner product as before. Exact distances never use the lift.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

LIFT_KEY = "mipsNorm"  # footer: an `hnsw` dot graph holds the vectors lifted to this norm


def lifts(kind: str, metric: str) -> bool:
    """Whether an index of this kind and metric is built lifted (`hnsw` under dot)."""
    return kind == "hnsw" and metric == "dot"


def lift_of(params: Mapping[str, Any]) -> float | None:
    """The norm a split's index lifted its vectors to (its footer params), None: not lifted."""
    norm = params.get(LIFT_KEY)
    return None if norm is None else float(norm)


def lift_norm(matrix: np.ndarray) -> float:
    """The norm every lifted vector gets: the vectors' largest (0.0 without vectors)."""
    if not len(matrix):
        return 0.0
    return float(np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64).max()))


def index_vectors(matrix: np.ndarray, metric: str, lift: float | None = None) -> np.ndarray:
    """The vectors as the index holds them: normalised for cosine, lifted to norm `lift` when given."""
    m = np.ascontiguousarray(matrix, dtype=np.float32)
    if lift is not None:
        squares = np.einsum("ij,ij->i", m, m, dtype=np.float64)
        extra = np.sqrt(np.maximum(lift * lift - squares, 0.0)).astype(np.float32)
        return np.ascontiguousarray(np.hstack([m, extra[:, None]]))
    if metric != "cosine":
        return m
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    return np.ascontiguousarray(m / np.where(norms == 0, 1, norms), dtype=np.float32)


def query_vectors(queries: np.ndarray, metric: str, lift: float | None = None) -> np.ndarray:
    """Query vectors as the index is searched with them: normalised for cosine, a 0 appended when lifted."""
    if lift is None:
        return index_vectors(queries, metric)
    q = np.zeros((len(queries), queries.shape[1] + 1), np.float32)
    q[:, :-1] = queries
    return q


def metric_scale(
    found: np.ndarray, metric: str, queries: np.ndarray, lift: float | None = None, inner_product: bool = False
) -> np.ndarray:
    """faiss's distances (float64, a row per query) in the metric's scale: its L2 between
    normalised vectors is 2 - 2 cos (cosine: half of it), its inner product between them cos
    (`inner_product`: the index compares by it; cosine: 1 - cos), its inner product negated
    (dot), a lifted graph's L2 |q|^2 + M^2 - 2 q.x (dot: -q.x)."""
    if metric == "cosine":
        return 1.0 - found if inner_product else found / 2
    if metric != "dot":
        return found
    if lift is None:
        return -found
    squares = (queries.astype(np.float64) ** 2).sum(axis=1, keepdims=True)
    return np.asarray((found - (squares + lift * lift)) * 0.5)
