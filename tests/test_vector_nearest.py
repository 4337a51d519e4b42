"""One split's nearest-neighbour search among selected rows (core/split/read/vector/nearest.py): the
graph walked with the selection as a bitmap, the switch to comparing the selection exactly, the
fallback when the walk finds too few, the one-thread vector math a search runs with, and the
selections kept for the next search (core/split/read/vector/selections.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from threadpoolctl import threadpool_info

import indextables_spark as it
from indextables_spark.core.schema.types import VectorSpec
from indextables_spark.core.split.read.vector import selections
from indextables_spark.core.split.read.plan import ReadPlan
from indextables_spark.core.split.format.vector_index import VectorIndex, VectorIndexInfo, build_index
from indextables_spark.core.split.read.vector import nearest as nearest_mod
from indextables_spark.core.split.read.vector.nearest import GRAPH_COST, filtered_expansion, nearest, one_thread_math

DIMS = 16


@pytest.fixture(scope="module")
def split_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[VectorIndex, np.ndarray]:
    """An HNSW graph of 30,000 clustered vectors whose row ids are 3 x position (ids and positions
    differ); the inverted file's walk: test_vector_kinds.py."""
    rng = np.random.default_rng(38)
    centres = rng.standard_normal((30, DIMS)).astype(np.float32) * 4
    x = (centres[rng.integers(0, 30, 30_000)] + rng.standard_normal((30_000, DIMS))).astype(np.float32)
    ids = np.arange(len(x), dtype=np.int64) * 3
    spec = VectorSpec(DIMS, "cosine", "hnsw")
    d: Path = tmp_path_factory.mktemp("vectors")
    params, _written = build_index(ids, x, spec, str(d / "g.faiss"), str(d / "v.f32"))
    info = VectorIndexInfo("emb", "g.faiss", "v.f32", spec, len(x), "faiss", params)
    return VectorIndex.open(str(d), info, "test split"), x


