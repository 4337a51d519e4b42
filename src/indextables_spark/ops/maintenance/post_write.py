"""Merge-on-write and purge-on-write (table-protocol.txt "SkipAction ... Purge-on-write, Merge-on-write").

The Spark writer's commit runs in a Python worker without a session, so this runs afterwards in
the writing session: `register.py`'s `save()` wrapper calls `maybe_run(spark, path, options)` once
the write has committed (SQL `INSERT` through the views bridge writes with `save()` too), and its
`writeStream.start()` wrapper calls `watch_stream`, which runs it after the micro-batches that wrote.
Everything here is best effort: a failure is logged as a warning naming the table and the cause, and
never fails the write (the write is already durable).

Settings (`spark.indextables.` prefix; session conf or write options):
- `mergeOnWrite.enabled` (false), `mergeOnWrite.targetSize` (4G). Merge when the number of merge
  groups the plan finds is at least `batchSize × mergeOnWrite.minBatchesToTrigger` (1), where
  batchSize = max(1, ⌊defaultParallelism × mergeOnWrite.batchCpuFraction⌋) (fraction 0.167), as in
  the reference implementation. The merge runs as a Spark job.
- `purgeOnWrite.enabled` (false): purge after a merge-on-write that committed
  (`purgeOnWrite.triggerAfterMerge`, true) and/or after every N writes of this process to the table
  (`purgeOnWrite.triggerAfterWrites`, 0 = never), with `purgeOnWrite.splitRetentionHours` (168) and
  `purgeOnWrite.txLogRetentionHours` (720); the usual minimum-retention check applies.
- `mergeOnWrite.async.enabled` (true): merge and purge run in a background thread of the writing
  process, so the write returns at once; `wait_for_background()` waits for them.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import Any, Mapping

from indextables_spark.config.options import Options
from indextables_spark.config.sessions import default_parallelism, set_job_description
from indextables_spark.ops.maintenance.merge_plan import MergeConfig, plan_merge
from indextables_spark.ops.maintenance.merge_rewrite import SparkRunner
from indextables_spark.ops.maintenance.merge_splits import execute_merge
from indextables_spark.ops.maintenance import purge
from indextables_spark.ops.command import log_at
from indextables_spark.results.maintenance import PostWriteResult

log = logging.getLogger(__name__)

_writes: dict[str, int] = {}
_writes_lock = threading.Lock()


def merge_trigger_threshold(default_parallelism: int, opts: Options) -> int:
    fraction = opts.get_float("mergeOnWrite.batchCpuFraction")
    batches = opts.get_int("mergeOnWrite.minBatchesToTrigger")
    batch_size = max(1, int(default_parallelism * fraction))
    return batch_size * max(1, batches)


def _count_write(uri: str) -> int:
    with _writes_lock:
        _writes[uri] = _writes.get(uri, 0) + 1
        return _writes[uri]


def run(spark: Any, path: str, opts: Options) -> PostWriteResult:
    """The post-write maintenance itself (errors propagate; see maybe_run)."""

    table_log = log_at(path, opts)
    result = PostWriteResult(table_path=path, status="DONE")
    merged = False
    if opts.get_bool("mergeOnWrite.enabled"):
        cfg = MergeConfig.from_options(opts, target_option="mergeOnWrite.targetSize", default_target=4 << 30)
        plan = plan_merge(table_log, None, cfg)
        threshold = merge_trigger_threshold(default_parallelism(spark), opts)
        if len(plan.groups.groups) >= threshold:
            done = execute_merge(plan, SparkRunner(spark))
            result = replace(result, merge=done)
            merged = done.status == "SUCCESS"
        else:
            result = replace(result, merge_groups=len(plan.groups.groups), merge_threshold=threshold)
    if opts.get_bool("purgeOnWrite.enabled"):
        n = _count_write(table_log.storage.uri)
        every = opts.get_int("purgeOnWrite.triggerAfterWrites")
        if (merged and opts.get_bool("purgeOnWrite.triggerAfterMerge")) or (every > 0 and n % every == 0):
            purged = purge.purge(
                table_log,
                older_than_hours=opts.get_float("purgeOnWrite.splitRetentionHours"),
                tx_log_retention_hours=opts.get_float("purgeOnWrite.txLogRetentionHours"),
            )
            result = replace(result, purge=purged)
    return result


def maybe_run(spark: Any, path: str, options: Mapping[str, Any] | Options | None) -> PostWriteResult | None:
    """After a committed write: merge/purge when enabled and due. Never raises.

    With `mergeOnWrite.async.enabled` (default true, as in the reference implementation) the work
    runs in a background thread of this process and the result's status is STARTED (or
    "ALREADY_RUNNING" when the table's previous post-write maintenance is still going: the next
    write evaluates again); wait_for_background() waits for it. Otherwise it runs here and the
    result is run()'s."""
    opts = options if isinstance(options, Options) else Options.of(options)
    if not (opts.get_bool("mergeOnWrite.enabled") or opts.get_bool("purgeOnWrite.enabled")):
        return None
    if opts.get_bool("mergeOnWrite.async.enabled"):
        return _start_background(spark, path, opts)
    return _run_logged(spark, path, opts)


def _run_logged(spark: Any, path: str, opts: Options) -> PostWriteResult:
    try:
        return run(spark, path, opts)
    except Exception as e:  # noqa: BLE001 - the one sanctioned catch: the write has committed; maintenance is best effort
        log.warning(
            "indextables: maintenance after the write to %s failed (the write itself succeeded): %s: %s",
            path,
            type(e).__name__,
            e,
            exc_info=True,
        )
        return PostWriteResult(table_path=path, status="FAILED", error=f"{type(e).__name__}: {e}")


