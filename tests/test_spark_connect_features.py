"""The README's Spark features from a Spark Connect client session (a real Connect server started
from the pyspark distribution, tests/spark_servers.py). Every result is checked against the rows
written, computed in Python."""

from __future__ import annotations

import pytest

import indextables_spark as it

pytestmark = pytest.mark.spark

SCHEMA = "id long, region string, views int, body string"
ROWS = [(i, ["eu", "us", "ap"][i % 3], (i * 37) % 100, f"doc {i} word{i % 7} tail{i % 11}") for i in range(240)]


def has(body: str, term: str) -> bool:
    return term in body.split()


def ids(rows) -> list[int]:
    return sorted(r.id for r in rows)


@pytest.fixture(scope="module")
def cs(connect_spark):
    it.register(connect_spark)
    return connect_spark


def test_without_register_reads_and_writes(connect_spark, tmp_path):
    """The data source is found by the server itself (pyspark_indextables): no register needed."""
    it.unregister()
    try:
        spark, path = connect_spark, str(tmp_path / "t")
        (
            spark.createDataFrame(ROWS, SCHEMA)
            .write.format("indextables")
            .mode("append")
            .option("partitionBy", "region")
            .option("spark.indextables.indexing.typemap.body", "text")
            .save(path)
        )
        d = spark.read.format("indextables").load(path)
        assert d.filter("region = 'eu'").count() == sum(1 for r in ROWS if r[1] == "eu")
        assert d.count() == len(ROWS)  # the earlier filter does not leak into this scan
        q = spark.read.format("indextables").option("query", "body:word3").load(path)
        assert ids(q.collect()) == [r[0] for r in ROWS if has(r[3], "word3")]
        with pytest.raises(Exception, match="partitioning"):  # Spark's own refusal: use the option
            spark.createDataFrame(ROWS, SCHEMA).write.format("indextables").partitionBy("region").mode("append").save(
                str(tmp_path / "t2")
            )
    finally:
        it.register(connect_spark)


def test_write_read_filters_time_travel(cs, tmp_path):
    path = str(tmp_path / "t")
    df = cs.createDataFrame(ROWS, SCHEMA)
    df.write.format("indextables").mode("append").partitionBy("region").option(
        "spark.indextables.indexing.typemap.body", "text"
    ).save(path)
    assert it.IndexTable(path).snapshot().partition_columns == ["region"]
    d = cs.read.format("indextables").load(path)
    assert d.columns == ["id", "region", "views", "body"]
    assert sorted(tuple(r) for r in d.collect()) == sorted(ROWS)
    got = d.filter("region = 'us' AND views > 40 AND body like 'doc 1%'").collect()
    assert ids(got) == [r[0] for r in ROWS if r[1] == "us" and r[2] > 40 and r[3].startswith("doc 1")]
    df.limit(10).write.format("indextables").mode("append").save(path)
    assert d.count() == len(ROWS) + 10  # each action reads the latest version
    assert cs.read.format("indextables").option("versionAsOf", 0).load(path).count() == len(ROWS)
    top = cs.read.format("indextables").option("query", "body:word3").option("limit", 4).load(path).collect()
    assert len(top) == 4 and all(has(r.body, "word3") for r in top)
    scores = [r._score for r in top]
    assert scores == sorted(scores, reverse=True)


def test_views_table_functions_commands_aggregate(cs, tmp_path):
    path = str(tmp_path / "t")
    cs.createDataFrame(ROWS, SCHEMA).write.format("indextables").mode("append").option("partitionBy", "region").option(
        "spark.indextables.indexing.typemap.body", "text"
    ).save(path)
    cs.sql(f"CREATE OR REPLACE TEMPORARY VIEW cdocs USING indextables OPTIONS (path '{path}')")
    got = cs.sql("SELECT id FROM cdocs WHERE _indexall = 'body:word2' AND views < 50").collect()
    assert ids(got) == [r[0] for r in ROWS if has(r[3], "word2") and r[2] < 50]
    assert cs.sql("SELECT count(*) AS n FROM cdocs").collect()[0].n == len(ROWS)
    found = cs.sql(f"SELECT id, _score FROM indextables_search('{path}', 'body:tail5', 3)").collect()
    assert len(found) == 3 and all(has(ROWS[r.id][3], "tail5") for r in found)
    n = cs.sql(f"SELECT * FROM indextables_count('{path}', 'body:tail5')").collect()[0][0]
    assert n == sum(1 for r in ROWS if has(r[3], "tail5"))
    state = it.sql(cs, f"CHECKPOINT INDEXTABLES '{path}'").collect()[0]
    assert state.status == "SUCCESS" and state.num_files == it.IndexTable(path).snapshot().num_files
    described = cs.sql(f"DESCRIBE INDEXTABLES STATE '{path}'").collect()[0]
    assert described.format == "avro-state"
    res = it.IndexTable(path, spark=cs).aggregate({"r": {"terms": {"field": "region"}}}, query="body:word1", spark=cs)
    expected = {}
    for r in ROWS:
        if has(r[3], "word1"):
            expected[r[1]] = expected.get(r[1], 0) + 1
    assert {b["key"]: b["doc_count"] for b in res["r"]["buckets"]} == expected
    cs.createDataFrame(ROWS[:3], SCHEMA).write.insertInto("cdocs")
    assert cs.sql("SELECT count(*) AS n FROM cdocs").collect()[0].n == len(ROWS) + 3


