"""One vector-search API on every route (issue #50, item 6): the table's vector column is
`vector_column` (Python keywords, the SQL functions' arguments) / `vectorColumn` (Spark options),
the old `column` names warn (FutureWarning) and still work, both names disagreeing is an error;
and a search with both a full-text query and a vector means the same on every route: reciprocal
rank fusion by default, `fusion="none"` for the query as a row selection (fusion_spec.parse_fusion,
the one parse every route shares)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_vector_search import DIMS, _ids, _table, clustered, exact, top

import indextables_spark as it
from indextables_spark.config.options import Options
from indextables_spark.core.split.read.vector.fusion_spec import Fusion, parse_fusion
from indextables_spark.errors import InvalidOptionError
from indextables_spark.spark.read_options import read_options
from indextables_spark.spark.table_functions import find_calls
from indextables_spark.spark.vector_functions import HYBRID_SEARCH, VECTOR_SEARCH, vector_options
from indextables_spark.util.renamed import renamed

P = "spark.indextables."


def _exact_table(tmp_path: Path, n: int = 1500) -> tuple[it.IndexTable, np.ndarray]:
    x = clustered(n)
    t = _table(tmp_path, x, splits=3)
    return it.IndexTable(t.storage.uri, options={**t.options.values, P + "search.vector.exactBelow": "1000000"}), x


def test_parse_fusion_is_the_one_meaning_of_fusion() -> None:
    assert parse_fusion(None, with_query=True) == Fusion("rrf")  # the default with a query
    assert parse_fusion(None, with_query=False) is None
    for none in ("none", "NONE", {"method": "none"}):
        assert parse_fusion(none, with_query=True) is None
        assert parse_fusion(none, with_query=False) is None
    assert parse_fusion("weighted", with_query=True) == Fusion("weighted")
    assert parse_fusion({"method": "weighted", "text_weight": 0.3}, with_query=True) == Fusion(
        "weighted", text_weight=0.3
    )
    assert parse_fusion({"window": 20}, with_query=True) == Fusion("rrf", window=20)
    typed = it.Fusion("rrf", rrf_k=10)
    assert parse_fusion(typed, with_query=True) is typed
    with pytest.raises(InvalidOptionError, match="search\\(\\): fusion 'max': expected 'rrf', 'weighted' or 'none'"):
        parse_fusion("max", with_query=True)
    with pytest.raises(InvalidOptionError, match="keys: method, rrf_k, text_weight, window"):
        parse_fusion({"method": "rrf", "k": 3}, with_query=True)
    with pytest.raises(InvalidOptionError, match="fusion must be"):
        parse_fusion(3, with_query=True)  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="option fusion: fusion combines a full-text query"):
        parse_fusion("rrf", with_query=False, where="option fusion")


def test_spark_read_options_parse_fusion_the_same_way() -> None:
    def fusion(**opts: str) -> Fusion | None:
        return read_options(Options.of({"vector": "1,2", **opts})).fusion

    assert fusion(query="body:a") == Fusion("rrf")  # the default with a query
    assert fusion(query="body:a", **{"fusion.rrfK": "7", "fusion.window": "30"}) == Fusion("rrf", rrf_k=7, window=30)
    assert fusion(query="body:a", fusion="weighted", **{"fusion.textWeight": "0.2"}) == Fusion(
        "weighted", text_weight=0.2
    )
    assert fusion(query="body:a", fusion="none") is None
    assert fusion() is None
    ro = read_options(Options.of({"vector": "1,2", "query": "body:a", "fusion": "none"}))
    assert not ro.with_score and not ro.hybrid
    assert read_options(Options.of({"vector": "1,2", "query": "body:a"})).with_score
    with pytest.raises(InvalidOptionError, match="option fusion: fusion combines a full-text query"):
        fusion(fusion="rrf")
    with pytest.raises(InvalidOptionError, match="option fusion: fusion 'max'"):
        fusion(query="body:a", fusion="max")


def test_renamed_arguments_warn_and_refuse_a_conflict() -> None:
    assert renamed("f", "new", "a", "old", None) == "a"
    with pytest.warns(FutureWarning, match="f: old is deprecated and will be removed; use new") as seen:
        assert renamed("f", "new", None, "old", "b") == "b"
    assert seen[0].filename == __file__  # the caller's line, not ours
    with pytest.warns(FutureWarning):
        assert renamed("f", "new", "c", "old", "c") == "c"  # the same value twice: no conflict
    with pytest.raises(InvalidOptionError, match="f: old='b' and new='c' disagree.*give new only"):
        renamed("f", "new", "c", "old", "b")


def test_search_defaults_to_rrf_and_none_keeps_the_query_a_selection(tmp_path: Path) -> None:
    """t.search and t.search_many: a query and a vector fuse by rrf unless fusion="none" (the
    k nearest among the query's matches, search()'s default up to 0.2.0)."""
    t, x = _exact_table(tmp_path)
    ids = np.arange(len(x))
    q = x[40] + 0.05
    default = t.search("body:quick", vector=q, limit=8)
    assert default.equals(t.search("body:quick", vector=q, limit=8, fusion="rrf"))
    assert default.equals(t.search("body:quick", vector=q, limit=8, fusion=it.Fusion()))
    assert "_score" in default.schema.names
    selected = t.search("body:quick", vector=q, limit=8, fusion="none")
    quick = ids % 5 == 0  # the rows whose body holds "quick" (test_vector_search._body)
    assert _ids(selected) == top(exact(x[quick], q), ids[quick], 8)
    assert "_score" not in selected.schema.names
    assert _ids(default) != _ids(selected)  # (the two meanings differ on this table)
    weighted = t.search("body:quick", vector=q, limit=8, fusion=it.Fusion("weighted", text_weight=0.3))
    assert weighted.equals(t.search("body:quick", vector=q, limit=8, fusion={"method": "weighted", "text_weight": 0.3}))
    many = t.search_many(["body:quick", None], vectors=[q, q], limit=8)
    assert many[0].equals(default) and many[1].equals(t.search(vector=q, limit=8))
    assert t.search_many(["body:quick"], vectors=[q], limit=8, fusion="none")[0].equals(selected)
    said = t.explain("body:quick", vector=q, limit=8).vector_search
    assert said is not None and "fused with the query's BM25 ranking by rrf" in said
    # a vector alone: nothing to fuse, whatever the default; an explicit fusion needs the query
    assert t.search(vector=q, limit=8, fusion="none").equals(t.search(vector=q, limit=8))
    with pytest.raises(InvalidOptionError, match="fusion combines a full-text query"):
        t.search(vector=q, fusion="weighted")


def test_sql_arguments_name_the_vector_column_and_keep_the_old_name() -> None:
    """The SQL functions' `vector_column` argument (positional: the place `column` had), its old
    name `column =>` (FutureWarning, the same read options), both disagreeing refused; `fusion`
    left out is the read option's default (rrf), vector_search takes it too."""
    vec = "'1.0,2.0'"
    (call,) = find_calls(
        f"SELECT * FROM indextables_vector_search('/p', vector_column => 'emb', vector => {vec}, k => 3)"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert vector_options(call.name, call.args) == {"vector": "1.0,2.0", "limit": "3", "vectorColumn": "emb"}
    (old,) = find_calls(f"SELECT * FROM indextables_vector_search('/p', column => 'emb', vector => {vec}, k => 3)")
    assert old.args["column"] == "emb"
    with pytest.warns(FutureWarning, match="indextables_vector_search: column is deprecated.*use vector_column"):
        assert vector_options(old.name, old.args)["vectorColumn"] == "emb"
    with pytest.raises(InvalidOptionError, match="column='a' and vector_column='b' disagree"):
        vector_options(VECTOR_SEARCH, {"path": "/p", "vector": "1,2", "column": "a", "vector_column": "b"})
    (pos,) = find_calls(f"SELECT * FROM indextables_hybrid_search('/p', 'body:x', 'emb', {vec}, 3)")
    assert pos.args["vector_column"] == "emb"
    assert "fusion" not in vector_options(HYBRID_SEARCH, pos.args)  # the read's default: rrf
    (none,) = find_calls(f"SELECT * FROM indextables_vector_search('/p', 'emb', {vec}, 3, NULL, 'body:x', 'none')")
    assert vector_options(none.name, none.args) == {
        "vector": "1.0,2.0",
        "limit": "3",
        "vectorColumn": "emb",
        "query": "body:x",
        "fusion": "none",
    }


# ---- Spark: the same name and the same default on the Spark routes ------------------------------------


def _sql_ids(spark: Any, statement: str) -> list[int]:
    return [int(r["id"]) for r in spark.sql(statement).collect()]


def _join_ids(df: Any) -> list[int]:
    return [int(r["match_id"]) for r in sorted(df.collect(), key=lambda r: r["_rank"])]


@pytest.mark.spark
def test_spark_routes_share_the_name_and_the_default(spark: Any, tmp_path: Path) -> None:
    """The same table, text and vector: t.search, the Spark read, the SQL functions (literal calls
    and UDTFs) and it.search_join (and its SQL form) answer the same ids in the same order, fused
    by default and with the query as a selection under fusion "none"."""
    it.register(spark)
    t, x = _exact_table(tmp_path)
    path = t.storage.uri
    q = x[40] + 0.05
    vec = ",".join(str(float(v)) for v in q)
    fused = _ids(t.search("body:quick", vector=q, limit=5))
    selected = _ids(t.search("body:quick", vector=q, limit=5, fusion="none"))
    assert fused != selected

    def read(**opts: str) -> Any:
        return spark.read.format("indextables").options(vector=vec, query="body:quick", limit="5", **opts).load(path)

    df = read()
    assert [int(r["id"]) for r in df.collect()] == fused and "_score" in df.columns
    df = read(fusion="none")
    assert [int(r["id"]) for r in df.collect()] == selected and "_score" not in df.columns
    # SQL: literal calls (the read) and a UDTF (a vector_column that is no literal)
    vs = f"indextables_vector_search('{path}', 'emb', '{vec}', 5, NULL, 'body:quick'"
    assert _sql_ids(spark, f"SELECT id FROM {vs})") == fused
    assert _sql_ids(spark, f"SELECT id FROM {vs}, 'none')") == selected
    assert (
        _sql_ids(spark, f"SELECT id FROM indextables_hybrid_search('{path}', 'body:quick', 'emb', '{vec}', 5)") == fused
    )
    udtf = f"indextables_vector_search('{path}', lower('EMB'), '{vec}', 5, NULL, 'body:quick'"
    assert _sql_ids(spark, f"SELECT id, _score FROM {udtf})") == fused
    named = f"SELECT id FROM indextables_vector_search('{path}', column => 'emb', vector => '{vec}', k => 5)"
    with pytest.warns(FutureWarning, match="column is deprecated.*vector_column"):
        assert _sql_ids(spark, named) == _ids(t.search(vector=q, limit=5))
    # it.search_join: vector_column, the old column= (a FutureWarning at this line), the default
    queries = spark.createDataFrame(
        [(1, "body:quick", [float(v) for v in q])], "qid int, text string, vec array<float>"
    )
    cols = {"text_col": "text", "vector_col": "vec", "k": 5}
    assert _join_ids(it.search_join(queries, path, vector_column="emb", **cols)) == fused
    assert _join_ids(it.search_join(queries, path, fusion="none", **cols)) == selected
    with pytest.warns(FutureWarning, match="search_join: column is deprecated.*use vector_column") as seen:
        old = it.search_join(queries, path, column="emb", **cols)
    assert seen[0].filename == __file__
    assert _join_ids(old) == fused
    with pytest.raises(InvalidOptionError, match="column='emb' and vector_column='body' disagree"):
        it.search_join(queries, path, column="emb", vector_column="body", **cols)
    queries.createOrReplaceTempView("vq")
    sql = f"SELECT match_id, _rank FROM indextables_search_join(TABLE(vq), '{path}', 'text', 'vec', 5, 'emb')"
    assert _join_ids(spark.sql(sql)) == fused
    sql = (
        f"SELECT match_id, _rank FROM indextables_search_join(TABLE(vq), '{path}', 'text', 'vec', 5, "
        "vector_column => 'emb', fusion => 'none')"
    )
    assert _join_ids(spark.sql(sql)) == selected
    assert DIMS == len(q)
