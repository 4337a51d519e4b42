"""Vector columns and vector/hybrid search without Spark (#38; core/split/write/vectors.py,
core/split/format/vector_index.py, core/split/read/vector/): what a write refuses before
committing anything, recall against exact search with and without filters, exact answers where
the search compares every selected row, hybrid search against a fusion computed here from exact
rankings, and the rows right under deletes, merges, time travel and partition pruning."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.core.split.format.vector_index import VectorIndex
from indextables_spark.errors import InvalidOptionError, SchemaMismatchError, UnsupportedTypeError

P = "spark.indextables."
DIMS = 32


def clustered(n: int, dims: int = DIMS, clusters: int = 40, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dims)).astype(np.float32) * 4
    return (centres[rng.integers(0, clusters, n)] + rng.standard_normal((n, dims))).astype(np.float32)


def rows(x: np.ndarray, start: int = 0) -> pa.Table:
    n = len(x)
    ids = np.arange(start, start + n)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array([f"r{i % 4}" for i in ids]),
            "body": pa.array([_body(int(i)) for i in ids]),
            "sel": pa.array(ids % 100, pa.int64()),
            "emb": pa.array(list(x), pa.list_(pa.float32())),
        }
    )


def _body(i: int) -> str:
    """Text whose BM25 scores vary (term frequency and length): rankings with few ties."""
    quick = " ".join(["quick"] * ((i // 5) % 4 + 1)) if i % 5 == 0 else "lazy"
    return f"doc {i} {'fox' if i % 3 == 0 else 'dog'} {quick}" + " filler" * (i % 7)


def options(metric: str = "cosine", **extra: str) -> dict[str, str]:
    return {P + "indexing.vector.emb": f"{DIMS},{metric}", P + "indexing.typemap.body": "text", **extra}


def exact(x: np.ndarray, q: np.ndarray, metric: str = "cosine") -> np.ndarray:
    if metric == "cosine":
        return np.asarray(1 - (x.astype(np.float64) @ q) / (np.linalg.norm(x, axis=1) * np.linalg.norm(q)))
    if metric == "l2":
        return np.asarray(((x.astype(np.float64) - q) ** 2).sum(axis=1))
    return np.asarray(-(x.astype(np.float64) @ q))


def top(d: np.ndarray, ids: np.ndarray, k: int) -> list[int]:
    return [int(i) for i in ids[np.lexsort((ids, d))][:k]]


def _table(tmp_path: Path, x: np.ndarray, splits: int = 4, metric: str = "cosine", **opts: str) -> it.IndexTable:
    path = str(tmp_path / "t")
    per = -(-len(x) // splits)
    for s in range(splits):
        part = x[s * per : (s + 1) * per]
        it.write_table(path, rows(part, s * per), options=options(metric, **opts))
    t = it.IndexTable(path, options={P + "cache.disk.path": str(tmp_path / "cache")})
    assert t.snapshot().num_files == splits
    return t


def _ids(t: pa.Table) -> list[int]:
    return [int(i) for i in t.column("id").to_pylist()]


# ---- writing ----------------------------------------------------------------------------------------


def test_bad_vectors_fail_the_write_naming_column_and_row(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    good = rows(clustered(10))
    it.write_table(path, good, options=options())
    version = it.IndexTable(path).version()

    def with_emb(values: list[Any]) -> pa.Table:
        return good.slice(0, len(values)).set_column(4, "emb", pa.array(values, pa.list_(pa.float32())))

    ok = [1.0] * DIMS
    cases = [
        ([ok, [1.0] * (DIMS - 1)], r"column 'emb'.*row 1 has a vector of 31 dimensions.*declared with 32"),
        ([ok, ok[:-1] + [float("nan")]], r"column 'emb'.*row 1 has a NaN or infinite component"),
        ([ok[:-1] + [None], ok], r"column 'emb'.*row 0 has a NULL component"),
        ([ok, [0.0] * DIMS], r"row 1 has a zero vector"),
    ]
    for values, message in cases:
        with pytest.raises(SchemaMismatchError, match=message):
            it.write_table(path, with_emb(values))
    assert it.IndexTable(path).version() == version  # nothing committed


def test_vector_options_are_checked(tmp_path: Path) -> None:
    t = rows(clustered(4))
    with pytest.raises(UnsupportedTypeError, match=r"indexing.vector.body.*'body'.*array of float or double"):
        it.write_table(str(tmp_path / "a"), t, options={P + "indexing.vector.body": "32"})
    for bad in ("0", "32,manhattan", "x", "32,cosine,extra"):
        with pytest.raises(InvalidOptionError, match="indexing.vector.emb"):
            it.write_table(str(tmp_path / "b"), t, options={P + "indexing.vector.emb": bad})
    with pytest.raises(InvalidOptionError, match="indexonlyfields.*'emb'|'emb'.*indexonlyfields"):
        it.write_table(str(tmp_path / "c"), t, options={**options(), P + "indexing.indexonlyfields": "emb"})


def test_rows_without_a_vector_are_stored_and_never_returned(tmp_path: Path) -> None:
    x = clustered(50)
    t = rows(x)
    emb = pa.array([None if i % 2 else list(v) for i, v in enumerate(x)], pa.list_(pa.float32()))
    path = str(tmp_path / "t")
    it.write_table(path, t.set_column(4, "emb", emb), options=options())
    table = it.IndexTable(path)
    assert table.to_arrow(where="id = 1").column("emb").to_pylist() == [None]
    got = table.search(vector=x[1], limit=50)
    assert got.num_rows == 25 and all(i % 2 == 0 for i in _ids(got))
    assert _ids(got)[:5] == top(exact(x[::2], x[1]), np.arange(0, 50, 2), 5)


# ---- search ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("metric", ["cosine", "l2", "dot"])
def test_recall_against_exact_search(tmp_path: Path, metric: str) -> None:
    """Recall@10 >= 0.95 against exact search, unfiltered and with filters selecting 1% and 10% of
    the rows (the graph searched for more candidates: exactBelow 0), and k results for each."""
    x = clustered(20_000)
    t = _table(tmp_path, x, metric=metric, **{P + "search.vector.exactBelow": "0"})
    t = it.IndexTable(t.storage.uri, options={**t.options.values, P + "search.vector.exactBelow": "0"})
    rng = np.random.default_rng(11)
    ids = np.arange(len(x))
    for where, keep in ((None, ids >= 0), ("sel < 1", ids % 100 < 1), ("sel < 10", ids % 100 < 10)):
        found = total = 0
        for qi in rng.integers(0, len(x), 20):
            q = x[qi] + rng.standard_normal(DIMS).astype(np.float32) * 0.3
            got = _ids(t.search(vector=q, limit=10, where=where))
            truth = top(exact(x[keep], q, metric), ids[keep], 10)
            assert len(got) == 10, where
            found += len(set(got) & set(truth))
            total += 10
        assert found / total >= 0.95, (metric, where, found / total)


def test_a_filtered_search_among_few_rows_is_exact(tmp_path: Path) -> None:
    x = clustered(8000)
    t = _table(tmp_path, x)
    ids = np.arange(len(x))
    keep = (ids % 100 < 10) & (ids % 4 == 2)
    q = x[77]
    got = t.search(vector=q, limit=10, where="sel < 10 AND region = 'r2'")
    assert _ids(got) == top(exact(x[keep], q), ids[keep], 10)
    d = exact(x, q)
    assert np.allclose(got.column("_distance").to_numpy(), d[_ids(got)], atol=1e-5)
    # a full-text query with fusion="none" selects the rows too (without it: fused, the default)
    fox = ids % 3 == 0
    assert _ids(t.search("body:fox", vector=q, limit=7, fusion="none")) == top(exact(x[fox], q), ids[fox], 7)


def _fusion(text: list[int], vec: list[int], k: int, rrf_k: int = 60) -> list[int]:
    """Reciprocal rank fusion, written out (ties: the better vector distance first, then id)."""
    score: dict[int, float] = {}
    for ranking in (text, vec):
        for rank, i in enumerate(ranking, start=1):
            score[i] = score.get(i, 0.0) + 1.0 / (rrf_k + rank)
    pos = {i: n for n, i in enumerate(vec)}
    return sorted(score, key=lambda i: (-score[i], pos.get(i, len(vec)), i))[:k]


def test_hybrid_search_is_the_fusion_of_exact_rankings(tmp_path: Path) -> None:
    x = clustered(6000)
    t = _table(tmp_path, x)
    t = it.IndexTable(t.storage.uri, options={**t.options.values, P + "search.vector.exactBelow": "1000000"})
    ids = np.arange(len(x))
    window, k = 50, 10
    for query, qi, where in (("body:quick", 10, None), ("body:fox OR body:quick", 999, "region = 'r1'")):
        q = x[qi] + 0.1
        text = _ids(t.search(query, limit=window, where=where))
        keep = np.ones(len(x), bool) if where is None else ids % 4 == 1
        vec = top(exact(x[keep], q), ids[keep], window)
        got = t.search(query, vector=q, limit=k, where=where, fusion={"method": "rrf", "window": window})
        assert _ids(got) == _fusion(text, vec, k)
        assert got.column("_score").to_pylist() == sorted(got.column("_score").to_pylist(), reverse=True)
    # the weighted form: min-max normalised BM25 and distance
    text_t = t.search("body:quick", limit=window)
    vec_d = exact(x, x[10] + 0.1)
    vec = top(vec_d, ids, window)
    s_text = dict(zip(_ids(text_t), text_t.column("_score").to_pylist()))
    lo, hi = min(s_text.values()), max(s_text.values())
    assert hi > lo
    d = {i: vec_d[i] for i in vec}
    dlo, dhi = min(d.values()), max(d.values())
    fused = {
        i: 0.3 * ((s_text[i] - lo) / (hi - lo) if i in s_text else 0.0)
        + 0.7 * ((1 - (d[i] - dlo) / (dhi - dlo)) if i in d else 0.0)
        for i in set(s_text) | set(d)
    }
    want = sorted(fused, key=lambda i: (-round(fused[i], 6), vec_d[i], i))[:k]
    got = t.search(
        "body:quick", vector=x[10] + 0.1, limit=k, fusion={"method": "weighted", "text_weight": 0.3, "window": window}
    )
    assert _ids(got) == want


@pytest.mark.parametrize(("kind", "metric"), [("ivf_pq", "cosine"), ("hnsw", "cosine"), ("hnsw", "dot")])
def test_deletes_merges_time_travel_and_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, metric: str
) -> None:
    """The exact rows under deletes, time travel, partition pruning and merges for each index kind,
    every split's index walked (exactBelow 0; the walks counted): two writes of four partitions,
    splits of 1,000 vectors (an `ivf_pq` index from MIN_INDEXED on), merged into four of 2,000;
    `hnsw` also under dot (its graph lifted to L2: format/vector_space.py)."""
    x = clustered(8000)
    path = str(tmp_path / "t")
    declared = {**options(metric), P + "indexing.vector.emb": f"{DIMS},{metric},{kind}"}
    it.write_table(path, rows(x[:4000]), options=declared, partition_by=["region"])
    it.write_table(path, rows(x[4000:], 4000), partition_by=["region"])
    cache = {P + "cache.disk.path": str(tmp_path / "cache"), P + "search.vector.exactBelow": "0"}
    t = it.IndexTable(path, options=cache)
    walks: list[bool] = []
    search = VectorIndex.graph_search

    def counted(self: VectorIndex, queries: Any, count: int, expansion: int, allowed: Any = None) -> Any:
        walks.append(allowed is not None)
        return search(self, queries, count, expansion, allowed)

    monkeypatch.setattr(VectorIndex, "graph_search", counted)

    def walked(splits: int, filtered: bool, **search_args: Any) -> list[int]:
        walks.clear()
        found = _ids(t.search(vector=q, **search_args))
        assert walks == [filtered] * splits, search_args
        return found

    ids = np.arange(len(x))
    q = x[123]
    before = t.version()
    nearest = top(exact(x, q, metric), ids, 10)
    assert walked(8, False) == nearest
    # deletes: the deleted rows drop out, still 10 rows (the splits holding them walked among the rest)
    t.delete(where=f"id IN ({nearest[0]}, {nearest[3]})")
    alive = ~np.isin(ids, [nearest[0], nearest[3]])
    after = top(exact(x[alive], q, metric), ids[alive], 10)
    holding = len({(int(i) >= 4000, int(i) % 4) for i in (nearest[0], nearest[3])})  # (write, region)
    walks.clear()
    assert _ids(t.search(vector=q)) == after and len(walks) == 8 and walks.count(True) == holding
    # time travel: the version before the delete
    assert walked(8, False, version=before) == nearest
    # partition pruning: the two splits of r1
    r1 = ids % 4 == 1
    assert walked(2, False, where="region = 'r1'") == top(exact(x[r1 & alive], q, metric), ids[r1 & alive], 10)
    # merges rebuild the index from the rows: the same answers, the deletes applied
    merged = t.maintenance.merge_splits()
    assert merged["status"] == "SUCCESS" and t.snapshot().num_files == 4
    assert walked(4, False) == after
    assert walked(8, False, version=before) == nearest


def test_search_many_answers_each_query_as_search_does(tmp_path: Path) -> None:
    """IndexTable.search_many (what it.search_join runs per batch of queries): the vector searches
    run together (one plan, each split's selection once, one graph call per split) and each answer
    equals search() of that query alone — through the graph and exactly, filtered, with deletes;
    text, hybrid and empty queries in the same batch."""
    x = clustered(12_000)
    t = _table(tmp_path, x)
    t.delete(where="id IN (" + ", ".join(str(i) for i in range(0, 12_000, 97)) + ")")
    rng = np.random.default_rng(3)
    qs = [x[i] + rng.standard_normal(DIMS).astype(np.float32) * 0.3 for i in rng.integers(0, len(x), 12)]
    for opts in ({}, {P + "search.vector.exactBelow": "0"}):
        tt = it.IndexTable(t.storage.uri, options={**t.options.values, **opts})
        for where in (None, "sel < 10", "sel < 60 AND region = 'r2'"):
            got = tt.search_many(vectors=qs, where=where, limit=7, columns=["id", "sel"])
            assert len(got) == len(qs)
            for q, table in zip(qs, got):
                assert table.equals(tt.search(vector=q, where=where, limit=7, columns=["id", "sel"])), (opts, where)
                assert table.num_rows == 7
    texts = ["body:fox", None, "body:quick", None]
    vecs = [None, qs[0], qs[1], None]
    got = t.search_many(texts, vectors=vecs, fusion="rrf", limit=5)
    assert got[0].equals(t.search("body:fox", limit=5))
    assert got[1].equals(t.search(vector=qs[0], limit=5))
    assert got[2].equals(t.search("body:quick", vector=qs[1], fusion="rrf", limit=5))
    assert got[3].num_rows == 0 and "id" in got[3].schema.names
    with pytest.raises(InvalidOptionError, match="query vector 1 has 3 dimensions, column 'emb' 32"):
        t.search_many(vectors=[qs[0], [1.0, 2.0, 3.0]])
    with pytest.raises(InvalidOptionError, match="query vector 1 must be a sequence of numbers"):
        t.search_many(vectors=[qs[0], "abc"])
    with pytest.raises(InvalidOptionError, match="2 queries but 1 vectors"):
        t.search_many(["a", "b"], vectors=[qs[0]])


def test_companion_builds_index_the_source_vectors(tmp_path: Path) -> None:
    """A companion build over a Delta table with an array<float> column indexes its vectors: the
    search answers from the source's rows; a sync after the source changes follows it."""
    from deltalake import write_deltalake

    x = clustered(3000)
    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    write_deltalake(src, rows(x[:2000]))
    write_deltalake(src, rows(x[2000:], 2000), mode="append")
    opts = {P + "indexing.vector.emb": f"{DIMS},cosine"}
    res = it.build_companion(src, loc, indexing={"body": "text"}, options=opts)
    assert res["rowsIndexed"] == 3000
    t = it.IndexTable(loc)
    ids = np.arange(len(x))
    q = x[321] + 0.05
    got = t.search(vector=q, limit=10, where="sel < 50")
    keep = ids % 100 < 50
    assert _ids(got) == top(exact(x[keep], q), ids[keep], 10)
    assert got.column("emb").to_pylist()[0] == pytest.approx(x[_ids(got)[0]].tolist())
    # the source overwritten with fewer rows: the sync follows, the search with it
    write_deltalake(src, rows(x[:1500]), mode="overwrite")
    it.build_companion(src, loc, indexing={"body": "text"}, options=opts)
    t = it.IndexTable(loc)
    assert _ids(t.search(vector=q, limit=10)) == top(exact(x[:1500], q), ids[:1500], 10)


def test_companion_vector_search_leaves_out_rows_the_source_deleted(tmp_path: Path) -> None:
    """A Delta source whose deletes are deletion vectors: a vector search
    over its companion never returns a deleted row, and ranks the next ones as over the live rows."""
    from delta_dv_writer import DeltaWriter

    x = clustered(3000)
    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    w = DeltaWriter(src)
    first = rows(x[:1000])
    w.create(first.schema)
    paths = [w.add_file(first), w.add_file(rows(x[1000:2000], 1000)), w.add_file(rows(x[2000:], 2000))]
    # indexed in this process (the build above indexes in processes, as by default)
    opts = {P + "indexing.vector.emb": f"{DIMS},cosine", P + "companion.parallelism": "1"}
    it.build_companion(src, loc, format="delta", indexing={"body": "text"}, options=opts)
    ids = np.arange(len(x))
    q = x[321] + 0.05
    nearest = top(exact(x, q), ids, 30)
    gone = nearest[::2]  # every other one of the 30 nearest, by deletion vectors
    w.delete(
        {
            p: [i - 1000 * n for i in gone if i // 1000 == n]
            for n, p in enumerate(paths)
            if any(i // 1000 == n for i in gone)
        }
    )
    res = it.build_companion(src, loc, format="delta", indexing={"body": "text"}, options=opts)
    assert res["filesIndexed"] == 0
    live = np.setdiff1d(ids, gone)
    t = it.IndexTable(loc)
    assert _ids(t.search(vector=q, limit=10)) == top(exact(x[live], q), live, 10)
    assert t.count() == len(live)
    keep = live[live % 100 < 50]
    assert _ids(t.search(vector=q, limit=10, where="sel < 50")) == top(exact(x[keep], q), keep, 10)


def test_a_vector_column_declared_after_splits_were_written(tmp_path: Path) -> None:
    """An append may declare an existing array column a vector (the table records it); the splits
    written before are searched exactly from their rows, MERGE SPLITS gives them a graph; a
    declaration that differs from the table's is refused, and an old row that is no vector of
    the declared dimensions fails the search naming it."""
    from indextables_spark.core.split.format.bundle import read_footer

    x = clustered(3000)
    path = str(tmp_path / "t")
    plain = {P + "indexing.typemap.body": "text"}
    it.write_table(path, rows(x[:1000]), options=plain)
    it.write_table(path, rows(x[1000:2000], 1000), options=plain)
    it.write_table(path, rows(x[2000:], 2000), options=options(metric="l2"))
    t = it.IndexTable(path)
    assert t.snapshot().metadata_action.configuration[P + "indexing.vector.emb"] == f"{DIMS},l2"
    ids = np.arange(len(x))
    q = x[1500] + 0.1
    got = t.search(vector=q, limit=10, where="sel < 70")
    keep = ids % 100 < 70
    assert _ids(got) == top(exact(x[keep], q, "l2"), ids[keep], 10)
    assert any(i < 2000 for i in _ids(got))  # the old splits answer too
    with pytest.raises(InvalidOptionError, match=f"the table declares '{DIMS},l2'"):
        it.write_table(path, rows(x[:10]), mode="append", options=options(metric="cosine"))
    # MERGE SPLITS rewrites them with the index
    t.maintenance.merge_splits()
    files = t.snapshot().files
    assert all("vectors" in read_footer(os.path.join(path, f.path), f.path).raw for f in files)
    assert _ids(t.search(vector=q, limit=10, where="sel < 70")) == _ids(got)
    # an old split whose stored "vector" has other dimensions: the search names the row
    bad = str(tmp_path / "bad")
    odd = rows(x[:5]).set_column(4, "emb", pa.array([[1.0, 2.0]] + [list(v) for v in x[1:5]], pa.list_(pa.float32())))
    it.write_table(
        bad, odd, options={P + "indexing.typemap.body": "text"}
    )  # (the table's typemap: options() repeats it)
    it.write_table(bad, rows(x[5:10], 5), options=options())
    with pytest.raises(SchemaMismatchError, match=f"row 0 of column 'emb' is not a vector of {DIMS}"):
        it.IndexTable(bad).search(vector=x[0])


def test_search_arguments_are_checked(tmp_path: Path) -> None:
    t = _table(tmp_path, clustered(100), splits=1)
    said = t.explain("body:fox", where="sel < 5", vector=[1.0] * DIMS, limit=3, fusion="none").vector_search
    assert said is not None and "the 3 nearest rows by 'emb'" in said and "filters and the query" in said
    for fusion in ("rrf", None):  # (None: the default, rrf)
        said = t.explain("body:fox", vector=[1.0] * DIMS, fusion=fusion).vector_search
        assert said is not None and "rrf (k=60)" in said and "selected first by the query" not in said
    with pytest.raises(InvalidOptionError, match="3 dimensions, column 'emb' 32"):
        t.search(vector=[1.0, 2.0, 3.0])
    with pytest.raises(InvalidOptionError, match="'body' is not a vector column.*'emb'"):
        t.search(vector=[1.0] * DIMS, vector_column="body")
    with pytest.raises(InvalidOptionError, match="fusion combines a full-text query"):
        t.search(vector=[1.0] * DIMS, fusion="rrf")
    with pytest.raises(InvalidOptionError, match="fusion 'max'"):
        t.search("body:fox", vector=[1.0] * DIMS, fusion="max")
    with pytest.raises(InvalidOptionError, match="finite"):
        t.search(vector=[float("nan")] * DIMS)


# ---- Spark (classic, Connect, a standalone cluster): the same answers as without Spark -------------


def _vec_text(q: np.ndarray) -> str:
    return ",".join(str(float(v)) for v in q)


def _no_window(df: Any) -> None:
    """The plan ranks without a Spark Window (a Window without partitionBy makes Spark warn "No
    Partition Defined for Window operation!"): the fusion and the search join rank in Python."""
    if hasattr(df, "_jdf"):  # classic sessions: the executed plan's text
        assert "Window" not in df._jdf.queryExecution().executedPlan().toString()


def _reads(spark: Any, t: it.IndexTable, q: np.ndarray) -> None:
    """Vector and hybrid reads through spark.read, against t.search."""
    path, vec = t.storage.uri, _vec_text(q)

    def reader() -> Any:  # (a DataFrameReader keeps its options: a fresh one per read)
        return spark.read.format("indextables")

    want = t.search(vector=q, limit=8, where="region = 'r1'")
    df = reader().option("vector", vec).option("limit", 8).option("where", "region = 'r1'").load(path)
    rows = df.collect()
    assert [int(r["id"]) for r in rows] == _ids(want)
    assert [r["_distance"] for r in rows] == pytest.approx(want.column("_distance").to_pylist())
    (seen,) = it.explain(df)
    assert "the 8 nearest rows by 'emb' (cosine, 32 dimensions)" in seen["vector_search"]
    fused = t.search("body:quick", vector=q, limit=6, fusion="rrf")
    df = reader().option("vector", f"[{vec}]").option("query", "body:quick").option("fusion", "rrf").option("limit", 6)
    hybrid = df.load(path)
    got = hybrid.collect()
    assert [int(r["id"]) for r in got] == _ids(fused)
    assert [r["_score"] for r in got] == pytest.approx(fused.column("_score").to_pylist(), rel=1e-6)
    assert it.explain(hybrid)[0]["tasks"] == 1  # one task fuses every split's candidates (as t.search)
    _no_window(hybrid)
    weighted = t.search("body:fox", vector=q, limit=5, fusion={"method": "weighted", "text_weight": 0.4})
    df = (
        reader()
        .option("vector", vec)
        .option("query", "body:fox")
        .options(**{"fusion": "weighted", "fusion.textWeight": "0.4", "limit": "5"})
        .load(path)
    )
    assert [int(r["id"]) for r in df.collect()] == _ids(weighted)
    with pytest.raises(Exception, match="3 dimensions, column 'emb' 32"):
        reader().option("vector", "1,2,3").load(path).collect()


def _joins(spark: Any, t: it.IndexTable, x: np.ndarray) -> list[Any]:
    """it.search_join against t.search per query; returns the joined rows."""
    qs = [(i, "body:quick" if i % 2 else None, [float(v) for v in x[i * 7] + 0.05]) for i in range(12)]
    queries = spark.createDataFrame(qs, "qid int, text string, vec array<float>").repartition(3)
    queries.createOrReplaceTempView("qs")
    joined = it.search_join(queries, t.storage.uri, text_col="text", vector_col="vec", k=4, where="sel < 60")
    got = joined.collect()
    _no_window(joined)
    by_query: dict[int, list[Any]] = {}
    for r in got:
        by_query.setdefault(r["qid"], []).append(r)
    for qid, text, vec in qs:
        rows = sorted(by_query[qid], key=lambda r: r["_rank"])
        want = t.search(text, vector=vec, fusion="rrf" if text else None, limit=4, where="sel < 60")
        assert [r["match_id"] for r in rows] == _ids(want)
        assert [r["_rank"] for r in rows] == [1, 2, 3, 4]
        assert all(r["text"] == text for r in rows)
    # de-duplication: the table joined with itself by its own vectors
    own = spark.read.format("indextables").load(t.storage.uri).select("id", "emb").limit(5)
    dup = it.search_join(own, t.storage.uri, vector_col="emb", k=1).collect()
    assert all(r["match_id"] == r["id"] and r["_distance"] < 1e-5 for r in dup) and len(dup) == 5
    with pytest.raises(InvalidOptionError, match="prefix"):
        it.search_join(own.withColumnRenamed("id", "match_id"), t.storage.uri, vector_col="emb")
    return got


@pytest.mark.spark
def test_spark_vector_routes(spark: Any, tmp_path: Path) -> None:
    """Classic session: vector and hybrid reads, the SQL table functions (literal calls read
    distributed, others run as Python UDTFs), it.search_join and its SQL form."""
    it.register(spark)
    x = clustered(3000)
    t = _table(tmp_path, x, splits=3)
    q = x[17] + 0.05
    _reads(spark, t, q)
    path, vec = t.storage.uri, "[" + ", ".join(str(float(v)) for v in q) + "]"
    # a Spark read of the column takes its values from the splits' vectors files (their one copy)
    read = spark.read.format("indextables").load(path).where("id < 5").select("id", "emb").collect()
    assert sorted(r["id"] for r in read) == [0, 1, 2, 3, 4]
    assert all(np.array_equal(np.asarray(r["emb"], np.float32), x[r["id"]]) for r in read)
    want = _ids(t.search(vector=q, limit=6, where="sel < 50"))
    sql = f"SELECT id, _distance FROM indextables_vector_search('{path}', 'emb', '{vec}', 6, 'sel < 50')"
    assert [r["id"] for r in spark.sql(sql).collect()] == want
    udtf = f"SELECT id FROM indextables_vector_search('{path}', lower('EMB'), '{vec}', 6, 'sel < 50')"
    assert [r["id"] for r in spark.sql(udtf).collect()] == want
    fused = _ids(t.search("body:quick", vector=q, limit=5, fusion="rrf"))
    sql = f"SELECT id, _score FROM indextables_hybrid_search('{path}', 'body:quick', 'emb', '{vec}', 5)"
    assert [r["id"] for r in spark.sql(sql).collect()] == fused
    udtf = f"SELECT id FROM indextables_hybrid_search('{path}', 'body:quick', lower('EMB'), '{vec}', 5, 'rrf')"
    assert [r["id"] for r in spark.sql(udtf).collect()] == fused
    got = _joins(spark, t, x)
    sql = f"SELECT * FROM indextables_search_join(TABLE(qs), '{path}', 'text', 'vec', 4, NULL, 'rrf', 'sel < 60')"
    rows = spark.sql(sql).collect()
    assert sorted((r["qid"], r["_rank"], r["match_id"]) for r in rows) == sorted(
        (r["qid"], r["_rank"], r["match_id"]) for r in got
    )


@pytest.mark.spark
def test_streaming_writes_the_vector_index(spark: Any, tmp_path: Path) -> None:
    """A streaming write (micro-batches from a vector table) indexes the vectors of every batch."""
    x = clustered(3000)
    t = _table(tmp_path, x, splits=3)
    sink, ckpt = str(tmp_path / "sink"), str(tmp_path / "ckpt")
    query = (
        spark.readStream.format("indextables")
        .option("maxFilesPerTrigger", "1")
        .load(t.storage.uri)
        .writeStream.format("indextables")
        .option(P + "indexing.vector.emb", f"{DIMS},l2")
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start(sink)
    )
    assert query.awaitTermination(300), "the streaming query did not finish in time"
    assert query.exception() is None
    out = it.IndexTable(sink)
    assert out.snapshot().num_files == 3  # a micro-batch per source split
    ids = np.arange(len(x))
    q = x[2500] + 0.2
    assert _ids(out.search(vector=q, limit=10)) == top(exact(x, q, "l2"), ids, 10)


@pytest.mark.spark
def test_connect_vector_routes(connect_spark: Any, tmp_path: Path) -> None:
    """A Spark Connect client: vector and hybrid reads and it.search_join, as t.search."""
    it.register(connect_spark)
    x = clustered(3000)
    t = _table(tmp_path, x, splits=3)
    _reads(connect_spark, t, x[17] + 0.05)
    _joins(connect_spark, t, x)


@pytest.mark.spark
@pytest.mark.cloud
@pytest.mark.slow
def test_vector_routes_on_the_cluster_from_s3(
    standalone_cluster: Any, s3_uri: str, s3_options: dict[str, str], tmp_path: Path
) -> None:
    """A standalone cluster writes a vector table to S3 (its executors build the vector indexes)
    and answers a vector read, a hybrid read and a search join as IndexTable.search does."""
    from cluster_launch import run_job

    result = run_job("vector", standalone_cluster.master_url, s3_uri, s3_options, tmp_path)
    t = it.IndexTable(s3_uri, {**s3_options, P + "cache.disk.path": str(tmp_path / "cache")})
    assert t.count() == 1200 and t.snapshot().num_files >= 2
    q = result["query"]
    assert result["near"] == _ids(t.search(vector=q, limit=5, where="sel < 50"))
    assert result["hybrid"] == _ids(t.search("body:quick", vector=q, limit=5, fusion="rrf"))
    want = sorted(
        [qid, rank, mid]
        for qid, v in enumerate(result["join_queries"])
        for rank, mid in enumerate(_ids(t.search(vector=v, limit=3)), start=1)
    )
    assert result["join"] == want
