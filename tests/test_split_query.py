"""Full-text queries on splits: phrases, boolean operators, fields, ranges, scoring, errors."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

import indextables_spark as it
import pytest

from indextables_spark.errors import IndexTablesError, QueryParseError
from indextables_spark.config.options import Options
from indextables_spark.core.split.write.builder import SplitWriter
from indextables_spark.core.split.cache.cache import get_cache
from indextables_spark.expr.model import EqualTo, GreaterThan, StringContains
from indextables_spark.core.split.read.reader import SplitReader
from indextables_spark.core.split.read.search import count_matches
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.storage.local import LocalStorage
from indextables_spark.expr.search_query import SearchQuery


def field(name, t):
    return {"name": name, "type": t, "nullable": True, "metadata": {}}


SCHEMA = {
    "type": "struct",
    "fields": [
        field("id", "long"),
        field("title", "string"),
        field("body", "string"),
        field("tag", "string"),
        field("year", "integer"),
        field("score", "double"),
        field("flag", "boolean"),
        field("attrs", {"type": "struct", "fields": [field("user", "string"), field("n", "long")]}),
        field("labels", {"type": "array", "elementType": "string", "containsNull": True}),
    ],
}
OPTIONS = Options.of({"indexing.typemap.body": "text", "indexing.typemap.title": "text_and_string"})
BODIES = [
    "apache spark sql engine",
    "tantivy search library",
    "spark streaming with kafka",
    "the quick brown fox",
    "Search engines index text",
    None,
]


def make_rows(n=300):
    return [
        {
            "id": i,
            "title": f"Title {i % 10}",
            "body": BODIES[i % len(BODIES)],
            "tag": ["red", "green", "Blue"][i % 3],
            "year": 2000 + i % 25,
            "score": i / 10,
            "flag": i % 2 == 0,
            "attrs": {"user": ["bob", "alice"][i % 2], "n": i},
            "labels": [["x", "y"], ["z"], []][i % 3],
        }
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("q")
    storage = LocalStorage(str(root / "t"))
    rows = make_rows()
    t = pa.Table.from_pylist(rows, schema=arrow_schema(SCHEMA))
    w = SplitWriter(storage, SCHEMA, [], OPTIONS, target_split_bytes=10_000)
    w.write_batch(t)
    adds = w.finish()
    assert len(adds) > 1
    opts = Options.of({"cache.disk.path": str(root / "cache")})
    cache = get_cache(opts)
    readers = [SplitReader(cache.local_dir(storage, a)) for a in adds]
    return rows, readers, storage, adds, opts


def ids(readers, query, filters=None):
    out = []
    for r in readers:
        for b in r.read(filters or [], SearchQuery.of(query), ["id"], 64):
            out.extend(b.column("id").to_pylist())
    return sorted(out)


def want(rows, pred):
    return sorted(r["id"] for r in rows if pred(r))


def body_has(r, *words):
    return r["body"] is not None and all(w in r["body"].lower().split() for w in words)


@pytest.mark.parametrize(
    "query, pred",
    [
        ("body:spark", lambda r: body_has(r, "spark")),
        ('body:"spark sql"', lambda r: r["body"] is not None and "spark sql" in r["body"]),
        ('body:"sql spark"', lambda r: False),
        ("body:spark AND body:engine", lambda r: body_has(r, "spark", "engine")),
        ("body:spark OR body:tantivy", lambda r: body_has(r, "spark") or body_has(r, "tantivy")),
        # Tantivy's parser: "a AND NOT b" is a pure-negative sub-query (matches nothing); use "-b" or "a NOT b".
        ("body:spark AND -body:kafka", lambda r: body_has(r, "spark") and not body_has(r, "kafka")),
        ("body:spark NOT body:kafka", lambda r: body_has(r, "spark") and not body_has(r, "kafka")),
        ("+body:search -body:tantivy", lambda r: body_has(r, "search") and not body_has(r, "tantivy")),
        ("search", lambda r: body_has(r, "search")),  # default field: tokenized text
        ("SEARCH", lambda r: body_has(r, "search")),  # default tokenizer lower-cases
        ("title:title AND title:3", lambda r: r["id"] % 10 == 3),
        ('title__exact:"Title 3"', lambda r: r["id"] % 10 == 3),
        ("tag:Blue", lambda r: r["tag"] == "Blue"),  # raw field: exact, case-sensitive
        ("tag:blue", lambda r: False),
        ("year:2010", lambda r: r["year"] == 2010),
        ("year:[2010 TO 2012]", lambda r: 2010 <= r["year"] <= 2012),
        ("year:{2010 TO 2012}", lambda r: 2010 < r["year"] < 2012),
        ("year:>=2023", lambda r: r["year"] >= 2023),
        ("score:[1.5 TO 2.5]", lambda r: 1.5 <= r["score"] <= 2.5),
        ("flag:true AND year:2001", lambda r: r["flag"] and r["year"] == 2001),
        ("year: IN [2001 2003]", lambda r: r["year"] in (2001, 2003)),
        ("attrs.user:bob", lambda r: r["attrs"]["user"] == "bob"),
        ("labels:z", lambda r: "z" in r["labels"]),
        ("body:quick AND year:[2000 TO 2005]", lambda r: body_has(r, "quick") and r["year"] <= 2005),
    ],
)
def test_queries(env, query, pred):
    rows, readers, *_ = env
    expected = want(rows, pred)
    assert ids(readers, query) == expected
    assert sum(r.count(query=SearchQuery.of(query)) for r in readers) == len(expected)


def test_query_and_filters_combine(env):
    rows, readers, *_ = env
    got = ids(readers, "body:spark", [GreaterThan("year", 2020)])
    assert got == want(rows, lambda r: body_has(r, "spark") and r["year"] > 2020)
    got = ids(readers, "body:spark", [StringContains("body", "kafka")])
    assert got == want(rows, lambda r: body_has(r, "spark") and "kafka" in r["body"])
    assert sum(r.count([EqualTo("tag", "red")], SearchQuery("body:fox")) for r in readers) == len(
        want(rows, lambda r: r["tag"] == "red" and body_has(r, "fox"))
    )


@pytest.mark.parametrize(
    "query, match",
    [
        ("body:(spark AND", r"body:\(spark AND"),
        ('body:"unclosed', "unclosed"),
        ("nosuchfield:x", "nosuchfield"),
        ("year:abc", "year:abc"),
    ],
)
def test_invalid_query_names_the_query(env, query, match):
    _, readers, *_ = env
    with pytest.raises(QueryParseError, match=match) as e:
        readers[0].read(query=SearchQuery(query))  # raised at the call, not at first iteration
    assert query in str(e.value) and isinstance(e.value, IndexTablesError)
    with pytest.raises(QueryParseError):
        readers[0].count(query=SearchQuery(query))


def test_search_scored(env):
    rows, readers, *_ = env
    r = readers[0]
    top = r.search_scored(SearchQuery("body:spark OR body:sql"), 5, columns=["id", "body"])
    assert top.column_names == ["id", "body", "_score"] and top.num_rows == 5
    scores = top.column("_score").to_pylist()
    assert scores == sorted(scores, reverse=True)
    # "apache spark sql engine" has both words: it ranks first
    assert top.column("body")[0].as_py() == "apache spark sql engine"
    assert r.search_scored(SearchQuery("body:nothingmatches"), 5).num_rows == 0
    assert r.search_scored(SearchQuery("body:spark"), 0).num_rows == 0
    # every match, best first, and the ids are those of the matching rows of this split
    every = r.search_scored(SearchQuery("body:spark"), None, columns=["id"])
    ids = [i for b in r.read(query=SearchQuery("body:spark"), columns=["id"]) for i in b.column(0).to_pylist()]
    assert sorted(every.column("id").to_pylist()) == ids


def test_search_scored_with_filters_keeps_the_ranking_and_is_exact(env):
    rows, readers, *_ = env
    for r in readers:
        plain = r.search_scored(
            SearchQuery("body:spark OR body:sql"), None, columns=["id", "tag", "year", "score", "body"]
        )
        # an exact narrowing (string equality) and an inexact one (substring on a text column)
        for filters in ([EqualTo("tag", "red")], [StringContains("body", "eng"), GreaterThan("year", 2010)]):
            from indextables_spark.expr.arrow_eval import arrow_mask

            want = plain.filter(arrow_mask(plain, filters))
            for limit in (1, 3, None):
                got = r.search_scored(
                    SearchQuery("body:spark OR body:sql"), limit, filters, ["id", "tag", "year", "score"]
                )
                assert got.column_names == ["id", "tag", "year", "score", "_score"]
                n = want.num_rows if limit is None else min(limit, want.num_rows)
                assert got.num_rows == n
                # same scores as without the filters (they narrow with score 0), same order
                assert got.column("_score").to_pylist() == want.column("_score").to_pylist()[:n]


def test_snippets(env):
    _, readers, *_ = env
    r = readers[0]
    values = pa.array(["apache spark sql engine", "no match here", None])
    assert r.snippets(SearchQuery("body:spark"), "body", values).to_pylist() == [
        "apache <b>spark</b> sql engine",
        None,
        None,
    ]
    with pytest.raises(IndexTablesError, match="year"):
        r.snippets(SearchQuery("body:spark"), "year", pa.array([1]))


def test_count_matches_over_files(env, tmp_path):
    """count_matches counts a table version's splits (the scan plans the query for them)."""
    rows, *_ = env
    path = str(tmp_path / "table")
    it.write_table(path, pa.Table.from_pylist(rows, schema=arrow_schema(SCHEMA)), options=dict(OPTIONS.values))
    table = it.IndexTable(path, {"cache.disk.path": str(tmp_path / "cache")})
    snap = table.snapshot()
    storage, adds, opts = table.storage, snap.files, table.options
    assert count_matches(storage, snap, adds, SearchQuery("body:spark"), opts) == len(
        want(rows, lambda r: body_has(r, "spark"))
    )
    assert count_matches(storage, snap, adds, None, opts) == len(rows)
    assert count_matches(storage, snap, [], SearchQuery("body:spark"), opts) == 0
    with pytest.raises(QueryParseError):
        count_matches(storage, snap, adds, SearchQuery("body:("), opts)


def test_query_on_table_without_text_columns(tmp_path):
    storage = LocalStorage(str(tmp_path / "t"))
    sch = {"type": "struct", "fields": [field("k", "string"), field("d", "date")]}
    w = SplitWriter(storage, sch, [], Options())
    w.write_batch(pa.record_batch({"k": ["a b", "c"], "d": pa.array([dt.date(2024, 1, 1), None], pa.date32())}))
    (a,) = w.finish()
    r = SplitReader(get_cache({"cache.disk.path": str(tmp_path / "c")}).local_dir(storage, a))
    assert r.default_fields() == ["k"]  # raw string fields when no tokenized text exists
    assert [b.to_pylist() for b in r.read(query=SearchQuery('"a b"'))] == [[{"k": "a b", "d": dt.date(2024, 1, 1)}]]
    assert r.count(query=SearchQuery("k:c")) == 1
