"""Merge-on-write after streaming micro-batches (ops/maintenance/stream_watch.py) and what a session's
stop ends (post_write.stop_background), Spark-free: a query that reports progress as the test says,
and the post-write run recorded instead of merging."""

from __future__ import annotations

import threading
import time

import pyspark
import pytest

from indextables_spark.config.options import Options
from indextables_spark.ops.maintenance import post_write, stream_watch
from indextables_spark.results.maintenance import PostWriteResult

POLL = 0.02


class _Context:
    """A classic SparkContext as pyspark leaves it: `_jsc` is None once stopped."""

    def __init__(self) -> None:
        self._jsc: object | None = object()

    def setJobDescription(self, text: str | None) -> None:
        pass


class _Session:
    def __init__(self) -> None:
        self.sparkContext = _Context()

    def getTags(self) -> set[str]:
        return set()


class _Query:
    """A streaming query whose progress reports and end the test decides; counts what is asked."""

    def __init__(self, *rows: int, active: bool = True) -> None:
        self.reports: list[dict[str, object]] = []
        self.active = active
        self.asked = 0
        for n in rows:
            self.report(n)

    def report(self, rows: int) -> None:
        """A progress report: a micro-batch that read `rows`, or (0) a trigger that found no data,
        which reports the next batch id."""
        last = self.reports[-1] if self.reports else None
        batch = 0 if last is None else int(last["batchId"]) + (1 if int(last["numInputRows"]) else 0)
        self.reports.append({"batchId": batch, "timestamp": f"t{len(self.reports)}", "numInputRows": rows})

    @property
    def isActive(self) -> bool:
        self.asked += 1
        return self.active

    @property
    def lastProgress(self) -> dict[str, object] | None:
        self.asked += 1
        return self.reports[-1] if self.reports else None

    @property
    def recentProgress(self) -> list[dict[str, object]]:
        self.asked += 1
        return list(self.reports[-100:])


