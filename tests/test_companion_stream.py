"""Companions that stay fresh (issue 39): `BUILD INDEXTABLES COMPANION … WITH STREAMING POLL INTERVAL`
and `it.start_companion_sync` follow a Delta table as it changes (appends, an overwrite, deletes that
rewrite files), commit nothing when nothing changed, stop between polls and resume from the source
version the companion records; errors stop the sync naming the source and its version."""

from __future__ import annotations

import shutil
import threading
import time

import pytest

import indextables_spark as it
from cmd_helpers import rows
from indextables_spark.errors import CompanionSourceError, StorageError
from indextables_spark.ops.companion.stream import CompanionSync
from test_companion import INDEXING, has_word, index_rows, tuples, write_delta, write_iceberg

POLL = 0.05  # seconds between polls
OPTIONS = {"spark.indextables.companion.parallelism": "1"}  # index in this process (no subprocess start-ups)


def _log_version(loc: str) -> int:
    from indextables_spark.core.log.maintenance.shared_logs import log_with_maintenance
    from indextables_spark.core.storage import open_storage
    from indextables_spark.config.options import Options

    opts = Options.of({})
    return log_with_maintenance(open_storage(loc, opts), opts).latest_version()


def _wait_synced(sync: CompanionSync, version: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while sync.synced_version != version:
        if not sync.is_active:
            sync.await_termination()  # raises what stopped it
            raise AssertionError(f"the sync stopped at {sync.status}")
        assert time.monotonic() < deadline, f"not synced to {version} in {timeout} s: {sync.status}"
        time.sleep(0.02)


def _delta(src: str, version: int | None = None):
    from deltalake import DeltaTable

    return DeltaTable(src, version=version)


def test_follows_delta_through_20_commits_while_queries_run(tmp_path):
    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    write_delta(src, rows(40))
    counts = {0: 40}  # the row count of each Delta version
    answers: list[int] = []
    failures: list[BaseException] = []
    done = threading.Event()

    def query() -> None:  # a reader against the companion the whole time
        while not done.is_set():
            try:
                if _log_version(loc) >= 0:
                    t = it.IndexTable(loc)
                    answers.append(t.count())
                    t.search("body:alpha", limit=5, columns=["id", "body"])
            except BaseException as e:
                failures.append(e)
                return

    reader = threading.Thread(target=query)
    sync = it.start_companion_sync(src, loc, indexing=INDEXING, options=OPTIONS, poll_interval=POLL)
    reader.start()
    try:
        _wait_synced(sync, 0)
        next_id = 40
        for commit in range(1, 21):
            if commit == 8:  # an overwrite: every file replaced
                write_delta(src, rows(25, start=1000), mode="overwrite")
            elif commit in (5, 12, 17):  # deletes that rewrite (and remove) files
                _delta(src).delete(f"id % {commit % 4 + 2} = 0")
            else:
                write_delta(src, rows(10 + commit, start=next_id))
                next_id += 10 + commit
            dt = _delta(src)
            assert dt.version() == commit
            expected = dt.to_pyarrow_table()
            counts[commit] = expected.num_rows
            _wait_synced(sync, commit)
            # the companion answers what the Delta table holds at the synced version
            assert index_rows(loc) == tuples(expected)
            assert index_rows(loc, "body:alpha") == tuples(has_word(expected, "alpha"))
            indexed = {k for f in it.IndexTable(loc).snapshot().files for k in f.companion_source_files}
            assert indexed == {f.key for f in _open_files(src)}
    finally:
        done.set()
        reader.join()
        sync.stop()
    sync.await_termination()
    assert not failures, failures
    # every answer the reader saw was the row count of some synced version (never a half sync)
    assert answers and set(answers) <= set(counts.values())
    status = sync.status
    assert status.syncs == 21 and status.synced_version == 20 and not status.active and status.message == "stopped"
    assert sync.last_progress is not None and sync.last_progress.source_version == 20


def _open_files(src: str):
    from indextables_spark.ops.companion.sources import open_source

    return open_source("delta", src).files


def test_no_change_commits_nothing_stop_and_resume(tmp_path):
    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    write_delta(src, rows(30))
    # three polls: the first syncs version 0, the next two find nothing and commit nothing
    sync = it.start_companion_sync(src, loc, indexing=INDEXING, options=OPTIONS, poll_interval=POLL, max_iterations=3)
    assert sync.await_termination(timeout=60)
    assert sync.status.polls == 3 and sync.status.syncs == 1 and _log_version(loc) == 0
    assert [r.status for r in sync.recent_progress] == ["SUCCESS"]  # no-change polls run no build
    # two commits while stopped; a restart continues from the recorded version 0: one sync to version 2
    write_delta(src, rows(5, start=30))
    write_delta(src, rows(5, start=35))
    with it.start_companion_sync(src, loc, indexing=INDEXING, options=OPTIONS, poll_interval=POLL) as again:
        _wait_synced(again, 2)
        assert again.recent_progress[0].files_indexed == len(_open_files(src)) - sync.last_progress.files_indexed
    assert not again.is_active and _log_version(loc) == 1
    assert index_rows(loc) == tuples(rows(40))
    # a restart with nothing new resumes at version 2 and commits nothing
    idle = it.start_companion_sync(src, loc, options=OPTIONS, poll_interval=POLL, max_iterations=2)
    assert idle.await_termination(timeout=60)
    assert idle.synced_version == 2 and idle.status.syncs == 0 and idle.recent_progress == []
    assert _log_version(loc) == 1


def test_iceberg_without_a_probe_commits_only_changes(tmp_path):
    """Iceberg has no cheap probe: each poll plans the incremental build, which commits nothing
    when no file changed."""
    table, options = write_iceberg(tmp_path, rows(30))
    loc = str(tmp_path / "index")
    kwargs = dict(format="iceberg", catalog="c", catalog_type="sql", options={**OPTIONS, **options})
    sync = it.start_companion_sync("db.docs", loc, poll_interval=POLL, max_iterations=3, **kwargs)
    assert sync.await_termination(timeout=60)
    assert [r.status for r in sync.recent_progress] == ["SUCCESS", "NO_ACTION", "NO_ACTION"]
    assert _log_version(loc) == 0 and sync.synced_version == table.current_snapshot().snapshot_id
    table.append(rows(7, start=30))
    again = it.start_companion_sync("db.docs", loc, poll_interval=POLL, max_iterations=2, **kwargs)
    assert again.await_termination(timeout=60)
    assert [r.status for r in again.recent_progress] == ["SUCCESS", "NO_ACTION"] and _log_version(loc) == 1
    assert again.synced_version == table.refresh().current_snapshot().snapshot_id
    assert index_rows(loc) == tuples(rows(37))


def test_stop_during_a_sync_lets_it_finish():
    entered, release = threading.Event(), threading.Event()
    built = []

    def build():
        entered.set()
        release.wait(10)
        built.append(1)
        return it.build_companion.__globals__["CompanionBuildResult"](
            table_path="/i", source_format="delta", source="/s", source_version=3, files_indexed=1, version=0
        )

    sync = CompanionSync(
        location="/i", fmt="delta", source="/s", build=build, probe=lambda: 3, recorded=lambda: None, interval=POLL
    ).start()
    assert entered.wait(10)
    stopper = threading.Thread(target=sync.stop)
    stopper.start()
    time.sleep(0.1)
    assert sync.is_active and sync.status.message == "syncing"  # stop waits for the sync under way
    release.set()
    stopper.join(10)
    assert not sync.is_active and built == [1] and sync.synced_version == 3 and sync.status.polls == 1


def test_errors_stop_the_sync_naming_source_and_version(tmp_path):
    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    write_delta(src, rows(20))
    sync = it.start_companion_sync(src, loc, options=OPTIONS, poll_interval=POLL)
    _wait_synced(sync, 0)
    # a change of partitioning the companion cannot follow
    from deltalake import write_deltalake

    write_deltalake(src, rows(20), mode="overwrite", partition_by=["region"], schema_mode="overwrite")
    with pytest.raises(
        CompanionSourceError,
        match=rf"delta table {src} at version 1 \(the companion holds source "
        r"version 0\).*partitioned by \['region'\]",
    ):
        sync.await_termination(timeout=60)
    assert not sync.is_active and sync.status.message == "failed" and _log_version(loc) == 0
    # the source gone: stops at the first poll, not retried
    shutil.rmtree(src)
    gone = it.start_companion_sync(src, loc, options=OPTIONS, poll_interval=POLL)
    with pytest.raises(
        CompanionSourceError,
        match=rf"delta table {src} at its newest version .*after 1 polls.*"
        r"TableNotFoundError",
    ):
        gone.await_termination(timeout=60)


def test_transient_errors_are_retried_then_stop():
    calls = []

    def probe():
        calls.append(1)
        if len(calls) <= 2:
            raise StorageError("connection reset")
        return 7

    ok = CompanionSync(
        location="/i",
        fmt="delta",
        source="/s",
        build=None,
        probe=probe,
        recorded=lambda: 7,
        interval=0.01,
        max_iterations=3,
    ).start()
    assert ok.await_termination(10) and ok.status.consecutive_errors == 0 and ok.status.source_version == 7

    def failing():
        raise StorageError("connection reset")

    sync = CompanionSync(
        location="/i",
        fmt="delta",
        source="/s",
        build=None,
        probe=failing,
        recorded=lambda: None,
        interval=0.01,
        max_errors=3,
    ).start()
    with pytest.raises(CompanionSourceError, match=r"after 3 polls: StorageError: connection reset"):
        sync.await_termination(10)


def test_sql_clause_parses_and_refusals(tmp_path, capsys):
    from indextables_spark.frontends.execute import execute
    from indextables_spark.frontends.sql_parser import parse_command

    cmd = parse_command(
        "BUILD INDEXTABLES COMPANION FOR DELTA '/s' AT LOCATION '/i' WITH STREAMING POLL INTERVAL 5 SECONDS"
    )
    assert cmd.streaming_poll_interval == 5.0 and cmd.max_iterations is None
    cmd = parse_command(
        "BUILD INDEXTABLES COMPANION FOR DELTA '/s' WITH STREAMING POLL INTERVAL 2 MINUTES MAX ITERATIONS 4 "
        "AT LOCATION '/i'"
    )
    assert cmd.streaming_poll_interval == 120.0 and cmd.max_iterations == 4
    assert (
        parse_command(
            "BUILD INDEXTABLES COMPANION FOR DELTA '/s' AT LOCATION '/i' WITH STREAMING POLL INTERVAL 250 MILLISECONDS"
        ).streaming_poll_interval
        == 0.25
    )
    for bad, message in [
        ("WITH STREAMING POLL INTERVAL 5", "expected SECONDS, MINUTES or MILLISECONDS"),
        ("WITH STREAMING POLL INTERVAL 0 SECONDS", "must be positive"),
        ("WITH STREAMING POLL INTERVAL 1 SECONDS MAX ITERATIONS 0", "MAX ITERATIONS must be at least 1"),
        ("WITH POLL", "expected STREAMING"),
    ]:
        with pytest.raises(Exception, match=message):
            parse_command(f"BUILD INDEXTABLES COMPANION FOR DELTA '/s' AT LOCATION '/i' {bad}")
    for clause, message in [("DRY RUN", "not compatible with DRY RUN"), ("FROM VERSION 1", "FROM VERSION")]:
        with pytest.raises(Exception, match=message):
            execute(
                parse_command(
                    f"BUILD INDEXTABLES COMPANION FOR DELTA '/s' {clause} AT LOCATION '/i' "
                    "WITH STREAMING POLL INTERVAL 1 SECONDS"
                )
            )
    # Spark-free SQL: bounded by MAX ITERATIONS, one row per sync that committed
    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    write_delta(src, rows(15))
    out = execute(
        parse_command(
            f"BUILD INDEXTABLES COMPANION FOR DELTA '{src}' INDEXING MODES ('body':'text') AT LOCATION '{loc}' "
            "WITH STREAMING POLL INTERVAL 50 MILLISECONDS MAX ITERATIONS 2"
        ),
        OPTIONS,
    )
    assert out.table.column("rows_indexed").to_pylist() == [15]
    assert out.table.column("source_version").to_pylist() == [0]
    # the command line: the same, and Ctrl+C would stop it
    from indextables_spark.frontends.cli import main

    write_delta(src, rows(4, start=15))
    argv = ["build-companion", src, loc, "-o", "companion.parallelism=1", "--json", "--max-iterations", "2"]
    assert main(argv) != 0 and "give WITH STREAMING POLL INTERVAL" in capsys.readouterr().err
    assert main([*argv, "--streaming-poll-interval", "0.05"]) == 0
    assert '"sourceVersion": 1' in capsys.readouterr().out
    assert index_rows(loc) == tuples(rows(19))


def _sql_follows(session, tmp_path) -> None:
    it.register(session)  # spark.sql takes our command texts
    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    write_delta(src, rows(20))
    text = (
        f"BUILD INDEXTABLES COMPANION FOR DELTA '{src}' INDEXING MODES ('body':'text') AT LOCATION '{loc}' "
        "WITH STREAMING POLL INTERVAL 1 SECONDS MAX ITERATIONS 2"
    )
    got = it.sql(session, text).collect()
    assert [(r["source_version"], r["rows_indexed"]) for r in got] == [(0, 20)]
    write_delta(src, rows(6, start=20))
    _delta(src).delete("id = 3")
    # resumes from version 0: one sync to version 2; the second poll finds nothing
    got = session.sql(text).collect()
    assert [r["source_version"] for r in got] == [2]
    expected = _delta(src).to_pyarrow_table()
    hits = session.read.format("indextables").option("query", "body:alpha").load(loc).collect()
    assert sorted(r["id"] for r in hits) == sorted(has_word(expected, "alpha").column("id").to_pylist())


@pytest.mark.spark
def test_sql_form_classic(spark, tmp_path):
    _sql_follows(spark, tmp_path)


@pytest.mark.spark
def test_sql_form_connect(connect_spark, tmp_path):
    _sql_follows(connect_spark, tmp_path)
