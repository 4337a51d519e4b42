"""Remote splits fetched only as far as a read with pushed filters reads their index files
(core/split/cache/fetch_plan.py's filter_needs, ReadPlan.index_query's IndexRead): every filter
kind, with a query and without, returns what a whole fetch returns (unfetched bytes filled with
0xFF, so a hole read would show), and a selective filter on a big split fetches a small part."""

from __future__ import annotations

import datetime as dt
import json
import os

import numpy as np
import pyarrow as pa
import pytest
from test_split_sparse import TEXT, _docs, _sorted, _table, cold_stats  # noqa: F401 (autouse)

import indextables_spark as it
from indextables_spark.core.split.read.scan import TableScan
from indextables_spark.core.split.read.search import SearchPlan, search_table
from indextables_spark.expr.model import LessThan, Not, Or, StringContains, StringEndsWith, StringStartsWith
from indextables_spark.expr.where import parse_where
from indextables_spark.core.split.cache import sparse
from indextables_spark.core.split.format.bundle import read_footer
from indextables_spark.core.split.format.composite import INDEX_SECTIONS
from indextables_spark.expr.search_query import SearchQuery

ROWS = 6000


def _more(t: pa.Table, seed: int) -> pa.Table:
    """The sparse tests' rows, plus a string column with NULLs, a date and a struct."""
    rng = np.random.default_rng(seed + 100)
    n = t.num_rows
    tags = np.array(["alpha", "beta-x", "gamma", None], dtype=object)[rng.integers(0, 4, size=n)]
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 365, size=n)]
    meta = pa.array(
        [{"a": f"k{int(a)}", "n": int(m)} for a, m in zip(rng.integers(0, 50, size=n), rng.integers(0, 100, size=n))],
        pa.struct([("a", pa.string()), ("n", pa.int64())]),
    )
    return (
        t.append_column("tag", pa.array(tags, pa.string()))
        .append_column("day", pa.array(days))
        .append_column("meta", meta)
    )


@pytest.fixture(scope="module")
def filter_table(s3_module_uri, s3_options):
    """Two splits on S3 (the S3 emulator), written once: the tests only read them, each through
    cache directories of its own (cold_stats keeps their term statistics cold too)."""
    for k in range(2):
        it.write_table(s3_module_uri, _more(_docs(ROWS, k), k), mode="append", options={**s3_options, **TEXT})
    return s3_module_uri, s3_options


WHERES = [
    "views = 5",
    "id = 6123",
    "views IN (5, 17, 9000)",
    "views BETWEEN 100 AND 200",
    "score > 0.995",
    "day >= '2024-03-01' AND day < '2024-03-04'",
    "region = 'us-east'",
    "region IN ('eu-west', 'ap-south')",
    "region > 'eu-west'",
    "tag IS NULL",
    "tag IS NOT NULL AND views < 100",
    StringStartsWith("tag", "bet"),
    StringContains("tag", "amm"),
    StringEndsWith("region", "west"),
    StringStartsWith("title", "spark"),
    StringContains("body", "quasar"),
    "title = 'data lake spark search'",
    "meta.a = 'k3'",
    "meta.n > 97",
    "NOT (views < 9900)",
    "NOT (region = 'us-east') AND views < 50",
    "views = 5 OR tag = 'gamma'",
    Or(LessThan("views", 10), StringContains("title", "tantivy")),
    Not(StringStartsWith("region", "us")),
]


def _read(table, where, query=None, columns=None, limit=None):
    """A Spark-free read (as search/to_arrow) of `where`: a predicate text or a Filter (the
    string matches the predicate grammar lacks, as Spark pushes them)."""
    snap = table.snapshot()
    conjuncts = parse_where(where, snap.schema_json) if isinstance(where, str) else [where]
    scan = TableScan(table.storage, snap, table.options, conditions=conjuncts, query=query, columns=columns)
    return search_table(SearchPlan(scan, scan.live_files()), limit)


@pytest.mark.cloud
@pytest.mark.parametrize("where", WHERES)
def test_filtered_reads_equal_whole_reads(filter_table, tmp_path, monkeypatch, where):
    """Each filter kind on a fresh cache, without a query, with one, and ranked: the rows a whole
    fetch returns; the splits stay partly fetched."""
    monkeypatch.setattr(sparse, "HOLE_FILL", b"\xff")
    uri, options = filter_table
    whole, _ = _table(uri, options, tmp_path / "whole", lazy="false")
    part, storage = _table(uri, options, tmp_path / "part")
    cols = ["id", "views", "region", "tag", "day", "meta"]
    assert _sorted(_read(part, where, columns=cols)).equals(_sorted(_read(whole, where, columns=cols)))
    assert storage.bytes_read["download_file"] == 0
    root = tmp_path / "part"
    dirs = [root / d for d in os.listdir(root) if not d.startswith(".")]
    # (a struct field's condition narrows through the json field too: a query text the index
    # runs besides the filter, for which the split is fetched whole)
    narrowed = isinstance(where, str) and where.startswith("meta.")
    assert dirs and all(os.path.exists(d / sparse.STATE_FILE) != narrowed for d in dirs)  # (id: one pruned)
    for query in ("body:lake", "quasar OR title:tantivy"):
        assert _sorted(_read(part, where, query)).equals(_sorted(_read(whole, where, query))), query
        a, b = _read(whole, where, query, limit=10), _read(part, where, query, limit=10)
        assert a.column("id").to_pylist() == b.column("id").to_pylist()
        assert np.allclose(a.column("_score").to_numpy(), b.column("_score").to_numpy())
    assert all(os.path.exists(d / sparse.STATE_FILE) != narrowed for d in dirs)  # (nothing asked for more)


