"""The Spark-free API inside Spark programs, over Spark Connect and in a classic session:
`IndexTable(path, spark=spark)` takes the session's `spark.indextables.*` conf as options, and
`IndexTable.aggregate` / `it.sql` (MERGE SPLITS as a Spark job) run without any JVM access from the client
(over Connect their tasks run in the Connect server's Python workers).

Spark Connect withholds secret conf values from clients (spark.redaction.regex): over Connect the
S3 credentials must be options; the endpoint and the other settings still come from the conf."""

from __future__ import annotations

import logging

import pytest
from cloud_helpers import session_conf
from cmd_helpers import TEXT_OPTIONS, append, rows, small_splits_table

import indextables_spark as it
from indextables_spark.ops.maintenance import post_write
from indextables_spark.config.options import session_options

pytestmark = pytest.mark.spark

AGGS = {"by_region": {"terms": {"field": "region"}}, "views": {"stats": {"field": "views"}}}
SECRET_KEYS = ("spark.indextables.aws.accessKey", "spark.indextables.aws.secretKey")


def expected_aggs(data) -> dict:
    views = data.column("views").to_pylist()
    regions = data.column("region").to_pylist()
    return {
        "doc_count": len(views),
        "by_region": sorted((r, regions.count(r)) for r in set(regions)),
        "views": {"count": len(views), "min": min(views), "max": max(views), "sum": sum(views)},
    }


def summary(res: dict) -> dict:
    s = res["views"]
    return {
        "doc_count": res["doc_count"],
        "by_region": sorted((b["key"], b["doc_count"]) for b in res["by_region"]["buckets"]),
        "views": {"count": s["count"], "min": s["min"], "max": s["max"], "sum": s["sum"]},
    }


def test_aggregate_and_merge_over_connect(connect_spark, tmp_path):
    """A local table (the Connect server runs on this machine): aggregations and MERGE SPLITS run as
    jobs on the server, with the session conf (here the split cache directory) as their options."""
    spark = connect_spark
    path = str(tmp_path / "t")
    n_writes, per_write = 4, 30
    small_splits_table(path, n_writes, per_write)  # 4 versions × 3 day partitions
    data = rows(n_writes * per_write)
    n_alpha = sum("alpha" in b.split() for b in data.column("body").to_pylist())
    assert 0 < n_alpha < len(data)
    cache = tmp_path / "server-task-cache"

    with session_conf(spark, {"spark.indextables.cache.disk.path": str(cache)}):
        t = it.IndexTable(path, spark=spark)
        assert t.options.get_str("cache.disk.path") == str(cache)
        assert t.version() == n_writes - 1 and t.count() == len(data)

        want = expected_aggs(data)
        assert (
            summary(it.IndexTable(path, spark=spark).aggregate(AGGS, spark=spark)) == want
        )  # auto = "spark" over Connect
        # the server's tasks downloaded the splits into the cache directory of the session conf
        cached = {p.name for p in cache.rglob("*") if p.is_file()}
        assert cached, f"no file in {cache}: the session conf did not reach the server's tasks"
        assert (
            summary(
                it.IndexTable(path, spark=spark).aggregate(AGGS, query="body:alpha", spark=spark, execution="driver")
            )["doc_count"]
            == n_alpha
        )

        files_before = t.snapshot().num_files
        assert files_before == n_writes * 3
        merged = it.sql(spark, f"MERGE SPLITS '{path}' TARGET SIZE 100M").collect()
        assert len(merged) == 1
        m = merged[0]
        assert (m.status, m.merge_groups, m.source_splits_merged) == ("SUCCESS", 3, files_before)
        t = it.IndexTable(path, spark=spark)
        assert t.snapshot().num_files == 3 and t.inspect.history()[0]["operation"] == "MERGE SPLITS"
        assert t.count() == len(data) and t.count(query="body:alpha") == n_alpha
        assert summary(it.IndexTable(path, spark=spark).aggregate(AGGS, spark=spark)) == want
        state = it.sql(spark, f"DESCRIBE INDEXTABLES STATE '{path}'").collect()[0]
        assert state.num_files == 3 and state.table_version == n_writes

        # merge-on-write after two more writes: a background thread of this Connect client runs the
        # merge as a job on the server (threshold from the server's spark.default.parallelism)
        for w in (n_writes, n_writes + 1):
            append(path, rows(per_write, start=w * per_write))
        assert it.IndexTable(path).snapshot().num_files == 9
        started = post_write.maybe_run(spark, path, {"mergeOnWrite.enabled": "true", "mergeOnWrite.targetSize": "100M"})
        assert started.status == "STARTED"
        result = it.wait_for_maintenance(timeout=300)[path]
        assert result["merge"]["status"] == "SUCCESS", result
        t = it.IndexTable(path)
        assert t.snapshot().num_files == 3 and t.count() == len(data) + 2 * per_write
        assert t.count(query="body:alpha") == sum(
            "alpha" in b.split() for b in rows((n_writes + 2) * per_write).column("body").to_pylist()
        )


