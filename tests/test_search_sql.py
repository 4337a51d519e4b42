"""Every full-text query route through Spark, relevance top n, and text filters vs Spark itself."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as sf

import indextables_spark as it
from search_tables import DOCS_OPTIONS, docs, docs_schema, write_table

pytestmark = pytest.mark.spark

N = 2500
QUERY = "body:spark OR body:lake"


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("sql") / "t")
    data = docs(N)
    write_table(path, data, docs_schema(), DOCS_OPTIONS)
    assert len(it.IndexTable(path).files()) >= 8
    mem = spark.createDataFrame(data.to_pylist(), docs_schema())
    return path, mem


def ids(df) -> list[int]:
    return sorted(r.id for r in df.select("id").collect())


def test_every_sql_query_route(spark, table):
    path, mem = table
    matching = ids(spark.read.format("indextables").option("query", QUERY).load(path))
    assert 0 < len(matching) < N

    # 1. a view + the `_indexall` pseudo-column (with a score column on request)
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW docs_v USING indextables OPTIONS (path '{path}', withScore 'true')")
    assert ids(spark.sql(f"SELECT id FROM docs_v WHERE _indexall = '{QUERY}'")) == matching
    with_filter = spark.sql(f"SELECT id FROM docs_v WHERE _indexall = '{QUERY}' AND tag = 'docs' AND views > 10")
    assert ids(with_filter) == ids(
        spark.read.format("indextables").option("query", QUERY).load(path).filter("tag = 'docs' AND views > 10")
    )
    top_view = spark.sql(f"SELECT id, _score FROM docs_v WHERE _indexall = '{QUERY}' ORDER BY _score DESC LIMIT 5")
    # a view twice in one query: each reference gets its own relation (Spark 4.3 would run the
    # filters pushed last for both scans)
    joined = spark.sql("SELECT a.id FROM docs_v a JOIN docs_v b ON a.id = b.id + 1 WHERE a.id < 300 AND b.tag = 'docs'")
    want = (
        mem.alias("a")
        .join(mem.alias("b"), sf.col("a.id") == sf.col("b.id") + 1)
        .where("a.id < 300 AND b.tag = 'docs'")
        .select("a.id")
    )
    assert ids(joined) == ids(want) and ids(want)
    union = spark.sql(
        "SELECT id FROM docs_v WHERE id < 5 UNION ALL SELECT docs_v.id FROM docs_v WHERE _indexall = 'body:quasar'"
    )
    assert ids(union) == sorted(
        list(range(5)) + ids(spark.read.format("indextables").option("query", "body:quasar").load(path))
    )
    # `FROM view WITH (...)` would be ignored by Spark: refused with a pointer to _indexall
    with pytest.raises(it.IndexTablesError, match="_indexall"):
        spark.sql(f"SELECT * FROM docs_v WITH ('query'='{QUERY}')")
    # a top n cannot live in a view (later filters would land above the limit)
    with pytest.raises(it.IndexTablesError, match="ORDER BY _score DESC LIMIT"):
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW docs_bad USING indextables OPTIONS (path '{path}', limit '3')")

    # 2. the table function, rewritten by spark.sql into a distributed read (one task per split group)
    sql_top = spark.sql(f"SELECT id, _score FROM indextables_search('{path}', '{QUERY}', 5)")
    assert sql_top.rdd.getNumPartitions() >= 1
    plan = sql_top._jdf.queryExecution().executedPlan().toString()
    assert "BatchScan indextables" in plan and "TakeOrderedAndProject" in plan
    every = spark.sql(f"SELECT id, _score FROM indextables_search('{path}', '{QUERY}')")
    assert ids(every) == matching
    ranked = [r._score for r in every.collect()]
    assert ranked == sorted(ranked, reverse=True)  # best first
    assert [r._score for r in sql_top.collect()] == ranked[:5]
    assert [r._score for r in top_view.collect()] == ranked[:5]

    # 3. the same names as Python UDTFs when the arguments are not literals (one task, same answer)
    udtf_top = spark.sql(f"SELECT id, _score FROM indextables_search(concat('{path}', ''), '{QUERY}', 5)")
    assert "BatchScan indextables" not in udtf_top._jdf.queryExecution().executedPlan().toString()
    assert [r._score for r in udtf_top.collect()] == ranked[:5]
    assert spark.sql(f"SELECT * FROM indextables_count('{path}', '{QUERY}')").collect()[0][0] == len(matching)
    assert spark.sql(f"SELECT * FROM indextables_count(concat('{path}', ''))").collect()[0][0] == N
    # a literal inside a string or a comment is not a call
    assert (
        spark.sql("SELECT 'indextables_search(''x'', ''y'')' AS s -- indextables_count('z')").collect()[0].s
        == "indextables_search('x', 'y')"
    )


def test_invalid_query_fails_before_any_task(spark, table):
    """The driver checks the query against the splits' doc mappings: load() refuses a bad `query`
    option, planning refuses a bad `_indexall` query; both name the query and the position."""
    from pyspark.errors import AnalysisException

    path, _ = table
    with pytest.raises(AnalysisException) as e:
        spark.read.format("indextables").option("query", "body:(spark AND").load(path)
    assert "invalid query 'body:(spark AND' at position 12 ('AND' has no term after it)" in str(e.value)
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW docs_q USING indextables OPTIONS (path '{path}')")
    # a statement planned for the index checks its query when spark.sql plans it
    with pytest.raises(it.QueryParseError) as e:
        spark.sql("SELECT count(*) FROM docs_q WHERE _indexall = 'nosuch:x'")
    assert "invalid query 'nosuch:x' at position 0 (unknown field 'nosuch')" in str(e.value)
    # a DataFrame filter is checked when Spark plans the read
    with pytest.raises(AnalysisException) as e:
        spark.read.format("indextables").load(path).filter(it.indexqueryall("nosuch:x")).count()
    assert "invalid query 'nosuch:x' at position 0 (unknown field 'nosuch')" in str(e.value)
    assert "read partitions" in str(e.value)  # planning, not a failed task


def test_relevance_options_give_the_global_top_n(spark, table):
    path, _ = table
    reader = spark.read.format("indextables").option("query", QUERY)
    every = reader.option("orderBy", "_score").load(path)
    assert every.columns[-1] == "_score" and "_indexall" not in every.columns
    ranked = [r._score for r in every.collect()]
    assert ranked == sorted(ranked, reverse=True)
    top = (
        spark.read.format("indextables")
        .option("query", QUERY)
        .option("limit", 10)
        .option("snippetFields", "body")
        .load(path)
        .collect()
    )
    assert [r._score for r in top] == ranked[:10]
    assert all("<b>" in r._snippet and r._snippet.replace("<b>", "").replace("</b>", "") in r.body for r in top)
    # filters after orderBy are pushed below the sort: the top n of the filtered matches
    filtered = (
        spark.read.format("indextables")
        .option("query", QUERY)
        .option("orderBy", "_score")
        .load(path)
        .filter("views > 5000 AND body like '%lake%'")
        .limit(4)
    )
    want = every.filter("views > 5000 AND body like '%lake%'")
    assert [r._score for r in filtered.collect()] == [r._score for r in want.collect()][:4]
    # several snippet fields → a map
    two = (
        spark.read.format("indextables")
        .option("query", "body:spark OR title:title")
        .option("limit", 3)
        .option("snippetFields", "body,title")
        .load(path)
    )
    assert dict(two.schema["_snippet"].dataType.jsonValue())["type"] == "map"
    assert all(r._snippet for r in two.collect())
    with pytest.raises(Exception, match="orderBy"):
        spark.read.format("indextables").option("query", QUERY).option("orderBy", "views").load(path).collect()


TEXT_FILTERS = [
    "body like '%spark%'",
    "body like '%Spark%'",
    "body like '%park s%'",
    "body like 'spark%'",
    "body like '%lake'",
    "body like '%SQL-engine%'",
    "body like '%engine lake%'",
    "body like '%quasar%'",
    "body = 'spark'",
    "body in ('spark', 'lake data')",
    "body like '%a%'",
    "body like '% %'",
    "body like 'quasar%' or body like '%quasar'",
    "not (body like '%spark%')",
    "body like '%%'",
    "title like '%title 1%'",
    "title = 'title 7'",
    "title like 'title 4%'",
]


def test_text_filters_equal_spark(spark, table):
    path, mem = table
    ours = spark.read.format("indextables").load(path)
    # Spark's own evaluation of every filter in one job over the in-memory copy
    flags = mem.select(
        "id", *[sf.coalesce(sf.expr(e), sf.lit(False)).alias(f"f{i}") for i, e in enumerate(TEXT_FILTERS)]
    ).collect()
    for i, expr in enumerate(TEXT_FILTERS):
        want = sorted(r.id for r in flags if r[f"f{i}"])
        assert ids(ours.filter(expr)) == want, expr  # pushed down: narrowed by the index, re-checked
    # with a full-text query too
    q = spark.read.format("indextables").option("query", "body:data").load(path)
    assert ids(q.filter("body like '%lake%'")) == ids(
        mem.filter("body rlike '(?i)\\\\bdata\\\\b' AND body like '%lake%'")
    )
    assert ids(ours.filter(sf.col("body").contains("quasar") & sf.col("body").startswith("q"))) == ids(
        mem.filter(sf.col("body").contains("quasar") & sf.col("body").startswith("q"))
    )
