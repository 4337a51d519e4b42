"""Structured Streaming: the change-feed source and the exactly-once sink, on a local SparkSession."""

from __future__ import annotations

import os
import re
import time

import pytest

import indextables_spark as it

pytestmark = pytest.mark.spark


def _append(spark, path, ids, **opts):
    w = spark.createDataFrame([(i, f"doc {i}") for i in ids], "id long, body string").write.format("indextables")
    for k, v in opts.items():
        w = w.option(k, v)
    w.mode("append").save(path)


def _run_available_now(spark, src_opts, path, sink_path, checkpoint):
    reader = spark.readStream.format("indextables")
    for k, v in src_opts.items():
        reader = reader.option(k, v)
    q = (
        reader.load(path)
        .writeStream.format("indextables")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(sink_path)
    )
    assert q.awaitTermination(300), "the streaming query did not finish in time"
    if q.exception():
        raise q.exception()
    return q


def _memory_rows(spark, df, name):
    """The rows of a stream run to its end (availableNow) into a memory sink named `name`."""
    q = df.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    assert q.awaitTermination(300), "the streaming query did not finish in time"
    assert q.exception() is None
    return spark.table(name).collect()


def _ids(spark, path):
    return sorted(r.id for r in spark.read.format("indextables").load(path).collect())


def test_source_snapshot_then_changes_and_restart(spark, tmp_path):
    src, sink, ckpt = str(tmp_path / "src"), str(tmp_path / "sink"), str(tmp_path / "ckpt")
    _append(spark, src, range(0, 10))
    _append(spark, src, range(10, 20))
    q = _run_available_now(spark, {}, src, sink, ckpt)
    assert _ids(spark, sink) == list(range(20))
    assert q.lastProgress is not None
    # one sink version per micro-batch, recorded with its batch id
    hist = it.IndexTable(sink).inspect.history()
    assert all(h["operation"] in ("STREAMING UPDATE", "CREATE TABLE") for h in hist)
    # new data after the restart: only the new rows arrive
    _append(spark, src, range(20, 25))
    _run_available_now(spark, {}, src, sink, ckpt)
    assert _ids(spark, sink) == list(range(25))
    # nothing new: a restart adds nothing
    v = it.IndexTable(sink).version()
    _run_available_now(spark, {}, src, sink, ckpt)
    assert it.IndexTable(sink).version() == v


def test_source_from_empty_table_and_starting_version(spark, tmp_path):
    src, sink, ckpt = str(tmp_path / "src"), str(tmp_path / "sink"), str(tmp_path / "ckpt")
    spark.createDataFrame([], "id long, body string").write.format("indextables").mode("append").save(src)
    _append(spark, src, [1, 2])
    _append(spark, src, [3])
    # startingVersion=2: only the changes committed at version 2 and later
    _run_available_now(spark, {"startingVersion": "2"}, src, sink, ckpt)
    assert _ids(spark, sink) == [3]


def test_max_files_per_trigger_makes_several_batches(spark, tmp_path):
    src, sink, ckpt = str(tmp_path / "src"), str(tmp_path / "sink"), str(tmp_path / "ckpt")
    for i in range(4):
        _append(spark, src, [i])
    q = _run_available_now(spark, {"maxFilesPerTrigger": "1"}, src, sink, ckpt)
    assert _ids(spark, sink) == [0, 1, 2, 3]
    batches = [p for p in q.recentProgress if p["numInputRows"] > 0]
    assert len(batches) == 4
    assert all(p["numInputRows"] == 1 for p in batches)


def test_deletes_fail_the_stream_unless_ignored(spark, tmp_path):
    src, sink = str(tmp_path / "src"), str(tmp_path / "sink")
    _append(spark, src, [1, 2])
    _run_available_now(spark, {}, src, sink, str(tmp_path / "c1"))
    spark.createDataFrame([(7, "x")], "id long, body string").write.format("indextables").mode("overwrite").save(src)
    with pytest.raises(Exception, match="ignoreChanges"):
        _run_available_now(spark, {}, src, sink, str(tmp_path / "c1"))
    _run_available_now(spark, {"ignoreChanges": "true"}, src, sink, str(tmp_path / "c1"))
    assert _ids(spark, sink) == [1, 2, 7]


