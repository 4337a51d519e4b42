"""`indexing.indexonlyfields` (IndexTables4Spark's index-only columns, #27): indexed, left out of
the row store; reads return NULL, filters on them are answered by the index alone (exactly, or
refused naming the filter), in the Spark-free API, DELETE, MERGE SPLITS and Spark (classic and
Connect), as the reference's IndexingConfigurationTest "index-only fields configuration"."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.errors import InvalidOptionError
from indextables_spark.core.split.aggregate.agg_request import AggregationError
from indextables_spark.core.split.format.bundle import read_footer
from indextables_spark.expr.values import UnsupportedFilterError

P = "spark.indextables."
INDEX_ONLY = {P + "indexing.indexonlyfields": "searchField,n,body", P + "indexing.typemap.body": "text"}


def rows() -> pa.Table:
    return pa.table(
        {
            "id": ["doc1", "doc2", "doc3", "doc4"],
            "searchField": ["searchable", "findable", None, "searchable"],
            "displayField": ["visible content", "more visible content", "x", "y"],
            "n": pa.array([1, 2, 3, None], pa.int64()),
            "body": ["the quick fox", "lazy dog", "fox again", None],
        }
    )


def table(tmp_path, options=INDEX_ONLY, name="t") -> it.IndexTable:
    path = str(tmp_path / name)
    it.write_table(path, rows(), options=options)
    return it.IndexTable(path)


def ids(t: it.IndexTable, where: str | None = None, query: str | None = None) -> list[str]:
    if query is not None:
        return sorted(t.search(query, columns=["id"], where=where).column("id").to_pylist())
    return sorted(t.to_arrow(where=where, columns=["id"]).column("id").to_pylist())


def test_index_only_columns_read_null_and_stay_out_of_the_row_store(tmp_path):
    t = table(tmp_path)
    out = t.to_arrow().sort_by("id")
    assert out.schema.names == ["id", "searchField", "displayField", "n", "body"]
    assert out.column("displayField").to_pylist() == ["visible content", "more visible content", "x", "y"]
    for c in ("searchField", "n", "body"):
        assert out.column(c).null_count == 4, c
    (add,) = t.snapshot().files
    split = os.path.join(t.path, add.path)
    with open(split, "rb") as fh:
        footer = read_footer(fh, os.path.getsize(split))
    import pyarrow.ipc as ipc

    with open(split, "rb") as fh:
        fh.seek(footer.rows.offset)
        stored = ipc.open_file(pa.BufferReader(fh.read(footer.rows.length))).schema.names
    assert stored == ["id", "displayField"]
    mapping = {
        d["column"]: d for d in __import__("json").loads(t.snapshot().doc_mapping(add.doc_mapping_ref)) if "column" in d
    }
    assert mapping["n"].get("indexOnly") is True and "indexOnly" not in mapping["id"]


def test_filters_on_index_only_columns_are_answered_by_the_index(tmp_path):
    t = table(tmp_path)
    assert ids(t, "searchField = 'searchable'") == ["doc1", "doc4"]
    assert ids(t, "searchField IN ('findable', 'nothing')") == ["doc2"]
    assert ids(t, "searchField IS NULL") == ["doc3"]
    assert ids(t, "n >= 2") == ["doc2", "doc3"]
    assert ids(t, "n IS NULL") == ["doc4"]
    assert ids(t, "n BETWEEN 1 AND 2 AND displayField = 'visible content'") == ["doc1"]
    assert ids(t, "searchField = 'searchable' OR n = 2") == ["doc1", "doc2", "doc4"]
    # full-text queries reach the index-only text column, and combine with its filters
    assert ids(t, query="body:fox") == ["doc1", "doc3"]
    assert ids(t, "n > 1", query="body:fox") == ["doc3"]
    assert t.count("searchField:searchable") == 2
    # the index's answer is exact: what a table that stores the columns returns
    full = table(tmp_path, {P + "indexing.typemap.body": "text"}, "full")
    assert ids(t, "NOT searchField = 'searchable'") == ["doc2"]  # NULL rows stay out, as in SQL
    for where in (
        "searchField = 'searchable'",
        "n >= 2",
        "searchField IS NOT NULL AND n < 3",
        "NOT searchField = 'searchable'",
        "NOT n IN (1, 3)",
        "NOT searchField = 'findable' AND NOT n = 1",
    ):
        assert ids(t, where) == ids(full, where), where


def test_filters_the_index_answers_only_approximately_are_refused(tmp_path):
    t = table(tmp_path)
    for where, column in (
        ("body = 'lazy dog'", "body"),
        ("searchField > 'f'", "searchField"),
        ("NOT body = 'x'", "body"),
    ):
        with pytest.raises(UnsupportedFilterError, match=rf"on index-only column '{column}'.*reads as NULL"):
            t.to_arrow(where=where)
    with pytest.raises(InvalidOptionError, match="keep no text to cut snippets"):
        t.search("body:fox", snippets=["body"])


def test_aggregations_from_fast_fields_only(tmp_path):
    t = table(tmp_path)
    assert t.aggregate({"s": {"sum": {"field": "n"}}})["s"]["value"] == 6
    assert {
        b["key"]: b["doc_count"] for b in t.aggregate({"t": {"terms": {"field": "searchField"}}})["t"]["buckets"]
    } == {
        "searchable": 2,
        "findable": 1,
    }
    with pytest.raises(AggregationError, match="'n' is index-only.*computed from the rows"):
        t.aggregate({"c": {"cardinality": {"field": "n"}}})


def test_options_are_checked(tmp_path):
    with pytest.raises(InvalidOptionError, match="both index-only.*and stored-only"):
        table(tmp_path, {P + "indexing.indexonlyfields": "n", P + "indexing.storeonlyfields": "n"}, "a")
    with pytest.raises(InvalidOptionError, match="indexing.indexonlyfields names 'nope'"):
        table(tmp_path, {P + "indexing.indexonlyfields": "nope"}, "b")
    path = str(tmp_path / "p")
    with pytest.raises(InvalidOptionError, match="'searchField' is a partition column"):
        it.write_table(
            path, rows(), partition_by=["searchField"], options={P + "indexing.indexonlyfields": "searchField"}
        )
    # fixed at creation: an append may leave the option out, not change it
    t = table(tmp_path, {P + "indexing.indexonlyfields": "n"}, "c")
    it.write_table(t.path, rows())
    assert ids(t, "n = 1") == ["doc1", "doc1"]
    with pytest.raises(InvalidOptionError, match="indexonlyfields names .*searchfield.*created with .'n'."):
        it.write_table(t.path, rows(), options={P + "indexing.indexonlyfields": "searchField"})


def test_delete_matches_index_only_columns_through_the_index(tmp_path):
    t = table(tmp_path)
    t.delete("searchField = 'searchable' AND n = 1")
    assert ids(t) == ["doc2", "doc3", "doc4"]
    with pytest.raises(Exception, match="index-only columns"):
        t.delete("searchField = 'findable'", kind="equality")
    t.delete("n IN (2, 3)")
    assert ids(t) == ["doc4"]


def test_merge_leaves_splits_with_index_only_columns(tmp_path):
    t = table(tmp_path)
    it.write_table(t.path, rows())
    r = t.maintenance.merge_splits()
    assert r.status == "NO_ACTION" and r.splits_index_only == 2 and r.merge_groups == 0
    assert ids(t, "searchField = 'findable'") == ["doc2", "doc2"]


# ---- Spark -----------------------------------------------------------------------------------------


def _reference_case(session, path: str) -> None:
    """The reference's IndexingConfigurationTest "index-only fields configuration", unchanged."""
    data = session.createDataFrame(
        [("doc1", "searchable", "visible content"), ("doc2", "findable", "more visible content")]
    ).toDF("id", "searchField", "displayField")
    (
        data.write.format("indextables")
        .mode("overwrite")
        .option("spark.indextables.indexing.indexonlyfields", "searchField")
        .save(path)
    )
    df = session.read.format("indextables").load(path)
    results = df.filter(df["searchField"] == "searchable").collect()
    assert len(results) == 1
    assert results[0][2] == "visible content" and results[0][1] is None


