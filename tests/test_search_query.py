"""One query value (expr/search_query.py's SearchQuery): a read's full-text query is built and
checked once where the read is planned, analysed once per doc mapping of the splits it touches,
carried (pickled) to every split, and only its `tantivy_query` calls Tantivy's query parser."""

from __future__ import annotations

import os
import pickle
import re

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.core.split.read import query_parsing
from indextables_spark.core.split.read import reader as reader_mod
from indextables_spark.core.split.read.search import count_split
from indextables_spark.errors import QueryParseError
from indextables_spark.expr import search_query
from indextables_spark.expr.search_query import SearchQuery

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "indextables_spark")
OPTIONS = {"indexing.typemap.body": "text", "write.chunkRows": "50", "write.parallelism": "1"}


def rows(n: int = 200, start: int = 0) -> pa.Table:
    words = ["alpha", "beta", "gamma", "delta"]
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "body": [f"{words[i % 4]} row{i}" for i in ids]})


@pytest.fixture
def table(tmp_path) -> it.IndexTable:
    path = str(tmp_path / "t")
    it.write_table(path, rows(), options=OPTIONS)
    t = it.IndexTable(path, {"cache.disk.path": str(tmp_path / "cache")})
    assert len(t.files()) >= 4  # several splits of one doc mapping
    return t


