"""Vector index kinds and the one float32 copy (core/split/format/vector_kinds.py, vector_index.py,
vector_space.py, core/split/cache/vector_rows.py): the kind and its parameters in
`indexing.vector.<col>`, recorded in the split footer; recall@10 >= 0.95 per metric and filter for
every kind with the index walked (not the exact path); an `hnsw` dot graph lifted to L2, one
written before the lift still read by inner product; the vector column's values read from the
vectors file (the row store holds none) on every read; a split written before the kinds (an HNSW
graph, the vectors in its row store, no `kind`) still reads, and MERGE SPLITS rewrites it with
the declared kind."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.core.schema.types import VectorSpec
from indextables_spark.core.split.format.bundle import read_footer
from indextables_spark.core.split.format.indexing import vector_spec
from indextables_spark.core.split.format import vector_index
from indextables_spark.core.split.format.vector_index import VectorIndex, VectorIndexInfo, build_index
from indextables_spark.core.split.format.vector_space import LIFT_KEY
from indextables_spark.core.split.read.vector import nearest as nearest_mod
from indextables_spark.core.split.read.vector.nearest import nearest, probes
from indextables_spark.errors import InvalidOptionError

P = "spark.indextables."
METRICS = ("cosine", "l2", "dot")


def clustered(n: int, dims: int, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, dims)).astype(np.float32) * 4
    return (centres[rng.integers(0, 40, n)] + rng.standard_normal((n, dims))).astype(np.float32)


def exact(x: np.ndarray, q: np.ndarray, metric: str) -> np.ndarray:
    xs = x.astype(np.float64)
    if metric == "cosine":
        return np.asarray(1 - (xs @ q) / (np.linalg.norm(xs, axis=1) * np.linalg.norm(q)))
    if metric == "l2":
        return np.asarray(((xs - q) ** 2).sum(axis=1))
    return np.asarray(-(xs @ q))


def top(d: np.ndarray, ids: np.ndarray, k: int) -> list[int]:
    return [int(i) for i in ids[np.lexsort((ids, d))][:k]]


def footers(t: it.IndexTable) -> list[Any]:
    return [read_footer(os.path.join(t.storage.uri, f.path), f.path) for f in t.snapshot().files]


def test_the_kind_and_its_parameters_are_part_of_the_option() -> None:
    assert vector_spec("128", "k") == VectorSpec(128, "cosine", "ivf_pq", ())
    assert vector_spec("128, L2, IVF_PQ, nlist=64, m=32", "k") == VectorSpec(
        128, "l2", "ivf_pq", (("m", 32), ("nlist", 64))
    )
    assert vector_spec("64,dot,hnsw,m=8", "k") == VectorSpec(64, "dot", "hnsw", (("m", 8),))
    for bad, message in (
        ("128,cosine,annoy", "unknown vector index kind 'annoy'"),
        ("128,cosine,ivf_pq,ef_construction=8", "not a parameter of ivf_pq"),
        ("128,cosine,ivf_pq,nlist", "not a parameter of ivf_pq"),
        ("128,cosine,ivf_pq,nlist=0", "nlist must be given once, a whole number"),
        ("128,cosine,ivf_pq,nlist=8,nlist=9", "nlist must be given once"),
        ("128,cosine,ivf_pq,m=5", "m=5 must divide the 128 dimensions"),
    ):
        with pytest.raises(InvalidOptionError, match=message):
            vector_spec(bad, "indexing.vector.emb")


def _vector_table(tmp_path: Path, kind: str, x: np.ndarray) -> it.IndexTable:
    """One split of `x` in three vector columns, one per metric, all of `kind`."""
    dims = x.shape[1]
    n = len(x)
    ids = np.arange(n)
    emb = pa.array(list(x), pa.list_(pa.float32()))
    table = pa.table({"id": pa.array(ids, pa.int64()), "sel": pa.array(ids % 100), **{f"e_{m}": emb for m in METRICS}})
    path = str(tmp_path / kind)
    it.write_table(path, table, options={P + f"indexing.vector.e_{m}": f"{dims},{m},{kind}" for m in METRICS})
    return it.IndexTable(path, options={P + "search.vector.exactBelow": "0"})


@pytest.mark.parametrize("kind", ["ivf_pq", "hnsw"])
def test_recall_per_kind_metric_and_filter_with_the_index_walked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Recall@10 >= 0.95 against exact search for each kind under cosine, l2 and dot, unfiltered
    and with filters keeping 1% and 10% of the rows, every search answered by a walk of the index
    (counted): a split of 25,000 vectors (above the exact-search threshold), exactBelow 0 so the
    filtered searches walk too (1% leaves 250 rows, more than the candidates wanted), and a walk
    counts only when it found enough candidates (else the rows would be compared exactly). An
    `hnsw` dot graph holds the vectors lifted to L2 (format/vector_space.py): the graph faiss
    builds by inner product (splits written before), walked with a bitmap, found 0.29 of the 10
    nearest here at 1% and 0.6 at 10% (0.97 unfiltered; 0.79 at 1% with its walks that found
    fewer than 40 candidates answered exactly, as they still are); the lifted one 1.0 and 1.0 (0.99)."""
    x = clustered(25_000, 24)
    t = _vector_table(tmp_path, kind, x)
    (footer,) = footers(t)
    assert {c: v["kind"] for c, v in footer.raw["vectors"].items()} == {f"e_{m}": kind for m in METRICS}
    lifted = {c for c, v in footer.raw["vectors"].items() if LIFT_KEY in v}
    assert lifted == ({"e_dot"} if kind == "hnsw" else set())
    walks: list[bool] = []
    search = VectorIndex.graph_search

    def counted(self: VectorIndex, queries: Any, count: int, expansion: int, allowed: Any = None) -> Any:
        found = search(self, queries, count, expansion, allowed)
        # (a walk finding fewer would be answered by comparing the rows exactly: nearest._walk_enough)
        assert all(len(ids) >= nearest_mod._walk_enough(self, 10, count) for ids, _d in found)
        walks.append(allowed is not None)
        return found

    monkeypatch.setattr(VectorIndex, "graph_search", counted)
    rng = np.random.default_rng(11)
    ids = np.arange(len(x))
    for metric in METRICS:
        for where, keep in ((None, ids >= 0), ("sel < 1", ids % 100 < 1), ("sel < 10", ids % 100 < 10)):
            found = 0
            walks.clear()
            queries = [
                x[qi] + rng.standard_normal(x.shape[1]).astype(np.float32) * 0.3 for qi in rng.integers(0, 25_000, 15)
            ]
            for q in queries:
                got = t.search(vector=q, vector_column=f"e_{metric}", limit=10, where=where, columns=["id"])
                truth = top(exact(x[keep], q, metric), ids[keep], 10)
                assert got.num_rows == 10
                found += len(set(got.column("id").to_pylist()) & set(truth))
            assert walks == [where is not None] * len(queries), (metric, where)
            assert found / (10 * len(queries)) >= 0.95, (kind, metric, where, found / (10 * len(queries)))