def test_sink_is_exactly_once_when_a_batch_is_replayed(spark, tmp_path):
    src, sink, ckpt = str(tmp_path / "src"), str(tmp_path / "sink"), str(tmp_path / "ckpt")
    _append(spark, src, range(5))
    _run_available_now(spark, {}, src, sink, ckpt)
    assert _ids(spark, sink) == list(range(5))
    # Simulate a crash after the sink committed but before Spark recorded the batch as done:
    # remove the last commit marker so that the restarted query replays the same batch id.
    commits = sorted(os.listdir(os.path.join(ckpt, "commits")), key=lambda n: (len(n), n))
    last = [c for c in commits if not c.startswith(".")][-1]
    os.remove(os.path.join(ckpt, "commits", last))
    crc = os.path.join(ckpt, "commits", f".{last}.crc")
    if os.path.exists(crc):
        os.remove(crc)
    v = it.IndexTable(sink).version()
    _run_available_now(spark, {}, src, sink, ckpt)
    assert os.path.exists(os.path.join(ckpt, "commits", last))  # the batch was replayed...
    assert _ids(spark, sink) == list(range(5))  # ...without duplicates
    assert it.IndexTable(sink).version() == v  # the replay committed nothing


def test_complete_mode_overwrites(spark, tmp_path):
    src, sink, ckpt = str(tmp_path / "src"), str(tmp_path / "sink"), str(tmp_path / "ckpt")
    _append(spark, src, range(6))
    counts = spark.readStream.format("indextables").load(src).groupBy().count()
    q = (
        counts.writeStream.format("indextables")
        .outputMode("complete")
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start(sink)
    )
    assert q.awaitTermination(300), "the streaming query did not finish in time"
    assert q.exception() is None
    _append(spark, src, range(6, 8))
    q = (
        spark.readStream.format("indextables")
        .load(src)
        .groupBy()
        .count()
        .writeStream.format("indextables")
        .outputMode("complete")
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start(sink)
    )
    assert q.awaitTermination(300), "the streaming query did not finish in time"
    assert q.exception() is None
    rows = spark.read.format("indextables").load(sink).collect()
    assert [r["count"] for r in rows] == [8]


def test_merge_on_write_after_micro_batches(spark, tmp_path):
    """Each micro-batch adds small splits; merge-on-write (asynchronous) folds them after a batch."""
    src, sink, ckpt = str(tmp_path / "src"), str(tmp_path / "sink"), str(tmp_path / "ckpt")
    for start in range(0, 40, 10):
        _append(spark, src, range(start, start + 10))
    reader = spark.readStream.format("indextables").option("maxFilesPerTrigger", "1")
    q = (
        reader.load(src)
        .repartition(3)
        .writeStream.format("indextables")
        .option("checkpointLocation", ckpt)
        .option("spark.indextables.mergeOnWrite.enabled", "true")
        .trigger(availableNow=True)
        .start(sink)
    )
    assert q.awaitTermination(300), "the streaming query did not finish in time"
    assert q.exception() is None
    t = it.IndexTable(sink)
    deadline = time.monotonic() + 120  # the watcher asks the query for its progress every second
    while True:
        # the history first: a merge that committed before it was read has its result once the
        # wait returns (a result read first could miss a merge starting between the two)
        ops = [h["operation"] for h in t.inspect.history()]
        done = it.wait_for_maintenance(timeout=300)
        if "MERGE SPLITS" in ops or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert sink in done, f"no merge-on-write ran for the sink in 120 s: results {done}, history {ops}"
    assert done[sink].status == "DONE" and done[sink].error is None
    assert "MERGE SPLITS" in ops and ops.count("STREAMING UPDATE") >= 2
    assert _ids(spark, sink) == list(range(40))
    assert t.snapshot().num_files < sum(1 for op in ops if op == "STREAMING UPDATE") * 3


# ---- the read options a stream honours and refuses ------------------------------------------------

FOX = "body:fox"


def _append_docs(spark, path, ids):
    """Rows whose body has `fox` for multiples of 3 (else `dog`), partitioned by region (odd: eu)."""
    rows = [(i, f"{'fox' if i % 3 == 0 else 'dog'} {i}", "eu" if i % 2 else "us") for i in ids]
    (
        spark.createDataFrame(rows, "id long, body string, region string")
        .write.format("indextables")
        .option("spark.indextables.indexing.typemap.body", "text")
        .partitionBy("region")
        .mode("append")
        .save(path)
    )


def _batch_ids(spark, path, **opts):
    return sorted(r.id for r in spark.read.format("indextables").options(**opts).load(path).collect())