def test_merge_on_write_and_streaming(cs, tmp_path):
    path, out = str(tmp_path / "t"), str(tmp_path / "out")
    for chunk in range(3):
        (
            cs.createDataFrame(ROWS[chunk * 80 : (chunk + 1) * 80], SCHEMA)
            .write.format("indextables")
            .mode("append")
            .option("spark.indextables.mergeOnWrite.enabled", "true")
            .option("spark.indextables.mergeOnWrite.async.enabled", "false")
            .option("spark.indextables.mergeOnWrite.targetSize", "100M")
            .option("spark.indextables.mergeOnWrite.minBatchesToTrigger", "1")
            .option("spark.indextables.mergeOnWrite.batchSize", "2")
            .save(path)
        )
    history = [h["operation"] for h in it.IndexTable(path).inspect.history()]
    assert "MERGE SPLITS" in history, history
    assert cs.read.format("indextables").load(path).count() == len(ROWS)
    q = (
        cs.readStream.format("indextables")
        .load(path)
        .writeStream.format("indextables")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start(out)
    )
    assert q.awaitTermination(300), "the streaming query did not finish in time"
    assert sorted(tuple(r) for r in cs.read.format("indextables").load(out).collect()) == sorted(ROWS)


def test_explain_a_dataframe(cs, tmp_path):
    """Over Spark Connect the reads are planned on the server: it.explain(df) has the server plan the
    DataFrame and reads the planning's records with a Spark job (the local server's executors share
    its host); IndexTable(path, spark=...).explain answers the same question from the client."""
    path = str(tmp_path / "t")
    cs.createDataFrame(ROWS, SCHEMA).write.format("indextables").option("partitionBy", "region").option(
        "spark.indextables.indexing.typemap.body", "text"
    ).save(path)
    df = cs.read.format("indextables").option("query", "body:word3").load(path).filter("region = 'eu' AND views > 40")
    explained = it.explain(df)
    assert explained and {e["path"] for e in explained} == {path}  # not other sessions' reads
    assert "views > 40" in explained[-1]["index_answered"]
    assert explained[-1]["splits_after_partition_pruning"] < explained[-1]["splits_total"]
    with pytest.raises(it.IndexTablesError, match="no indextables read"):
        it.explain(cs.range(3))
    table = it.IndexTable(path, spark=cs)
    t = table.explain("body:word3", where="region = 'eu' AND views > 40")
    eu = [f for f in table.files() if f.partition_values["region"] == "eu"]
    assert (t.splits_total, t.splits_after_partition_pruning) == (len(table.files()), len(eu))
    assert len(eu) < len(table.files()) and "views > 40" in t.index_answered
    assert "region = 'eu'" in t.partition_filters and '"word3"' in t.tantivy_query


def test_cache_commands_over_connect(cs, tmp_path):
    """The cache commands run as a Spark job on the server's executors (mapInArrow)."""
    path = str(tmp_path / "t")
    cs.createDataFrame(ROWS, SCHEMA).write.format("indextables").option("partitionBy", "region").save(path)
    pre = it.sql(cs, f"PREWARM INDEXTABLES CACHE '{path}' WHERE region = 'us'").collect()
    us = [f for f in it.IndexTable(path).files() if f.partition_values["region"] == "us"]
    assert len(pre) == 1 and pre[0].splits == len(us) and pre[0].tasks >= 2
    (d,) = cs.sql("DESCRIBE INDEXTABLES DISK CACHE").collect()
    assert d.entries >= len(us) and d.limit > 0 and d.host
    (f,) = it.sql(cs, "FLUSH INDEXTABLES DISK CACHE").collect()
    assert f.entries_removed + f.in_use_kept >= len(us)
