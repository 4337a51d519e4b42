"""The maintenance commands through Spark: `it.sql` texts (MERGE SPLITS as a Spark job), the SQL
table functions, and merge-/purge-on-write after `df.write.save()`. Few, broad tests (Spark is slow)."""

from __future__ import annotations

import logging

import pytest

import indextables_spark as it
from indextables_spark.frontends.sql_parser import CommandSyntaxError

from cmd_helpers import rows

pytestmark = pytest.mark.spark

TEXT = {"spark.indextables.indexing.typemap.body": "text"}


def _write(spark, path: str, start: int, n: int = 60, tasks: int = 4, **options) -> None:
    df = spark.createDataFrame(rows(n, start=start)).repartition(tasks)
    (df.write.format("indextables").mode("append").partitionBy("day").options(**TEXT, **options).save(path))


def _all_rows(spark, path: str) -> list[tuple]:
    return sorted(
        tuple(r)
        for r in spark.read.format("indextables").load(path).select("id", "body", "views", "region", "day").collect()
    )


def _query_ids(spark, path: str, query: str) -> list[int]:
    df = spark.read.format("indextables").option("query", query).load(path)
    return sorted(r.id for r in df.select("id").collect())


def test_sql_texts_and_table_functions(spark, tmp_path):
    path = str(tmp_path / "t")
    for w in range(3):
        _write(spark, path, start=w * 60)
    t = it.IndexTable(path)
    n_before = t.snapshot().num_files
    assert n_before >= 30
    expected = _all_rows(spark, path)
    expected_q = _query_ids(spark, path, "body:alpha OR body:zulu")
    assert len(expected) == 180 and expected_q

    merged = it.sql(spark, f"merge splits '{path}' target size 100M").collect()
    assert len(merged) == 1
    m = merged[0]
    assert (
        m.status == "SUCCESS" and m.merge_groups == 3 and m.source_splits_merged == n_before and m.splits_skipped == 0
    )
    t = it.IndexTable(path)
    assert t.snapshot().num_files == 3 and t.inspect.history()[0]["operation"] == "MERGE SPLITS"
    assert _all_rows(spark, path) == expected
    assert _query_ids(spark, path, "body:alpha OR body:zulu") == expected_q

    state = it.sql(spark, f"DESCRIBE INDEXTABLES STATE '{path}'")
    assert "needs_compaction" in state.columns and "skipped_files" in state.columns
    s = state.collect()[0]
    assert s.format == "avro-state" and s.num_files == 3 and s.needs_compaction is False and s.skipped_files == []
    log_df = it.sql(spark, f"DESCRIBE INDEXTABLES TRANSACTION LOG '{path}' INCLUDE ALL")
    counts = {r.action_type: r["count"] for r in log_df.groupBy("action_type").count().collect()}
    assert counts["remove"] == n_before and counts["add"] == n_before + 3
    dropped = it.sql(spark, f"DROP INDEXTABLES PARTITIONS FROM '{path}' WHERE day = '2024-01-03'").collect()[0]
    assert dropped.splits_removed == 1 and dropped.partitions == ["day=2024-01-03"]
    purge = it.sql(spark, f"PURGE INDEXTABLE '{path}' OLDER THAN 7 DAYS DRY RUN").collect()[0]
    assert purge.status == "DRY_RUN" and purge.splits_deleted == 0
    # after register(), plain spark.sql runs the same texts
    assert spark.sql(f"CHECKPOINT INDEXTABLES '{path}'").collect()[0].status == "SUCCESS"
    assert spark.sql(f"COMPACT INDEXTABLES '{path}'").collect()[0].num_tombstones == 0
    repaired = it.sql(
        spark, f"REPAIR INDEXFILES TRANSACTION LOG '{path}/_transaction_log' AT LOCATION '{tmp_path}/repaired'"
    ).collect()[0]
    assert repaired.status == "SUCCESS" and repaired.valid_splits == 2 and repaired.missing_splits == 0
    assert it.sql(spark, f"TRUNCATE INDEXTABLES TIME TRAVEL '{path}' DRY RUN").collect()[0].dry_run is True
    # Other text goes to spark.sql; our texts fail with positioned syntax errors or name the path.
    assert it.sql(spark, "SELECT 41 + 1 AS x").collect()[0].x == 42
    with pytest.raises(CommandSyntaxError, match="position 13"):
        it.sql(spark, "MERGE SPLITS /nowhere")
    with pytest.raises(CommandSyntaxError, match="position 13"):
        spark.sql("MERGE SPLITS /nowhere")
    # an unquoted word is a table name (test_reference_names.py): the catalog has none by that name
    with pytest.raises(it.TableNotFoundError, match="no table or view nowhere in the Spark catalog"):
        spark.sql("MERGE SPLITS nowhere")
    with pytest.raises(it.TableNotFoundError, match="missing"):
        it.sql(spark, f"DESCRIBE INDEXTABLES STATE '{tmp_path}/missing'")

    # The same commands as table functions.
    row = spark.sql(f"SELECT * FROM indextables_describe_state('{path}')").collect()[0]
    assert row.num_files == 2 and row.table_version == t.version()
    n_log = spark.sql(f"SELECT count(*) AS n FROM indextables_describe_transaction_log('{path}', true)").collect()[0].n
    assert n_log == log_df.count() + 2  # + the drop's commit info and its remove
    dry = spark.sql(f"SELECT * FROM indextables_purge(path => '{path}', dry_run => true)").collect()[0]
    assert dry.status == "DRY_RUN" and dry.retention_hours == 168.0
    # conf set after register() reaches the table functions (they run in workers: re-registered)
    spark.conf.set("spark.indextables.purge.defaultRetentionHours", "200")
    try:
        dry = spark.sql(f"SELECT * FROM indextables_purge(path => '{path}', dry_run => true)").collect()[0]
        assert dry.retention_hours == 200.0
    finally:
        spark.conf.unset("spark.indextables.purge.defaultRetentionHours")
    _write(spark, path, start=1000, tasks=2)
    res = spark.sql(
        f"SELECT status, merge_groups FROM indextables_merge_splits('{path}', \"day = '2024-01-01'\")"
    ).collect()
    assert res[0].status == "SUCCESS" and res[0].merge_groups == 1
    with pytest.raises(Exception, match="TableNotFoundError"):
        spark.sql(f"SELECT * FROM indextables_checkpoint('{tmp_path}/missing')").collect()


