"""Smoke suite for every supported pyspark, run on the oldest one (`make smoke-oldest`: pyspark 4.1.x)
and on the main venv's: each route through Spark once, against results computed in Python from
the input rows.

It starts its own local[2] SparkSession (the settings of the `spark` fixture in tests/conftest.py)
and calls `it.register(spark)`. One table is written once (partitioned by region) and read by
every test.
"""

from __future__ import annotations

import collections
import datetime as dt
import re

import pytest

import indextables_spark as it
from search_tables import docs, docs_schema

pytestmark = pytest.mark.spark

N = 600
TERM = "lake"  # body holds "lake" and "lakehouse": only the whole token matches
QUERY = f"body:{TERM}"
WRITE_OPTIONS = {"partitionBy": "region", "spark.indextables.indexing.typemap.body": "text"}


@pytest.fixture(scope="module")
def spark():
    """A local[2] session like tests/conftest.py's `spark` (the workers run this venv's Python).
    Inside the full suite a session may already run: it is reused and left running."""
    from pyspark.sql import SparkSession

    from spark_servers import local_session

    owned = SparkSession.getActiveSession() is None
    session = local_session("indextables-smoke")
    it.register(session)
    yield session
    if owned:
        session.stop()


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    """The input: documents with ints, doubles, dates, timestamps, decimals, text and nulls."""
    return docs(N, seed=41).to_pylist()


@pytest.fixture(scope="module")
def table(spark, rows, tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("smoke") / "docs")
    writer = spark.createDataFrame(rows, docs_schema()).write.format("indextables").mode("append")
    for k, v in WRITE_OPTIONS.items():
        writer = writer.option(k, v)
    writer.save(path)
    return path


def _local_naive(v):
    """pyspark collects a timestamp as a naive datetime in the driver's local time zone."""
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone().replace(tzinfo=None)
    return v


def _by_id(records) -> dict[int, dict]:
    out = {}
    for r in records:
        d = r.asDict() if hasattr(r, "asDict") else dict(r)
        out[d["id"]] = {k: _local_naive(v) for k, v in d.items()}
    return out


def _ids(df) -> list[int]:
    return sorted(r.id for r in df.select("id").collect())


def _tokens(text: str | None) -> set[str]:
    """Tantivy's default tokenizer: split on non-alphanumerics, lower-case."""
    return set(re.findall(r"[^\W_]+", text.lower())) if text else set()


def _matching(rows) -> list[int]:
    return sorted(r["id"] for r in rows if TERM in _tokens(r["body"]))


def test_partitioned_write(table, rows):
    t = it.IndexTable(table)
    snap = t.snapshot()
    assert snap.partition_columns == ["region"]
    files = t.files()
    assert files and {f.partition_values["region"] for f in files} == {r["region"] for r in rows}
    assert all(f"region={f.partition_values['region']}/" in f.path for f in files)
    assert sum(f.num_records for f in files) == len(rows)
    assert t.count() == len(rows)


def test_full_read_equals_input(spark, table, rows):
    df = spark.read.format("indextables").load(table)
    assert sorted(df.columns) == sorted(docs_schema().fieldNames())
    got = df.collect()
    assert len(got) == len(rows) == df.count()
    assert _by_id(got) == _by_id(rows)


def test_pushed_filters_equal_python(spark, table, rows):
    df = spark.read.format("indextables").load(table).filter("region = 'eu' AND views > 10")
    expected = sorted(r["id"] for r in rows if r["region"] == "eu" and r["views"] is not None and r["views"] > 10)
    assert 0 < len(expected) < len(rows)
    got = df.collect()
    assert sorted(r.id for r in got) == expected
    # whole rows, not only the ids
    assert _by_id(got) == {k: v for k, v in _by_id(rows).items() if k in set(expected)}
    # a data filter the index answers alone, and one on the partition column alone
    assert _ids(spark.read.format("indextables").load(table).filter("views > 9000")) == sorted(
        r["id"] for r in rows if r["views"] is not None and r["views"] > 9000
    )
    assert spark.read.format("indextables").load(table).filter("region = 'us'").count() == sum(
        r["region"] == "us" for r in rows
    )


