"""The `columns` read option (#26, first criterion): a read declares only the named columns, so
Spark receives only those (its Python Data Source API gives no column pruning); an empty list
declares none, for counts. Checked against Spark over the same rows, classic and Connect, with and
without `register`, in SQL views and streams."""

from __future__ import annotations

import pytest

import indextables_spark as it

pytestmark = pytest.mark.spark

SCHEMA = "id long, region string, views int, body string"
ROWS = [(i, ("eu", "us", "ap")[i % 3], i * 7 % 100, f"word{i % 5} common text{i}") for i in range(60)]


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("columns") / "t")
    (
        spark.createDataFrame(ROWS, SCHEMA)
        .write.format("indextables")
        .option("partitionBy", "region")
        .option("spark.indextables.indexing.typemap.body", "text")
        .save(path)
    )
    return path


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def _reference(spark):
    return spark.createDataFrame(ROWS, SCHEMA)


def test_declared_columns_only(spark, table) -> None:
    df = spark.read.format("indextables").option("columns", "views,id,region").load(table)
    assert df.columns == ["views", "id", "region"]  # the listed order; the virtual columns dropped
    assert _rows(df) == _rows(_reference(spark).select("views", "id", "region"))
    cond = "views > 40 AND region = 'eu'"
    assert _rows(df.filter(cond)) == _rows(_reference(spark).filter(cond).select("views", "id", "region"))


def test_no_columns_for_counts(spark, table) -> None:
    df = spark.read.format("indextables").option("columns", "").load(table)
    assert df.columns == []
    assert df.count() == len(ROWS)
    q = spark.read.format("indextables").option("columns", "").option("query", "body:word3").load(table)
    assert q.count() == sum(1 for r in ROWS if "word3" in r[3].split())


def test_score_and_errors(spark, table) -> None:
    df = (
        spark.read.format("indextables")
        .option("columns", "id,_score")
        .option("query", "body:word2")
        .option("limit", 3)
        .load(table)
    )
    got = df.collect()
    assert df.columns == ["id", "_score"] and len(got) == 3 and all(r["id"] % 5 == 2 for r in got)
    with pytest.raises(Exception, match=r"\['nope'\] are not columns of the table"):
        spark.read.format("indextables").option("columns", "id,nope").load(table)
    with pytest.raises(Exception, match="needs option 'query'"):
        spark.read.format("indextables").option("columns", "id,_score").load(table)
    # a filter on a column the read does not declare: Spark names it
    with pytest.raises(Exception, match="views"):
        spark.read.format("indextables").option("columns", "id").load(table).filter("views > 3").collect()


def test_sql_view_options(spark, table) -> None:
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW cols_v USING indextables OPTIONS (path '{table}', columns 'id,views')")
    got = spark.sql("SELECT id, views FROM cols_v WHERE views < 20 AND _indexall = 'body:word1'").collect()
    want = [(r[0], r[2]) for r in ROWS if r[2] < 20 and "word1" in r[3].split()]
    assert sorted((r["id"], r["views"]) for r in got) == sorted(want)
    assert [f.name for f in spark.table("cols_v").schema.fields] == ["id", "views", "_indexall"]


def test_stream_with_columns(spark, table, tmp_path) -> None:
    out = tmp_path / "sink"
    q = (
        spark.readStream.format("indextables")
        .option("columns", "id,region")
        .load(table)
        .writeStream.format("parquet")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start(str(out))
    )
    assert q.awaitTermination(300), "the streaming query did not finish in time"
    got = spark.read.parquet(str(out))
    assert got.columns == ["id", "region"]
    assert _rows(got) == _rows(_reference(spark).select("id", "region"))


def test_without_register(unregistered, table) -> None:
    spark = unregistered
    df = spark.read.format("indextables").option("columns", "id,body").load(table)
    assert [c for c in df.columns if not c.startswith("_")] == ["id", "body"]
    assert _rows(df.select("id", "body")) == _rows(_reference(spark).select("id", "body"))
    assert spark.read.format("indextables").option("columns", "").load(table).count() == len(ROWS)


def test_over_spark_connect(connect_spark, table) -> None:
    spark = connect_spark
    it.register(spark)
    df = spark.read.format("indextables").option("columns", "id,views").load(table)
    assert df.columns == ["id", "views"]
    assert sorted((r["id"], r["views"]) for r in df.filter("views >= 50").collect()) == sorted(
        (r[0], r[2]) for r in ROWS if r[2] >= 50
    )
    assert spark.read.format("indextables").option("columns", "").load(table).count() == len(ROWS)


def test_search_table_function_takes_columns(spark, table) -> None:
    """`indextables_search(path, query, limit, snippet_fields, columns)`: the distributed route of
    spark.sql and the UDTF's own search give the same columns."""
    from indextables_spark.spark.table_functions import search_table

    got = spark.sql(f"SELECT * FROM indextables_search('{table}', 'body:word4', 4, NULL, 'id,region')")
    assert got.columns == ["id", "region", "_score"]
    rows = got.collect()
    assert len(rows) == 4 and all(r["id"] % 5 == 4 for r in rows)  # every match scores the same: any 4
    udtf = search_table(table, "body:word4", 4, {}, None, "id,region")
    assert udtf.column_names == ["id", "region", "_score"] and udtf.num_rows == 4


def test_snippets_without_scores(spark, table) -> None:
    """`snippetFields` without a ranking: every match gets its snippet (they were NULL before),
    also when `columns` does not declare the snippet's field."""
    want = sorted(r[0] for r in ROWS if "word3" in r[3].split())
    for cols in (None, "id,_snippet"):
        reader = spark.read.format("indextables").option("query", "body:word3").option("snippetFields", "body")
        if cols is not None:
            reader = reader.option("columns", cols)
        got = reader.load(table).collect()
        assert sorted(r["id"] for r in got) == want
        assert all(r["_snippet"] and "<b>word3</b>" in r["_snippet"] for r in got), cols