def test_merge_and_purge_on_write(spark, tmp_path, caplog):
    path = str(tmp_path / "mow")
    _write(spark, path, start=0, tasks=4)  # first write: ~4 splits per day
    assert it.IndexTable(path).snapshot().num_files > 3
    _write(spark, path, start=100, tasks=4, **{"spark.indextables.mergeOnWrite.enabled": "true"})
    # asynchronous by default: the write returned; the merge runs in a background thread
    done = it.wait_for_maintenance(timeout=300)
    assert done[path]["merge"]["status"] == "SUCCESS"
    t = it.IndexTable(path)
    assert t.snapshot().num_files == 3 and t.inspect.history()[0]["operation"] == "MERGE SPLITS"
    assert len(_all_rows(spark, path)) == 120

    # A failing post-write maintenance (retention below the minimum) never fails the write.
    with caplog.at_level(logging.WARNING, logger="indextables_spark.ops.maintenance.post_write"):
        _write(
            spark,
            path,
            start=200,
            tasks=2,
            **{
                "spark.indextables.purgeOnWrite.enabled": "true",
                "spark.indextables.purgeOnWrite.triggerAfterWrites": "1",
                "spark.indextables.purgeOnWrite.splitRetentionHours": "1",
            },
        )
        failed = it.wait_for_maintenance(timeout=300)[path]
        assert failed.status == "FAILED" and failed.error
    assert len(_all_rows(spark, path)) == 180
    assert any(
        "maintenance after the write" in r.getMessage() and "below the minimum" in r.getMessage()
        for r in caplog.records
    )
    # Purge-on-write with valid settings runs after the write (nothing old enough to delete here).
    spark.conf.set("spark.indextables.purgeOnWrite.enabled", "true")
    spark.conf.set("spark.indextables.purgeOnWrite.triggerAfterWrites", "1")
    try:
        from indextables_spark.ops.maintenance import post_write

        out = post_write.maybe_run(
            spark,
            path,
            {
                "purgeOnWrite.enabled": "true",
                "purgeOnWrite.triggerAfterWrites": "1",
                "mergeOnWrite.async.enabled": "false",
            },
        )
        assert out["purge"]["status"] == "SUCCESS" and out["merge"] is None
        _write(spark, path, start=300, tasks=1)
        assert it.wait_for_maintenance(timeout=300)[path]["purge"]["status"] == "SUCCESS"
    finally:
        spark.conf.unset("spark.indextables.purgeOnWrite.enabled")
        spark.conf.unset("spark.indextables.purgeOnWrite.triggerAfterWrites")
    assert len(_all_rows(spark, path)) == 240


def test_async_post_write_runs_once_per_table_at_a_time(spark, monkeypatch):
    """A write while the table's background maintenance still runs does not start a second one."""
    import threading

    from indextables_spark.ops.maintenance import post_write

    release, calls = threading.Event(), []

    def slow_run(spark_, path, opts):
        calls.append(path)
        assert release.wait(60)
        return {"merge": {"status": "SUCCESS"}, "purge": None}

    monkeypatch.setattr(post_write, "run", slow_run)
    opts = {"mergeOnWrite.enabled": "true"}
    assert post_write.maybe_run(spark, "/t/a", opts).status == "STARTED"
    assert post_write.maybe_run(spark, "/t/a", opts).status == "ALREADY_RUNNING"
    assert post_write.maybe_run(spark, "/t/b", opts).status == "STARTED"  # another table: its own run
    with pytest.raises(TimeoutError, match="still running"):
        it.wait_for_maintenance(timeout=0.2)
    release.set()
    done = it.wait_for_maintenance(timeout=60)
    assert done["/t/a"]["merge"]["status"] == "SUCCESS" and done["/t/b"]["merge"]["status"] == "SUCCESS"
    assert sorted(calls) == ["/t/a", "/t/b"]
    assert post_write.maybe_run(spark, "/t/a", opts).status == "STARTED"  # finished: the next write runs again
    it.wait_for_maintenance(timeout=60)