class _Thread(threading.Thread):
    """pyspark's InheritableThread without a SparkContext to copy properties from."""

    def __init__(self, *args: object, session: object = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


class _Runs:
    """Records post_write.maybe_run calls; answers with `statuses` (then STARTED)."""

    def __init__(self, *statuses: str) -> None:
        self.statuses = list(statuses)
        self.calls = 0

    def __call__(self, spark: object, path: str, opts: object) -> PostWriteResult:
        self.calls += 1
        status = self.statuses.pop(0) if self.statuses else "STARTED"
        return PostWriteResult(table_path=path, status=status)


@pytest.fixture
def runs(monkeypatch):
    monkeypatch.setattr(pyspark, "InheritableThread", _Thread)
    monkeypatch.setattr(stream_watch.StreamWatch, "POLL_SECONDS", POLL)
    recorded = _Runs()
    monkeypatch.setattr(post_write, "maybe_run", recorded)
    return recorded


def _watch(query: _Query, session: _Session | None = None) -> stream_watch.StreamWatch:
    watch = stream_watch.StreamWatch(session or _Session(), query, "/t/sink", Options.of({}))
    watch.start()
    return watch


def _until(check, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(POLL / 2)


def _ended(watch: stream_watch.StreamWatch) -> bool:
    return watch.thread is not None and not watch.thread.is_alive()


def test_evaluates_after_each_batch_that_read_rows_until_the_query_ends(runs):
    query = _Query()
    watch = _watch(query)
    time.sleep(5 * POLL)
    assert runs.calls == 0  # nothing reported yet
    query.report(3)
    _until(lambda: runs.calls == 1)
    query.report(0)  # a trigger without new data
    time.sleep(5 * POLL)
    assert runs.calls == 1
    query.report(5)
    _until(lambda: runs.calls == 2)
    query.active = False
    _until(lambda: _ended(watch))
    assert runs.calls == 2


def test_a_batch_reported_just_before_a_trigger_without_data_is_evaluated(runs):
    query = _Query(2)
    watch = _watch(query)
    _until(lambda: runs.calls == 1)
    # between two looks: a batch that read rows, then the next trigger finding nothing
    query.report(4)
    query.report(0)
    _until(lambda: runs.calls == 2)
    query.active = False
    _until(lambda: _ended(watch))
    assert runs.calls == 2


def test_a_query_that_ended_before_the_watch_gets_one_evaluation(runs):
    query = _Query(3, 2, 0, active=False)
    watch = _watch(query)
    _until(lambda: _ended(watch))
    assert runs.calls == 1


def test_a_query_that_read_nothing_gets_none(runs):
    query = _Query(0, active=False)
    watch = _watch(query)
    _until(lambda: _ended(watch))
    assert runs.calls == 0


def test_a_merge_already_running_is_waited_for_then_the_table_evaluated_again(runs, monkeypatch):
    runs.statuses = ["ALREADY_RUNNING"]
    joined: list[str] = []
    monkeypatch.setattr(post_write, "join_running", joined.append)
    query = _Query(3, active=False)
    watch = _watch(query)
    _until(lambda: _ended(watch))
    assert runs.calls == 2 and joined == ["/t/sink"]


def test_the_watch_ends_without_asking_the_query_once_the_session_stops(runs):
    session, query = _Session(), _Query()
    watch = _watch(query, session)
    _until(lambda: query.asked > 0)
    post_write.stop_background(session)
    assert _ended(watch)
    asked = query.asked
    query.report(7)
    time.sleep(5 * POLL)
    assert query.asked == asked and runs.calls == 0
    # a query started after the stop began is not watched at all
    later = _Query(1)
    assert _watch(later, session).thread is None and later.asked == 0


def test_the_watch_ends_when_pyspark_stopped_the_session_without_register(runs):
    session, query = _Session(), _Query()
    watch = _watch(query, session)
    _until(lambda: query.asked > 0)
    session.sparkContext._jsc = None  # SparkContext.stop() as pyspark leaves it
    _until(lambda: _ended(watch))
    query.report(7)
    time.sleep(5 * POLL)
    assert runs.calls == 0


def test_stop_waits_for_running_maintenance_and_then_starts_none(monkeypatch):
    monkeypatch.setattr(pyspark, "InheritableThread", _Thread)
    release = threading.Event()

    def slow_run(spark, path, opts):
        assert release.wait(30)
        return PostWriteResult(table_path=path, status="DONE")

    monkeypatch.setattr(post_write, "run", slow_run)
    session, opts = _Session(), {"mergeOnWrite.enabled": "true"}
    assert post_write.maybe_run(session, "/t/stop", opts).status == "STARTED"
    stopper = threading.Thread(target=post_write.stop_background, args=(session,))
    stopper.start()
    stopper.join(0.3)
    assert stopper.is_alive()  # the merge is still running: the session does not stop yet
    skipped = post_write.maybe_run(session, "/t/stop-2", opts)
    assert skipped.status == "SKIPPED" and skipped.error == "the session is stopping"
    release.set()
    stopper.join(30)
    assert not stopper.is_alive()
    assert post_write.wait_for_background(timeout=30)["/t/stop"].status == "DONE"
    # another session (a new SparkContext) is not stopping
    assert post_write.maybe_run(_Session(), "/t/stop", opts).status == "STARTED"
    assert post_write.wait_for_background(timeout=30)["/t/stop"].status == "DONE"


def test_waiting_ends_for_a_thread_that_died_before_its_work(monkeypatch):
    class _DiesFirst(_Thread):
        # as pyspark's InheritableThread when its session stopped before the thread ran
        def run(self) -> None:
            raise AssertionError("SparkContext._active_spark_context is None")

    monkeypatch.setattr(pyspark, "InheritableThread", _DiesFirst)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)
    assert post_write.maybe_run(_Session(), "/t/dead", {"mergeOnWrite.enabled": "true"}).status == "STARTED"
    started = time.monotonic()
    done = post_write.wait_for_background(timeout=10)
    assert "/t/dead" not in done and time.monotonic() - started < 5
    monkeypatch.setattr(pyspark, "InheritableThread", _Thread)
    monkeypatch.setattr(post_write, "run", lambda spark, path, opts: PostWriteResult(table_path=path, status="DONE"))
    assert post_write.maybe_run(_Session(), "/t/dead", {"mergeOnWrite.enabled": "true"}).status == "STARTED"
    assert post_write.wait_for_background(timeout=30)["/t/dead"].status == "DONE"