def test_index_table_over_connect_on_s3(connect_spark, s3_uri, s3_options, caplog):
    spark, uri = connect_spark, s3_uri
    small_splits_table(uri, 3, 20, options=s3_options)
    data = rows(60)
    creds = {k: s3_options[k] for k in SECRET_KEYS}
    assert dict(it.IndexTable(uri, creds, spark=spark).options) == {
        **{k.split(".", 2)[2].lower(): v for k, v in creds.items()},
        "read.stalenesslimit": "0",  # opened with a session: the log listed on every read
    }  # no conf yet

    with session_conf(spark, s3_options):
        # Spark Connect does not hand secrets back to clients; everything else arrives
        visible = session_options(spark)
        assert not any(k in visible for k in SECRET_KEYS)
        assert {k: v for k, v in s3_options.items() if k not in SECRET_KEYS}.items() <= visible.items()
        with caplog.at_level(logging.WARNING, logger="indextables_spark.config.sessions"):
            it.IndexTable(uri, spark=spark)
        assert all(k in caplog.text for k in SECRET_KEYS), caplog.text
        caplog.clear()

        t = it.IndexTable(uri, creds, spark=spark)  # credentials as options, the rest from the conf
        # a table opened with a session lists the log on every read (read.stalenessLimit 0: its
        # commits run in other processes) unless the option is set
        assert dict(t.options) == {**it.IndexTable(uri, s3_options).options.values, "read.stalenesslimit": "0"}
        assert "Spark Connect" not in caplog.text
        assert t.version() == 2 and t.count() == 60
        # a job on the server: the options (conf + credentials) travel with the tasks
        assert summary(it.IndexTable(uri, creds, spark=spark).aggregate(AGGS, spark=spark)) == expected_aggs(data)


def test_index_table_takes_a_classic_session_conf(spark, s3_uri, s3_options):
    uri = s3_uri
    small_splits_table(uri, 2, 10, options=s3_options)
    with session_conf(spark, s3_options):  # credentials included: classic sessions return them
        t = it.IndexTable(uri, spark=spark)
        # a table opened with a session lists the log on every read (read.stalenessLimit 0: its
        # commits run in other processes) unless the option is set
        assert dict(t.options) == {**it.IndexTable(uri, s3_options).options.values, "read.stalenesslimit": "0"}
        assert t.version() == 1 and t.count() == 20
        assert it.IndexTable(uri, TEXT_OPTIONS, spark=spark).options.get_str("indexing.typemap.body") == "text"
        assert (
            it.IndexTable(uri, {"spark.indextables.aws.region": "eu-west-3"}, spark=spark).options.get_str("aws.region")
            == "eu-west-3"
        )  # explicit options win
        assert summary(
            it.IndexTable(uri, spark=spark).aggregate(AGGS, spark=spark, execution="spark")
        ) == expected_aggs(rows(20))