class Counts:
    """How often a query text is analysed, and how often Tantivy's parser builds a query."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.analysed: list[str] = []
        self.parsed: list[str] = []
        analysed, parse = search_query._analysed, search_query._parse

        def counted_analysed(fields, text):
            self.analysed.append(text)
            return analysed(fields, text)

        def counted_parse(index, specs, fq, text):
            self.parsed.append(fq.text)
            return parse(index, specs, fq, text)

        monkeypatch.setattr(search_query, "_analysed", counted_analysed)
        monkeypatch.setattr(search_query, "_parse", counted_parse)
        search_query.forget_built()


def test_a_search_of_many_splits_analyses_its_text_once(table, monkeypatch):
    counts = Counts(monkeypatch)
    got = table.search("body:alpha", columns=["id"])
    assert sorted(got.column("id").to_pylist()) == [i for i in range(200) if i % 4 == 0]
    assert counts.analysed == ["body:alpha"]  # one doc mapping: one analysis, for every split
    # Tantivy's parser: once on the doc mapping's empty index (the check), once for its splits
    assert counts.parsed == ["body:alpha", "body:alpha"]
    table.search("body:alpha", columns=["id"])  # a new read: a new value, analysed again, built queries kept
    assert counts.analysed == ["body:alpha"] * 2 and len(counts.parsed) == 2


def test_a_ranked_search_builds_boosted_queries_from_one_analysis(table, monkeypatch):
    counts = Counts(monkeypatch)
    top = table.search("body:alpha OR body:row7", limit=5)
    assert top.num_rows == 5 and top.column("id").to_pylist()[0] == 7
    assert counts.analysed == ["body:alpha OR body:row7"]  # corpus statistics and boosts use it too


def test_a_spark_free_count_analyses_once(table, monkeypatch):
    counts = Counts(monkeypatch)
    assert table.count("body:beta") == 50
    assert counts.analysed == ["body:beta"]
    assert table.count(SearchQuery("body:beta AND body:row5")) == 1  # the value is accepted as well


def test_bad_query_fails_before_a_split_opens(table, monkeypatch):
    def opened(*args, **kwargs):
        raise AssertionError("a split was opened")

    monkeypatch.setattr(reader_mod, "handles", opened)
    monkeypatch.setattr(query_parsing, "handles", opened)
    for run in (
        lambda: table.search("body:(alpha"),
        lambda: table.search("body:(alpha", limit=3),
        lambda: table.count("body:(alpha"),
        lambda: table.to_batches("body:(alpha").read_all(),
        lambda: table.aggregate({"n": {"value_count": {"field": "id"}}}, query="body:(alpha"),
        lambda: table.delete(query="body:(alpha"),
    ):
        with pytest.raises(QueryParseError) as e:
            run()
        assert e.value.query == "body:(alpha" and "searchable fields" in str(e.value)


def test_the_value_pickles_with_its_analyses(table, monkeypatch):
    snap = table.snapshot()
    value = query_parsing.plan_query(snap, table.options, SearchQuery("body:gamma"), snap.files, every=True)
    back = pickle.loads(pickle.dumps(value))
    assert back == value and back is not value and back.text == "body:gamma"
    assert back._mappings.keys() == value._mappings.keys() and back._mappings

    # an executor runs it without analysing the text again
    def refused(fields, text):
        raise AssertionError(f"analysed {text!r} again")

    monkeypatch.setattr(search_query, "_analysed", refused)
    from indextables_spark.api.aggregate import aggregation_plan

    plan = pickle.loads(pickle.dumps(aggregation_plan(table.storage, snap, table.options, back)))
    assert sum(count_split(table.storage, plan, f, snap.deletes_for(f)) for f in snap.files) == 50


def test_mixed_doc_mappings_get_one_analysis_each(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    it.write_table(path, rows(100), options=OPTIONS)
    more = rows(100, 100).append_column("tag", pa.array(["x" if i % 2 else "y" for i in range(100)]))
    it.write_table(path, more, options={**OPTIONS, "mergeSchema": "true"})
    t = it.IndexTable(path, {"cache.disk.path": str(tmp_path / "cache")})
    assert len({f.doc_mapping_ref for f in t.files()}) == 2
    counts = Counts(monkeypatch)
    assert t.count("body:alpha") == 50
    assert counts.analysed == ["body:alpha", "body:alpha"]  # one per doc mapping, whatever the splits
    # a query one mapping cannot parse: refused for a read of every split (every=True) ...
    with pytest.raises(QueryParseError, match="tag:x"):
        t.search("tag:x")
    # ... and accepted where one mapping parses it (a Spark read's load(): every=False)
    snap = t.snapshot()
    value = query_parsing.plan_query(snap, t.options, SearchQuery("tag:x"))
    assert len(value._checked) == 2 and sum(v is None for v in value._checked.values()) == 1


def test_struct_field_narrowing_is_part_of_the_value(tmp_path, monkeypatch):
    user = pa.struct([("name", pa.string()), ("age", pa.int64())])
    data = pa.table(
        {
            "id": list(range(8)),
            "body": ["alpha beta" if i % 2 else "gamma" for i in range(8)],
            "user": pa.array([{"name": "ann" if i < 4 else "bob", "age": i} for i in range(8)], user),
        }
    )
    path = str(tmp_path / "t")
    it.write_table(path, data, options={"indexing.typemap.body": "text"})
    t = it.IndexTable(path)
    plan = t._search_plan("body:alpha", "user.name = 'ann'", ["id"], None, None)
    value = plan.scan.read.query
    assert value is not None and value.text == "body:alpha" and value.narrowing == ("user.name:ann",)
    snap = t.snapshot()
    query_parsing.plan_query(snap, t.options, value, snap.files, every=True)
    (analysis,) = value._mappings.values()
    assert analysis.scored is not None and analysis.scored.text == "body:alpha"  # scores: the text alone
    assert analysis.rows is not None and analysis.rows.text == "(body:alpha) AND (user.name:ann)"
    assert sorted(t.search("body:alpha", where="user.name = 'ann'", columns=["id"]).column("id").to_pylist()) == [1, 3]
    # a narrowing alone (no text) is a value too; with neither there is none
    assert SearchQuery.of(None, ["user.name:ann"]) == SearchQuery(None, ("user.name:ann",))
    assert SearchQuery.of(None) is None and SearchQuery.of(value, value.narrowing) is value
    # a user's value keeps its own narrowing; a read's narrowing joins it
    assert SearchQuery.of(value) is value
    assert SearchQuery.of(value, ["user.age:5"]).narrowing == ("user.name:ann", "user.age:5")
    mine = SearchQuery("body:alpha", ("user.name:ann",))
    assert t.search(mine, where="user.age > 1", columns=["id"]).column("id").to_pylist() == [3]
    # search_many takes the value too (the API edge takes `str | SearchQuery` everywhere)
    (many, text) = t.search_many([mine, "body:alpha"], where="user.age > 1", columns=["id"])
    assert many.column("id").to_pylist() == [3] and sorted(text.column("id").to_pylist()) == [3, 5, 7]


def test_only_the_value_calls_tantivys_query_parser():
    callers = []
    for root, _dirs, files in os.walk(SRC):
        for name in files:
            if name.endswith(".py"):
                p = os.path.join(root, name)
                with open(p, encoding="utf-8") as f:
                    if re.search(r"\b(?:index|tantivy)\.parse_query\(", f.read()):
                        callers.append(os.path.relpath(p, SRC))
    assert callers == [os.path.join("expr", "search_query.py")]


def test_the_value_is_exported_lazily():
    assert it.SearchQuery is SearchQuery and "SearchQuery" in it.__all__