def test_an_inverted_file_probes_more_lists_under_a_filter_or_compares_exactly(tmp_path: Path) -> None:
    """nprobe = expansion / 4 unfiltered; under a filter keeping a fraction f, nprobe / sqrt(f) and
    enough lists to hold twice the wanted candidates among the kept rows, or the kept rows compared
    exactly when that costs less than reading the probed codes."""
    x = clustered(30_000, 16)
    ids = np.arange(len(x), dtype=np.int64) * 2
    spec = VectorSpec(16, "l2", "ivf_pq")
    params, written = build_index(ids, x, spec, str(tmp_path / "i.faiss"), str(tmp_path / "v.f32"))
    assert written and params["kind"] == "ivf_pq" and params["nlist"] == round(np.sqrt(30_000))
    index = VectorIndex.open(
        str(tmp_path), VectorIndexInfo("e", "i.faiss", "v.f32", spec, len(x), "faiss", params), "t"
    )
    assert index.inverted_lists == params["nlist"]
    calls: list[tuple[int, bool]] = []
    original = index.graph_search

    def recording(queries: Any, count: int, expansion: int, allowed: Any = None) -> Any:
        calls.append((expansion, allowed is not None))
        return original(queries, count, expansion, allowed)

    index.graph_search = recording  # type: ignore[method-assign]
    q = x[10] + 0.05
    (got, _d) = nearest(index, q, 10, exact_below=0)[0]
    assert calls == [(probes(64), False)] and probes(64) == 16
    assert len(set(got) & set(top(exact(x, q, "l2"), ids, 10))) >= 9
    half = ids[::2]  # half the rows: sqrt(2) times the lists
    calls.clear()
    (got, _d) = nearest(index, q, 10, half, exact_below=0)[0]
    assert calls == [(23, True)] and set(got) <= set(half)
    assert len(set(got) & set(top(exact(x[::2], q, "l2"), half, 10))) >= 9
    tenth = ids[::10]  # 10%: 16 x sqrt(10) lists, which hold more than twice the 160 candidates wanted
    assert nearest_mod.walk(index, 64, 160, len(tenth))[0] == 51
    # ten times the candidates (k 100): lists enough to hold twice them among the kept rows (every list)
    assert nearest_mod.walk(index, 64, 1600, len(tenth))[0] == index.inverted_lists
    assert nearest_mod.walk(index, 64, 800, len(tenth))[0] == math.ceil(2 * 800 * index.inverted_lists / len(tenth))
    # 1%: 160 lists, and 2 x 160 candidates among 300 kept rows need every list: that costs more than
    # the 300 kept rows compared exactly
    few = ids[::100]
    nprobe, cost = nearest_mod.walk(index, 64, 160, len(few))
    assert nprobe == index.inverted_lists and cost > len(few)
    calls.clear()
    (got, _d) = nearest(index, q, 10, few)[0]
    assert calls == [] and list(got) == top(exact(x[::100], q, "l2"), few, 10)


