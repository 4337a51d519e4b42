"""The routes `spark.sql` takes for statements on indextables tables (after register), EXPLAIN and
it.explain, misuse errors, the DataFrame search helpers, in classic and Spark Connect sessions."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import functions as sf

import indextables_spark as it
from search_tables import write_table

pytestmark = pytest.mark.spark

N = 300


def _schema():
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType(
        [
            StructField("id", LongType()),
            StructField("body", StringType()),
            StructField("tag", StringType()),
            StructField("big", LongType()),
            StructField("region", StringType()),
        ]
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("routes") / "t")
    rows = pa.table(
        {
            "id": pa.array(range(N), pa.int64()),
            "body": [("kestrel " if i % 3 == 0 else "") + f"word{i % 7} lake" for i in range(N)],
            "tag": [["news", "blog", None][i % 3] for i in range(N)],
            "big": pa.array([2**62 if i % 50 == 0 else i for i in range(N)], pa.int64()),
            "region": [["eu", "us"][i % 2] for i in range(N)],
        }
    )
    opts = {"partitionBy": "region", "spark.indextables.indexing.typemap.body": "text"}
    write_table(path, rows, _schema(), opts, batch_rows=50)
    return path, rows


def _view(session, path, name="rdocs"):
    session.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} USING indextables OPTIONS (path '{path}')")


def test_routes_and_explain(spark, table):
    path, rows = table
    _view(spark, path)
    df = spark.sql("SELECT id FROM rdocs WHERE body TEXTSEARCH 'kestrel' AND tag FIELDMATCH 'news'")
    assert sorted(r.id for r in df.collect()) == [i for i in range(N) if i % 3 == 0]
    info = it.explain(df)
    assert info[0]["route"] == "scan"
    assert info[0]["scans"][0]["columns"] == ["id"]
    assert info[0]["scans"][0]["query"] == "body:(kestrel) AND tag:(news)"
    assert any(path in str(rec.get("path")) for rec in info[1:])  # the read's own planning record follows

    agg = spark.sql(
        "SELECT region, count(*) AS c FROM rdocs WHERE body TEXTSEARCH 'kestrel' GROUP BY region ORDER BY c"
    )
    assert [tuple(r) for r in agg.collect()] == [("eu", 50), ("us", 50)]
    assert it.explain(agg)[0]["route"] == "index aggregate"

    text = spark.sql("EXPLAIN SELECT count(*) FROM rdocs WHERE indexqueryall('lake')").collect()[0][0]
    assert text.startswith("indextables route: index aggregate")
    assert "== Physical Plan ==" in text
    text = spark.sql("EXPLAIN SELECT upper(tag) FROM rdocs WHERE body TEXTSEARCH 'word1'").collect()[0][0]
    assert "indextables route: scan" in text and "reads tag" in text and "index query: body:(word1)" in text


def test_statements_spark_must_answer(spark, table):
    path, rows = table
    _view(spark, path)
    # an integer SUM outside the long range: Spark's own answer (ANSI: an overflow error)
    spark_sum = spark.sql("SELECT sum(big) FROM rdocs")
    with pytest.raises(Exception, match="(?i)overflow"):
        spark_sum.collect()
    assert "outside the long range" in " ".join(it.explain(spark_sum)[0]["notes"])
    # sums whose f64 accumulation could round are computed from the rows, exactly
    exact = spark.sql("SELECT region, sum(big) AS s FROM rdocs WHERE id BETWEEN 1 AND 60 GROUP BY region")
    want = {}
    for i, b, r in zip(rows["id"].to_pylist(), rows["big"].to_pylist(), rows["region"].to_pylist()):
        if 1 <= i <= 60:
            want[r] = want.get(r, 0) + b
    assert {r.region: r.s for r in exact.collect()} == want and want["eu"] > 2**62
    assert it.explain(exact)[0]["route"] == "index aggregate"


@pytest.mark.parametrize(
    "statement, message",
    [
        ("SELECT id FROM rdocs WHERE tag TEXTSEARCH 'news'", "cannot use TEXTSEARCH on column 'tag'"),
        ("SELECT id FROM rdocs WHERE body FIELDMATCH 'lake'", "cannot use FIELDMATCH on column 'body'"),
        ("SELECT id FROM rdocs WHERE body TEXTSEARCH 'lake' OR id = 3", "only AND can join"),
        ("SELECT id FROM rdocs WHERE body TEXTSEARCH 'lake AND'", "invalid query"),
        ("SELECT id FROM rdocs WHERE region TEXTSEARCH 'eu'", "partition column"),
    ],
)
def test_misuse_fails_at_sql_time(spark, table, statement, message):
    _view(spark, table[0])
    with pytest.raises(it.QueryParseError, match=message):
        spark.sql(statement)


def test_other_statements_unchanged(spark, table):
    spark.createDataFrame([(1, "a")], "id long, s string").createOrReplaceTempView("plain_mem")
    df = spark.sql("SELECT s FROM plain_mem WHERE id = 1")
    assert [r.s for r in df.collect()] == ["a"]
    from indextables_spark.spark.sql_routes import route_of

    assert route_of(df) is None


def _helpers(session, path):
    df = session.read.format("indextables").load(path)
    a, b = it.textsearch("body", "kestrel"), it.fieldmatch("tag", "news")
    kestrel = set(range(0, N, 3))
    news = set(range(0, N, 3))  # tag 'news' on the same rows
    lake_word1 = {i for i in range(N) if i % 7 == 1}
    assert {r.id for r in df.filter(a).select("id").collect()} == kestrel
    assert {r.id for r in df.filter(a & b).select("id").collect()} == kestrel & news
    w1 = it.indexquery("body", "word1")
    assert {r.id for r in df.filter(a | w1).select("id").collect()} == kestrel | lake_word1
    assert {r.id for r in df.filter(~a).select("id").collect()} == set(range(N)) - kestrel
    assert {r.id for r in df.filter(a & (sf.col("id") < 30)).select("id").collect()} == {i for i in kestrel if i < 30}
    assert df.filter(it.indexqueryall("kestrel")).count() == len(kestrel)
    assert df.filter(a).columns == df.columns  # `_indexall` stays hidden
    with pytest.raises(it.SearchOperatorError, match="OR a condition that is not a search"):
        a | (sf.col("id") < 3)
    with pytest.raises(it.SearchOperatorError, match="OR a condition that is not a search"):
        (sf.col("id") < 3) | a
    with pytest.raises(Exception, match="cannot use TEXTSEARCH on column 'tag'"):
        df.filter(it.textsearch("tag", "news")).count()


def test_dataframe_helpers_classic(spark, table):
    _helpers(spark, table[0])


def test_connect_routes_and_helpers(connect_spark, table):
    path, _ = table
    it.register(connect_spark)
    _helpers(connect_spark, path)
    _view(connect_spark, path, "crdocs")
    df = connect_spark.sql("SELECT region, count(*) AS c FROM crdocs WHERE body TEXTSEARCH 'kestrel' GROUP BY region")
    assert sorted(tuple(r) for r in df.collect()) == [("eu", 50), ("us", 50)]
    assert it.explain(df)[0]["route"] == "index aggregate"
    ids = connect_spark.sql("SELECT id FROM crdocs WHERE body TEXTSEARCH 'kestrel' AND id < 10").collect()
    assert sorted(r.id for r in ids) == [0, 3, 6, 9]
    with pytest.raises(it.QueryParseError, match="cannot use FIELDMATCH"):
        connect_spark.sql("SELECT id FROM crdocs WHERE body FIELDMATCH 'x'")