_background: dict[str, threading.Thread] = {}  # table path -> its running post-write maintenance
_background_lock = threading.Lock()
_last_results: dict[str, PostWriteResult] = {}


def _start_background(spark: Any, path: str, opts: Options) -> PostWriteResult:
    from pyspark import InheritableThread  # carries the caller's Spark local properties (pinned threads)

    def work() -> None:
        try:
            set_job_description(spark, f"indextables merge-on-write {path}")  # this thread's jobs (classic)
            _last_results[path] = _run_logged(spark, path, opts)
        finally:
            with _background_lock:
                _background.pop(path, None)

    with _background_lock:
        running = _background.get(path)
        if running is not None and running.is_alive():
            return PostWriteResult(table_path=path, status="ALREADY_RUNNING")
        # Not a daemon: the interpreter finishes a running merge before it exits (and before
        # atexit stops Spark); a merge cut short would leave only orphan splits for PURGE.
        thread = InheritableThread(
            target=work, name=f"indextables-post-write {path}", daemon=False, session=spark
        )  # Spark Connect needs the session; classic copies its tags
        _background[path] = thread
        thread.start()
    return PostWriteResult(table_path=path, status="STARTED")


def _join_running(path: str) -> None:
    with _background_lock:
        running = _background.get(path)
    if running is not None:
        running.join()


def wait_for_background(timeout: float | None = None) -> dict[str, PostWriteResult]:
    """Wait for the post-write maintenance running in the background (all tables); returns the
    latest result per table path. TimeoutError if some is still running after `timeout` seconds."""

    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _background_lock:
            threads = list(_background.values())
        if not threads:
            return dict(_last_results)
        for t in threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                raise TimeoutError(f"post-write maintenance still running after {timeout} s: {t.name}")


def watch_stream(spark: Any, query: Any, path: str, options: Mapping[str, Any]) -> None:
    """Merge-/purge-on-write for a streaming query writing to `path`: evaluated after the
    micro-batches that wrote rows, until the query ends. Nothing is started when neither is enabled.
    `spark`, `query`: the session and its StreamingQuery, duck-typed (no pyspark outside spark/)."""
    opts = Options.of(options)
    if not (opts.get_bool("mergeOnWrite.enabled") or opts.get_bool("purgeOnWrite.enabled")):
        return
    _StreamWatch(spark, query, path, opts).start()


class _StreamWatch:
    """A StreamingQueryListener that only sets flags, and a watcher thread that does the work.

    Spark's listener bus thread waits for each Python callback, and SparkContext.stop() waits for
    that thread: a callback that called into the JVM, took a lock or ran a merge could stall every
    listener of the session and its stop. So the callbacks touch nothing but two Events."""

    POLL_SECONDS = 5.0  # how often the watcher also asks the query itself whether it is still active

    def __init__(self, spark: Any, query: Any, path: str, opts: Options) -> None:
        self.spark, self.query, self.path, self.opts = spark, query, path, opts
        self.query_id = str(query.id)
        self.wrote = threading.Event()  # a micro-batch with rows ended since the last evaluation
        self.ended = threading.Event()
        self.listener = self._listener()

    def _listener(self) -> Any:
        from pyspark.sql.streaming.listener import (
            StreamingQueryListener,  # lazy: pyspark is imported only when a Spark session runs this
        )

        watch = self

        class PostWriteListener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                if str(event.progress.id) == watch.query_id and event.progress.numInputRows > 0:
                    watch.wrote.set()

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                if str(event.id) == watch.query_id:
                    watch.ended.set()
                    watch.wrote.set()  # wake the watcher

        return PostWriteListener()

    def start(self) -> None:
        from pyspark import InheritableThread  # the caller's local properties (job group, pool) for the merge jobs

        self.spark.streams.addListener(self.listener)
        # micro-batches that ended before the listener was added (a short availableNow query may
        # even have ended already: then no event comes, and the watcher's poll notices)
        if any(p.numInputRows > 0 for p in self.query.recentProgress):
            self.wrote.set()
        # A daemon: it may wait as long as the query runs, which must not keep the interpreter
        # alive; the merge itself runs in maybe_run's non-daemon thread (mergeOnWrite.async.enabled).
        InheritableThread(
            target=self._run, name=f"indextables-stream-watch {self.path}", daemon=True, session=self.spark
        ).start()

    def _run(self) -> None:
        try:
            while True:
                self.wrote.wait(self.POLL_SECONDS)
                ended = self.ended.is_set() or not self.query.isActive
                if self.wrote.is_set():
                    self.wrote.clear()
                    result = maybe_run(self.spark, self.path, self.opts)
                    if result is not None and result.status == "ALREADY_RUNNING":
                        # the splits of this batch were not in that run's plan: evaluate again after it
                        _join_running(self.path)
                        self.wrote.set()
                        continue
                if ended:
                    break
            self.spark.streams.removeListener(self.listener)
        except Exception as e:  # noqa: BLE001 - e.g. the session stopped under a running query; maintenance is best effort
            log.warning(
                "indextables: stopped watching the streaming query %s writing to %s for merge-/purge-on-write: %s: %s",
                self.query_id,
                self.path,
                type(e).__name__,
                e,
            )