def test_spark_reads_the_reference_way(spark, tmp_path):
    path = str(tmp_path / "spark")
    _reference_case(spark, path)
    df = spark.read.format("indextables").load(path)
    assert sorted(r.id for r in df.filter("searchField IN ('findable', 'x')").collect()) == ["doc2"]
    assert sorted(r.id for r in df.where("searchField IS NULL").collect()) == []
    assert sorted(r.id for r in df.filter(df["searchField"] != "searchable").collect()) == ["doc2"]
    # a self-join's two scans with different index-only filters cannot share one read
    a, b = (
        df.filter(df["searchField"] == "searchable").alias("a"),
        df.filter(df["searchField"] == "findable").alias("b"),
    )
    with pytest.raises(Exception, match="index-only"):
        a.crossJoin(b).collect()
    assert sorted(r.id for r in df.filter(df["searchField"].endswith("able")).collect()) == ["doc1", "doc2"]
    with pytest.raises(Exception, match="index-only column 'searchField'.*only approximately"):
        df.filter(df["searchField"] > "f").collect()


def test_spark_unguarded_read_refuses_index_only_filters(spark, unregistered, tmp_path):
    path = str(tmp_path / "u")
    it.write_table(path, rows(), options=INDEX_ONLY)
    df = unregistered.read.format("indextables").load(path)
    assert df.count() == 4
    with pytest.raises(Exception, match="index-only column 'searchfield'.*guarded read"):
        df.filter(df["searchField"] == "searchable").collect()


def test_connect_reads_the_reference_way(connect_spark, tmp_path):
    # (the server's reads are guarded once a client registered; this test must not depend on an
    # earlier one having done it: the tiers run the Connect tests in another order)
    it.register(connect_spark)
    _reference_case(connect_spark, str(tmp_path / "connect"))


def test_sql_routes_agree_with_spark_over_the_rows(spark, tmp_path):
    """Filters on index-only columns are the index's; aggregates over them see the rows' NULL,
    on the index aggregate route as on the scan route (the answer Spark computes itself)."""
    path = str(tmp_path / "sql")
    it.write_table(path, rows(), options=INDEX_ONLY)
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW index_only_v USING indextables OPTIONS (path '{path}')")
    cases = {
        "SELECT count(*) FROM index_only_v WHERE searchField = 'searchable'": [(2,)],
        "SELECT sum(n), count(n), count(*) FROM index_only_v": [(None, 0, 4)],
        "SELECT searchField, count(*) FROM index_only_v GROUP BY searchField": [(None, 4)],
        "SELECT count(*) FROM index_only_v WHERE n > 1": [(2,)],
        "SELECT id, n FROM index_only_v WHERE searchField = 'searchable' ORDER BY id": [("doc1", None), ("doc4", None)],
    }
    for sql, expected in cases.items():
        assert [tuple(r) for r in spark.sql(sql).collect()] == expected, sql