@pytest.mark.cloud
def test_a_selective_filter_fetches_a_small_part(s3_uri, s3_options, tmp_path, monkeypatch):
    """A cold selective filter on a big split fetches its column's parts and the matching rows,
    a small part of the split; the read that follows on another column adds that column's parts."""
    monkeypatch.setattr(sparse, "HOLE_FILL", b"\xff")
    it.write_table(s3_uri, _more(_docs(30_000, 0), 0), options={**s3_options, **TEXT})
    whole, _ = _table(s3_uri, s3_options, tmp_path / "whole", lazy="false")
    part, storage = _table(s3_uri, s3_options, tmp_path / "part")
    (f,) = part.files()
    for where, bound in (("views = 5", 0.10), ("region = 'us-east' AND id = 123", 0.10)):
        storage.reset()
        got = _sorted(_read(part, where, columns=["id", "title"]))
        assert got.equals(_sorted(_read(whole, where, columns=["id", "title"]))), where
        assert 0 < storage.bytes_read["read_range"] < bound * f.size, (where, storage.bytes_read["read_range"], f.size)
    storage.reset()
    a, b = (
        whole.search("body:quasar", where="views < 3000", limit=10),
        part.search("body:quasar", where="views < 3000", limit=10),
    )
    assert a.column("id").to_pylist() == b.column("id").to_pylist() and b.num_rows == 10
    assert storage.bytes_read["read_range"] < 0.20 * f.size  # (body:quasar's parts, views' whole field)


def test_filter_needs(tmp_path):
    """Each filter column's index fields read whole (sections, positions, norms), its fast columns
    and `__row`; a struct's json field: the fast file whole; a column the index lacks: nothing."""
    uri = str(tmp_path / "t")
    it.write_table(uri, _more(_docs(500, 0), 0), options=TEXT)
    (add,) = it.IndexTable(uri).files()
    path = os.path.join(uri, add.path)
    footer = read_footer(path, path)
    names = footer.raw[INDEX_SECTIONS]["fields"]
    views = names.index("views")
    need = sparse.read_needs(footer, names, sparse.IndexRead(None, ("views", "nowhere")))
    assert need == sparse.Needs(
        frozenset({views}),
        frozenset({views}),
        norms=frozenset({views}),
        columns=frozenset({"__row", "views"}),
    )
    region = [i for i, n in enumerate(names) if n == "region" or n.startswith("region__")]
    need = sparse.read_needs(footer, names, sparse.IndexRead(SearchQuery("body:quasar"), ("`REGION`",)))
    assert need.fields == frozenset(region) and need.norms == frozenset(region) | {names.index("body")}
    assert need.terms == ((names.index("body"), frozenset({b"quasar"})),)
    meta = sparse.read_needs(footer, names, sparse.IndexRead(None, ("meta.a",)))
    assert names.index("meta") in meta.fields and meta.columns is None
    assert sparse.read_needs(footer, names[::-1], sparse.IndexRead(None, ("views",))) is None
    assert sparse.read_needs(footer, names, sparse.IndexRead(SearchQuery("body:("), ("views",))) is None
    # what a directory holds answers the reads it was fetched for
    d = str(tmp_path / "d")
    data = open(path, "rb").read()
    sparse.extract_partial(lambda s, e: data[s:e], footer, d, path, sparse.IndexRead(None, ("views",)))
    assert json.load(open(os.path.join(d, sparse.STATE_FILE)))["missing"]
    assert sparse.satisfies(d, sparse.IndexRead(None, ("views",))) and sparse.satisfies(
        d, SearchQuery("views:[1 TO 5]")
    )
    assert not sparse.satisfies(d, sparse.IndexRead(None, ("title",))) and not sparse.satisfies(d, None)


@pytest.mark.spark
@pytest.mark.cloud
def test_spark_reads_with_pushed_filters_fetch_their_columns(spark, filter_table, tmp_path):
    """A Spark read with a pushed selective filter, with and without a query: the rows a whole
    fetch returns, the splits only partly fetched."""
    uri, options = filter_table
    whole, _ = _table(uri, options, tmp_path / "whole", lazy="false")
    cache = tmp_path / "spark-cache"
    opts = {**options, "spark.indextables.cache.disk.path": str(cache), "spark.indextables.cache.rows.lazy": "true"}
    df = spark.read.format("indextables").options(**opts).load(uri)
    got = sorted(r.id for r in df.filter("views = 5").select("id").collect())
    assert got == sorted(whole.to_arrow(where="views = 5", columns=["id"]).column("id").to_pylist())
    dirs = [d for d in os.listdir(cache) if not d.startswith(".") and os.path.isdir(cache / d)]
    assert len(dirs) == 2 and all(os.path.exists(cache / d / sparse.STATE_FILE) for d in dirs)
    query = "body:lake"
    q = spark.read.format("indextables").options(**opts).option("query", query).load(uri)
    got = sorted(r.id for r in q.filter("views < 300 AND tag = 'gamma'").select("id").collect())
    expect = whole.search(query, where="views < 300 AND tag = 'gamma'", columns=["id"]).column("id").to_pylist()
    assert got == sorted(expect) and got
    assert all(os.path.exists(cache / d / sparse.STATE_FILE) for d in dirs)
