"""Deletes and Bloom filters through Spark: reads after DELETE equal Spark's own filtering of the
original data (batch, full-text, streaming), and Bloom-skipped reads return the right rows."""

from __future__ import annotations

import pytest

import indextables_spark as it

pytestmark = pytest.mark.spark

REGIONS = ["eu", "us", "ap", None]
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel".split()


def _source(spark, n: int = 600):
    rows = [
        (
            i,
            f"u-{i * 7919 % 100003:06d}",
            " ".join(WORDS[(i * k) % 8] for k in (1, 3, 5)),
            None if i % 13 == 0 else (i * 37) % 1000,
            REGIONS[i % 4],
            f"2024-01-0{1 + i % 3}",
        )
        for i in range(n)
    ]
    return spark.createDataFrame(rows, "id long, uid string, body string, views long, region string, day string")


def _rows(df):
    return sorted(tuple(r) for r in df.select("id", "uid", "body", "views", "region", "day").collect())


def _kept(df, predicate: str):
    """Spark's own DELETE semantics on the original data: keep rows where the predicate is not TRUE."""
    return df.filter(f"NOT coalesce({predicate}, false)")


def test_deletes_and_bloom_filters_through_spark(spark, tmp_path):
    path = str(tmp_path / "t")
    src = _source(spark)
    (
        src.repartition(3)
        .write.format("indextables")
        .mode("append")
        .partitionBy("day")
        .option("spark.indextables.indexing.typemap.body", "text")
        .option("spark.indextables.indexing.bloomfilter.columns", "uid")
        .option("spark.indextables.indexing.primaryKey", "id")
        .save(path)
    )
    read = lambda: spark.read.format("indextables").load(path)  # noqa: E731
    t = it.IndexTable(path)
    assert t.snapshot().stats_files["bloomfilter"]

    # SQL DELETE with a predicate mixing a partition column, NULLs and OR
    p1 = "(day = '2024-01-02' AND views < 400) OR region IS NULL"
    res = it.sql(spark, f"DELETE FROM INDEXTABLES '{path}' WHERE {p1}").collect()[0]
    expected = _kept(src, p1)
    assert res.status == "SUCCESS" and res.kind == "POSITIONAL" and res.deleted_rows == src.count() - expected.count()
    assert _rows(read()) == _rows(expected)
    assert read().count() == expected.count() == t.count()

    # key delete (declared primary key: no split is read), full-text delete, equality delete
    t.delete("id IN (1, 2, 3, 598)")
    t.delete(query="body:hotel")
    t.delete("region = 'us' AND views = 37", kind="equality")
    expected = (
        expected.filter("id NOT IN (1, 2, 3, 598)")
        .filter("NOT array_contains(split(body, ' '), 'hotel')")
        .filter("NOT coalesce(region = 'us' AND views = 37, false)")
    )
    assert _rows(read()) == _rows(expected)
    assert _rows(read().filter("_indexall = 'body:alpha'")) == _rows(expected.filter("body like '%alpha%'"))
    assert read().filter("views > 500").count() == expected.filter("views > 500").count()

    # a selective EqualTo on the Bloom column: the right rows, whether the split is skipped or read
    some = expected.orderBy("id").collect()[5]
    assert _rows(read().filter(f"uid = '{some.uid}'")) == [
        tuple(some[c] for c in ("id", "uid", "body", "views", "region", "day"))
    ]
    deleted_uid = src.filter("id = 2").collect()[0].uid
    assert read().filter(f"uid = '{deleted_uid}'").count() == 0

    # after a merge the same rows, no delete logs left on the merged splits
    t.maintenance.merge_splits(spark=spark)
    assert _rows(read()) == _rows(expected)
    snap = t.snapshot()
    assert all(not snap.deletes_for(f) for f in snap.files)

    # a stream starting now sees the table without the deleted rows; a later delete fails it
    sink, ckpt = str(tmp_path / "sink"), str(tmp_path / "ckpt")

    def run_stream(**opts):
        reader = spark.readStream.format("indextables")
        for k, v in opts.items():
            reader = reader.option(k, v)
        q = (
            reader.load(path)
            .writeStream.format("indextables")
            .option("checkpointLocation", ckpt)
            .trigger(availableNow=True)
            .start(sink)
        )
        q.awaitTermination(120)  # raises the query's failure

    run_stream()
    assert _rows(spark.read.format("indextables").load(sink)) == _rows(expected)
    t.delete("id = 10")
    with pytest.raises(Exception, match=f"version {t.version()} deleted rows"):
        run_stream()
    run_stream(ignoreDeletes="true")
    assert _rows(spark.read.format("indextables").load(sink)) == _rows(expected)  # the emitted row stays