def test_an_hnsw_dot_graph_is_lifted_to_l2_and_one_written_before_reads_by_inner_product(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An `hnsw` graph under dot holds the vectors lifted to one more dimension (every one of the
    split's largest norm, recorded as `mipsNorm`), its walks' estimates are -q.x; a graph written
    before the lift (no `mipsNorm`: built by inner product) opens and answers as it did."""
    x = clustered(3000, 16)
    ids = np.arange(len(x), dtype=np.int64) * 3
    spec = VectorSpec(16, "dot", "hnsw")
    q = x[40] + 0.3
    truth = top(exact(x, q, "dot"), ids, 10)
    params, _ = build_index(ids, x, spec, str(tmp_path / "new.faiss"), str(tmp_path / "new.f32"))
    assert params[LIFT_KEY] == pytest.approx(float(np.linalg.norm(x.astype(np.float64), axis=1).max()))
    with monkeypatch.context() as m:
        m.setattr(vector_index, "lifts", lambda kind, metric: False)
        before, _ = build_index(ids, x, spec, str(tmp_path / "old.faiss"), str(tmp_path / "old.f32"))
    assert LIFT_KEY not in before
    for name, p, dims in (("new", params, 17), ("old", before, 16)):
        info = VectorIndexInfo("e", f"{name}.faiss", f"{name}.f32", spec, len(x), "faiss", p)
        index = VectorIndex.open(str(tmp_path), info, "t")
        ((found, estimates),) = index.graph_search(q[None, :], 40, 64)
        assert index._open_graph().d == dims
        assert len(found) == 40 and set(truth) <= set(found.tolist()), name
        np.testing.assert_allclose(estimates, exact(x[found // 3], q, "dot"), rtol=1e-4, atol=1e-3)
        assert nearest(index, q, 10, exact_below=0)[0][0].tolist() == truth
        assert nearest(index, q, 10, ids[::2], exact_below=0)[0][0].tolist() == top(
            exact(x[::2], q, "dot"), ids[::2], 10
        )


def test_a_small_split_has_no_index_file_and_is_compared_exactly(tmp_path: Path) -> None:
    x = clustered(300, 8)
    path = str(tmp_path / "t")
    table = pa.table({"id": pa.array(range(300), pa.int64()), "emb": pa.array(list(x), pa.list_(pa.float32()))})
    it.write_table(path, table, options={P + "indexing.vector.emb": "8,l2"})
    t = it.IndexTable(path)
    (footer,) = footers(t)
    entry = footer.raw["vectors"]["emb"]
    assert entry["file"] == "" and entry["kind"] == "ivf_pq"
    assert [f.name for f in footer.files if f.name.startswith("vectors.")] == ["vectors.0.f32"]
    q = x[7] + 0.01
    assert t.search(vector=q, limit=5).column("id").to_pylist() == top(exact(x, q, "l2"), np.arange(300), 5)


def test_the_vectors_file_is_the_columns_one_copy(tmp_path: Path) -> None:
    """array<float>: the row store holds empty lists (a few bytes a row), the footer says so
    (`rowStore` false, format version 2), and every read returns the vectors as written (NULL
    where NULL): scans, filtered reads, searches' rows, text searches; array<double> keeps its
    exact values in the row store."""
    n, dims = 3000, 64
    x = clustered(n, dims)
    emb = pa.array([None if i % 5 == 0 else list(v) for i, v in enumerate(x)], pa.list_(pa.float32()))
    dbl = pa.array([list(v.astype(np.float64) + 1e-9) for v in x], pa.list_(pa.float64()))
    ids = np.arange(n)
    body = pa.array([f"doc {i} {'fox' if i % 3 == 0 else 'dog'}" for i in ids])
    table = pa.table({"id": pa.array(ids, pa.int64()), "body": body, "emb": emb, "dbl": dbl})
    path = str(tmp_path / "t")
    opts = {
        P + "indexing.vector.emb": f"{dims},cosine",
        P + "indexing.vector.dbl": f"{dims},l2,hnsw",
        P + "indexing.typemap.body": "text",
    }
    it.write_table(path, table, options=opts)
    t = it.IndexTable(path)
    (footer,) = footers(t)
    assert footer.format_version == 2
    assert footer.raw["vectors"]["emb"]["rowStore"] is False and "rowStore" not in footer.raw["vectors"]["dbl"]
    assert footer.rows.length < n * dims * 8 + n * 64  # the doubles, not the floats too
    back = t.to_arrow()
    assert back.column("emb").combine_chunks().equals(emb) and back.column("dbl").combine_chunks().equals(dbl)
    picked = t.to_arrow(where="id IN (3, 5, 2999)", columns=["id", "emb"])
    assert picked.column("emb").to_pylist() == [emb[3].as_py(), None, emb[2999].as_py()]
    found = t.search(vector=x[12], vector_column="emb", limit=3, columns=["id", "emb"])
    assert found.column("id").to_pylist()[0] == 12
    assert found.column("emb").to_pylist()[0] == emb[12].as_py()
    text = t.search("body:fox", limit=4, columns=["id", "emb"])
    assert [emb[i].as_py() for i in text.column("id").to_pylist()] == text.column("emb").to_pylist()


def _old_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Splits as written before the kinds (the release's vector_index.build_index, line for line):
    the vectors file, an HNSW graph comparing by L2 under l2 and by inner product otherwise (cosine:
    of the normalised vectors), a footer without `kind` (`m`, `efConstruction`), the vectors in the
    row store, split format 1."""
    import faiss

    from indextables_spark.core.split.write import vectors

    def old_build(row_ids: Any, matrix: Any, spec: VectorSpec, index_path: str, vectors_path: str) -> Any:
        ids = np.ascontiguousarray(row_ids, dtype="<i8")
        x = np.ascontiguousarray(matrix, dtype="<f4")
        with open(vectors_path, "wb") as f:
            f.write(ids.tobytes())
            f.write(x.tobytes())
        metric = faiss.METRIC_L2 if spec.metric == "l2" else faiss.METRIC_INNER_PRODUCT
        graph = faiss.IndexHNSWFlat(spec.dims, 16, metric)
        graph.hnsw.efConstruction = 128
        if spec.metric == "cosine":
            x = np.ascontiguousarray(x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-30), dtype="<f4")
        graph.add(x)
        faiss.write_index(graph, index_path)
        return {"m": 16, "efConstruction": 128}, True

    monkeypatch.setattr(vector_index, "build_index", old_build)
    monkeypatch.setattr(vector_index, "lifts", lambda kind, metric: False)  # (a dot graph by inner product)
    monkeypatch.setattr(vectors, "outside_rows", lambda schema, specs, stores_rows: {})


@pytest.mark.parametrize("metric", METRICS)
def test_a_table_written_before_the_kinds_reads_and_merges_into_the_declared_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metric: str
) -> None:
    """Old splits' graphs answer by their own comparison: a cosine graph of that release compares
    by inner product, whose estimates once ranked the table-wide candidates backwards (recall 0)."""
    x = clustered(4000, 16)
    ids = np.arange(len(x))
    path = str(tmp_path / "t")

    def part(lo: int, hi: int) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(ids[lo:hi], pa.int64()),
                "sel": pa.array(ids[lo:hi] % 10),
                "emb": pa.array(list(x[lo:hi]), pa.list_(pa.float32())),
            }
        )

    with monkeypatch.context() as m:
        _old_writer(m)
        # three splits: more candidates than the table re-ranks (vector/table_search.py TABLE_REFINE)
        it.write_table(path, part(0, 700), options={P + "indexing.vector.emb": f"16,{metric}"})
        it.write_table(path, part(700, 1400))
        it.write_table(path, part(1400, 2000))
    t = it.IndexTable(path, options={P + "search.vector.exactBelow": "0"})
    q = x[1234] + 0.02
    assert t.search(vector=q, columns=["id"]).column("id").to_pylist() == top(
        exact(x[:2000], q, metric), ids[:2000], 10
    )
    it.write_table(path, part(2000, 4000))  # the table's declaration: the default kind
    *olds, new = footers(t)
    assert [(o.format_version, "kind" in o.raw["vectors"]["emb"]) for o in olds] == [(1, False)] * 3
    assert new.format_version == 2 and new.raw["vectors"]["emb"]["kind"] == "ivf_pq"
    assert t.to_arrow().sort_by("id").column("emb").combine_chunks().equals(pa.array(list(x), pa.list_(pa.float32())))
    assert t.search(vector=q, columns=["id"]).column("id").to_pylist() == top(exact(x, q, metric), ids, 10)
    t.delete(where="id IN (1234, 3001)")
    alive = ~np.isin(ids, [1234, 3001])
    want = top(exact(x[alive], q, metric), ids[alive], 10)
    assert t.search(vector=q, columns=["id"]).column("id").to_pylist() == want
    before = t.version()
    assert t.maintenance.merge_splits()["status"] == "SUCCESS"
    (merged,) = footers(t)
    assert merged.raw["vectors"]["emb"]["kind"] == "ivf_pq" and merged.raw["vectors"]["emb"]["rowStore"] is False
    assert t.search(vector=q, columns=["id"]).column("id").to_pylist() == want
    assert t.to_arrow().num_rows == 3998
    assert t.search(vector=q, columns=["id"], version=before).column("id").to_pylist() == want