def test_stream_with_a_query_returns_the_matches_of_each_micro_batch(spark, tmp_path):
    """A stream with option `query` returns exactly what a batch read with the query returns: the
    initial snapshot's matches (without its deleted rows), then those of each appended version."""
    src, sink, ckpt = str(tmp_path / "src"), str(tmp_path / "sink"), str(tmp_path / "ckpt")
    _append_docs(spark, src, range(0, 12))
    _append_docs(spark, src, range(12, 24))
    it.IndexTable(src).delete("id = 3")  # a deleted match of the initial snapshot
    q = _run_available_now(spark, {"query": FOX, "maxFilesPerTrigger": "1"}, src, sink, ckpt)
    assert _ids(spark, sink) == _batch_ids(spark, src, query=FOX) == [0, 6, 9, 12, 15, 18, 21]
    assert len([p for p in q.recentProgress if p["numInputRows"] > 0]) >= 2  # several micro-batches
    _append_docs(spark, src, range(24, 30))
    _run_available_now(spark, {"query": FOX}, src, sink, ckpt)
    assert _ids(spark, sink) == _batch_ids(spark, src, query=FOX) == [0, 6, 9, 12, 15, 18, 21, 24, 27]


def test_stream_where_columns_and_snippets_as_a_batch_read(spark, tmp_path):
    """Options `where` (a partition and a data condition), `columns` and `snippetFields` on a stream:
    the rows and snippets a batch read with the same options returns."""
    src = str(tmp_path / "src")
    _append_docs(spark, src, range(0, 12))
    _append_docs(spark, src, range(12, 24))
    opts = {"query": FOX, "where": "region = 'eu' AND id > 3", "columns": "id,_snippet", "snippetFields": "body"}
    got = sorted(
        _memory_rows(spark, spark.readStream.format("indextables").options(**opts).load(src), "stream_snippets")
    )
    want = sorted(spark.read.format("indextables").options(**opts).load(src).collect())
    assert got == want
    assert [(r.id, r._snippet) for r in got] == [(i, f"<b>fox</b> {i}") for i in (9, 15, 21)]


def test_stream_selects_by_an_index_only_column_through_the_where_option(spark, tmp_path):
    """An index-only column holds no values in the rows (NULL in every read) and a stream gets no
    filter pushdown: the `where` option is how a stream selects by one (decided by the index, as a
    batch read's pushed filter is), while a DataFrame filter on it sees the rows' NULLs."""
    src = str(tmp_path / "src")
    for ids in (range(0, 6), range(6, 12)):
        rows = [(i, "red" if i % 4 == 0 else "blue") for i in ids]
        (
            spark.createDataFrame(rows, "id long, tag string")
            .write.format("indextables")
            .option("spark.indextables.indexing.indexonlyfields", "tag")
            .mode("append")
            .save(src)
        )

    def stream_ids(name, where=None, dataframe_filter=None):
        reader = spark.readStream.format("indextables")
        if where is not None:
            reader = reader.option("where", where)
        df = reader.load(src)
        if dataframe_filter is not None:
            df = df.filter(dataframe_filter)
        return sorted(r.id for r in _memory_rows(spark, df, name))

    batch = sorted(r.id for r in spark.read.format("indextables").load(src).filter("tag = 'red'").collect())
    assert stream_ids("stream_index_only", where="tag = 'red'") == batch == [0, 4, 8]
    assert stream_ids("stream_index_only_rows", dataframe_filter="tag IS NULL") == list(range(12))


def test_the_source_refuses_when_it_starts_without_the_load_wrapper(tmp_path):
    """The source itself refuses what a stream cannot answer (a session whose readStream.load() is
    not wrapped: it.register not called), at its first call: initialOffset, or latestOffset when
    it resumes from a checkpoint."""
    import pyarrow as pa
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from indextables_spark.config.options import Options
    from indextables_spark.errors import InvalidOptionError
    from indextables_spark.expr.partition_filter import PartitionFilterError
    from indextables_spark.spark.streaming import IndexTablesStreamReader

    path = str(tmp_path / "t")
    it.write_table(path, pa.table({"id": pa.array([1], pa.int64()), "body": ["fox"]}))
    schema = StructType([StructField("id", LongType()), StructField("body", StringType())])
    resumed = {"version": 0, "index": 0, "isStartingVersion": False}
    for opts, error, fault in (
        ({"query": FOX, "limit": "3"}, InvalidOptionError, "option limit='3'"),
        ({"vector": "1,0"}, InvalidOptionError, "option vector"),
        ({"versionAsOf": "0"}, InvalidOptionError, "option versionAsOf"),
        ({"where": "nope = 1"}, PartitionFilterError, "'nope'"),
    ):
        with pytest.raises(error, match=re.escape(fault)):
            IndexTablesStreamReader(path, Options.of(opts), schema).initialOffset()
        with pytest.raises(error, match=re.escape(fault)):
            IndexTablesStreamReader(path, Options.of(opts), schema).latestOffset(resumed, None)