def _exact_top(x: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    xs = x.astype(np.float64)
    d = 1 - (xs @ q) / (np.linalg.norm(xs, axis=1) * np.linalg.norm(q))
    return [int(i) for i in ids[np.lexsort((ids, d))][:k]]


def _graph_calls(monkeypatch: pytest.MonkeyPatch, index: VectorIndex) -> list[tuple[int, int, bool]]:
    """Records (count, expansion, with a selection) of each graph_search call of `index`."""
    calls: list[tuple[int, int, bool]] = []
    original = index.graph_search

    def recording(queries, count, expansion, allowed=None):  # type: ignore[no-untyped-def]
        calls.append((count, expansion, allowed is not None))
        return original(queries, count, expansion, allowed)

    monkeypatch.setattr(index, "graph_search", recording)
    return calls


def test_a_large_selection_walks_the_graph_as_a_bitmap(split_index, monkeypatch) -> None:
    """Half the rows selected: one bitmap walk (no over-fetch), k rows of the selection, the exact ones."""
    index, x = split_index
    all_ids = np.arange(len(x), dtype=np.int64) * 3
    allowed = all_ids[(np.arange(len(x)) % 2) == 0]
    calls = _graph_calls(monkeypatch, index)
    rng = np.random.default_rng(1)
    found = total = 0
    for qi in rng.integers(0, len(x), 20):
        q = x[qi] + rng.standard_normal(DIMS).astype(np.float32) * 0.3
        (ids, dists) = nearest(index, q, 10, allowed, exact_below=0)[0]
        assert len(ids) == 10 and set(ids.tolist()) <= set(allowed.tolist())
        assert np.all(np.diff(dists) >= 0)
        found += len(set(ids.tolist()) & set(_exact_top(x[::2], allowed, q, 10)))
        total += 10
    assert found / total >= 0.95
    ef = filtered_expansion(64, 40, len(allowed), len(x))
    assert calls == [(40, ef, True)] * 20 and ef == 64  # at half the rows the walk is the plain one


def test_a_selection_cheaper_to_compare_is_compared_exactly(split_index, monkeypatch) -> None:
    """3% selected: the walk would need efSearch ~850, more than comparing 900 vectors: no walk,
    the exact answer."""
    index, x = split_index
    all_ids = np.arange(len(x), dtype=np.int64) * 3
    keep = (np.arange(len(x)) % 100) < 3
    allowed = all_ids[keep]
    ef = filtered_expansion(64, 40, len(allowed), len(x))
    assert len(allowed) <= GRAPH_COST * ef
    calls = _graph_calls(monkeypatch, index)
    q = x[5]
    (ids, _d) = nearest(index, q, 10, allowed, exact_below=20_000)[0]
    assert ids.tolist() == _exact_top(x[keep], allowed, q, 10) and calls == []
    # exactBelow 0 asks for the graph whatever the cost: a widened walk, still k selected rows
    (ids, _d) = nearest(index, q, 10, allowed, exact_below=0)[0]
    assert calls == [(40, ef, True)] and len(ids) == 10 and set(ids.tolist()) <= set(allowed.tolist())


def test_a_walk_that_finds_too_few_compares_the_selection(split_index, monkeypatch) -> None:
    """The answer is never short: a walk that returns fewer than 4 x k selected rows (as a graph
    cut off from the selection would) falls back to comparing every selected row."""
    index, x = split_index
    all_ids = np.arange(len(x), dtype=np.int64) * 3
    allowed = all_ids[: len(x) // 2]
    monkeypatch.setattr(
        index, "graph_search", lambda q, count, ef, allowed=None: [(allowed[:3], np.zeros(3)) for _ in q]
    )
    q = x[len(x) - 1]
    (ids, _d) = nearest(index, q, 10, allowed, exact_below=0)[0]
    assert ids.tolist() == _exact_top(x[: len(x) // 2], allowed, q, 10)


def _threads() -> set[int]:
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] in ("blas", "openmp")}


def test_vector_math_runs_on_one_thread_and_restores_the_libraries(monkeypatch) -> None:
    import faiss  # noqa: F401  # its OpenBLAS and OpenMP are among the libraries limited

    before = threadpool_info()
    seen: list[set[int]] = []
    with one_thread_math():
        seen.append(_threads())
        with one_thread_math():  # nested and concurrent searches share the limit
            seen.append(_threads())
        seen.append(_threads())
    assert seen == [{1}, {1}, {1}]
    assert threadpool_info() == before
    assert nearest_mod._math_users == 0


def test_a_selection_is_computed_once_per_split_filters_and_deletes(tmp_path, monkeypatch) -> None:
    """The second search under the same filter reuses each split's selection (same answer); other
    filters, a delete (a new table version) or the option turned off compute it again."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4000, DIMS)).astype(np.float32)
    path = str(tmp_path / "t")
    for s in range(2):
        ids = np.arange(s * 2000, (s + 1) * 2000)
        data = pa.table({"id": ids, "sel": ids % 10, "emb": pa.array(list(x[ids]), pa.list_(pa.float32()))})
        it.write_table(path, data, options={"spark.indextables.indexing.vector.emb": f"{DIMS},l2"})
    computed: list[int] = []
    original = ReadPlan.row_ids

    def counting(self, split, add, deletes, target):  # type: ignore[no-untyped-def]
        computed.append(1)
        return original(self, split, add, deletes, target)

    monkeypatch.setattr(ReadPlan, "row_ids", counting)
    selections.clear()
    t = it.IndexTable(path)

    def search(where: str, table: it.IndexTable = t) -> list[int]:
        return table.search(vector=x[7], limit=5, where=where, columns=["id"]).column("id").to_pylist()

    first = search("sel < 3")
    assert len(computed) == 2  # one selection per split
    assert search("sel < 3") == first and len(computed) == 2
    assert search("sel < 4") != [] and len(computed) == 4
    assert t.search_many(vectors=[x[7], x[8]], limit=5, where="sel < 3")[0].column("id").to_pylist() == first
    assert len(computed) == 4
    t.delete(f"id = {first[0]}")  # DELETE finds its rows with row_ids too: one split, one call
    assert len(computed) == 5
    after = search("sel < 3")  # the split with the delete selects again, the other reuses its own
    assert after == search("sel < 3")
    assert first[0] not in after and after[:4] == first[1:5] and len(computed) == 6
    off = it.IndexTable(path, options={"spark.indextables.cache.selections.enabled": "false"})
    assert search("sel < 3", off) == after and len(computed) == 8
    assert search("sel < 3", off) == after and len(computed) == 10