def test_query_option(spark, table, rows):
    expected = _matching(rows)
    assert 0 < len(expected) < len(rows)
    assert _ids(spark.read.format("indextables").option("query", QUERY).load(table)) == expected
    # with a filter on top
    combined = spark.read.format("indextables").option("query", QUERY).load(table).filter("region = 'apac'")
    assert _ids(combined) == sorted(r["id"] for r in rows if r["id"] in set(expected) and r["region"] == "apac")


def test_temporary_view_with_indexall(spark, table, rows):
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW v USING indextables OPTIONS (path '{table}')")
    assert _ids(spark.sql(f"SELECT id FROM v WHERE _indexall = '{QUERY}'")) == _matching(rows)
    assert spark.sql("SELECT count(*) AS n FROM v").collect()[0].n == len(rows)
    eu = spark.sql(f"SELECT id FROM v WHERE _indexall = '{QUERY}' AND region = 'eu'")
    assert _ids(eu) == sorted(r["id"] for r in rows if TERM in _tokens(r["body"]) and r["region"] == "eu")


def test_table_function(spark, table, rows):
    expected = set(_matching(rows))
    top = spark.sql(f"SELECT * FROM indextables_search('{table}', '{QUERY}', 5)").collect()
    assert len(top) == 5
    assert "_score" in top[0].asDict() and set(docs_schema().fieldNames()) <= set(top[0].asDict())
    assert {r.id for r in top} <= expected
    every = spark.sql(f"SELECT id, _score FROM indextables_search('{table}', '{QUERY}')").collect()
    assert sorted(r.id for r in every) == sorted(expected)
    scores = [r._score for r in every]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert [r._score for r in top] == scores[:5]
    # the rows come back whole
    inputs = _by_id(rows)
    assert all({k: v for k, v in r.asDict().items() if k != "_score"} == inputs[r.id] for r in _by_id_rows(top))


def _by_id_rows(rows):
    """Rows with their timestamps as pyspark collects them (naive, local)."""
    from pyspark.sql import Row

    return [Row(**{k: _local_naive(v) for k, v in r.asDict().items()}) for r in rows]


def test_checkpoint_command(spark, table, rows):
    version = it.IndexTable(table).version()
    result = it.sql(spark, f"CHECKPOINT INDEXTABLES '{table}'").collect()
    assert len(result) == 1
    r = result[0]
    assert r.status == "SUCCESS" and r.version == version and r.num_files == len(it.IndexTable(table).files())
    # the table reads the same from its checkpoint
    assert spark.read.format("indextables").load(table).count() == len(rows)


def test_aggregate_terms(spark, table, rows):
    expected = dict(collections.Counter(r["region"] for r in rows))
    res = it.IndexTable(table, spark=spark).aggregate({"r": {"terms": {"field": "region"}}}, spark=spark)
    assert res["doc_count"] == len(rows)
    assert {b["key"]: b["doc_count"] for b in res["r"]["buckets"]} == expected
    # the same as a Spark job (one task per split group) instead of wherever "auto" chose
    on_spark = it.IndexTable(table, spark=spark).aggregate(
        {"r": {"terms": {"field": "region"}}}, spark=spark, execution="spark"
    )
    assert on_spark["doc_count"] == len(rows)
    assert {b["key"]: b["doc_count"] for b in on_spark["r"]["buckets"]} == expected


def test_streaming_available_now(spark, table, rows, tmp_path):
    sink, ckpt = str(tmp_path / "sink"), str(tmp_path / "ckpt")
    q = (
        spark.readStream.format("indextables")
        .load(table)
        .writeStream.format("indextables")
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start(sink)
    )
    q.awaitTermination(120)
    assert q.exception() is None
    got = spark.read.format("indextables").load(sink).collect()
    assert len(got) == len(rows)
    assert _by_id(got) == _by_id(rows)
    # a restart with nothing new adds nothing
    v = it.IndexTable(sink).version()
    q2 = (
        spark.readStream.format("indextables")
        .load(table)
        .writeStream.format("indextables")
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start(sink)
    )
    q2.awaitTermination(120)
    assert q2.exception() is None and it.IndexTable(sink).version() == v
