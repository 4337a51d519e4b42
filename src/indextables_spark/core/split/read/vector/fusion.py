"""How a hybrid search fuses its two rankings, once for every route (the Spark-free search and a
Spark task fuse with this code: table_search.py). What a caller asks (Fusion, parse_fusion):
fusion_spec.py.

The rankings are the table's: its candidates' BM25 scores (the table's statistics) and their
vector distances (which compare across splits, unlike per-split scores), each cut to its `window`
best. Reciprocal rank fusion (`rrf`: sum of 1 / (rrf_k + rank), ranks from 1, as Elasticsearch and
Lance) or a weighted sum of min-max normalised scores (`weighted`: text_weight x BM25 and
(1 - text_weight) x (1 - distance), each scaled to [0, 1] over its list; a row absent from a list
scores 0 there). The best come first: by fused score, then distance, then the tie-break the
caller gives (split ordinal, row id).
"""

from __future__ import annotations

import numpy as np

from indextables_spark.core.split.read.vector.fusion_spec import Fusion

__all__ = ["Fusion", "fused_scores", "fused_top"]


def fused_top(
    text_scores: np.ndarray, dists: np.ndarray, fusion: Fusion, k: int, window: int, tie: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The k best candidates of the fused rankings (fused_scores): their positions, best first
    (fused score, then distance, then `tie` ascending; a candidate outside both windows is left
    out), and their fused scores."""
    fused = fused_scores(text_scores, dists, fusion, window, tie)
    order = np.lexsort((tie, np.nan_to_num(dists, nan=np.inf), -fused))
    order = order[fused[order] > 0][:k]
    return order, fused[order]


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
