"""Merge-on-write and purge-on-write, as IndexTables4Spark has them (docs/guide/maintenance.md,
"Merge-on-write / purge-on-write").

The Spark writer's commit runs in a Python worker without a session, so this runs afterwards in
the writing session: `register.py`'s `save()` wrapper calls `maybe_run(spark, path, options)` once
the write has committed (SQL `INSERT` through the views bridge writes with `save()` too), and its
`writeStream.start()` wrapper calls stream_watch.watch_stream, which runs it after the micro-batches
that wrote.
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
  process, so the write returns at once; `wait_for_background()` waits for them. When the session
  stops (register's stop() wrapper: stop_background), no new one starts and the running ones finish
  first.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from dataclasses import replace
from typing import Any, Mapping, Protocol

from indextables_spark.config.options import Options
from indextables_spark.config.sessions import default_parallelism, is_stopped, set_job_description, stop_scope
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
    write evaluates again; "SKIPPED" when the session is stopping); wait_for_background() waits for
    it. Otherwise it runs here and the result is run()'s."""
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


# Post-write maintenance running in this process's threads, and the sessions whose stop() began
# (register's stop() wrapper calls stop_background first): what stopping a session has to end.
_background: dict[str, tuple[threading.Thread, Any]] = {}  # table path -> (its running run, stop_scope)
_background_lock = threading.Lock()
_last_results: dict[str, PostWriteResult] = {}
_stopping: weakref.WeakSet[Any] = weakref.WeakSet()  # stop_scope()s whose stop() has begun
_watchers: list[tuple[Any, Watcher]] = []  # (stop_scope, watcher): streaming queries followed


class Watcher(Protocol):
    """A thread that starts post-write maintenance (stream_watch.StreamWatch)."""

    def stop(self) -> None: ...  # end soon, starting nothing more

    def join(self, timeout: float) -> None: ...


def _start_background(spark: Any, path: str, opts: Options) -> PostWriteResult:
    from pyspark import InheritableThread  # lazy: carries the caller's Spark local properties (pinned threads)

    scope = stop_scope(spark)

    def work() -> None:
        try:
            set_job_description(spark, f"indextables merge-on-write {path}")  # this thread's jobs (classic)
            _last_results[path] = _run_logged(spark, path, opts)
        finally:
            with _background_lock:
                if _background.get(path, (None,))[0] is threading.current_thread():
                    del _background[path]

    with _background_lock:
        if scope in _stopping:
            return PostWriteResult(table_path=path, status="SKIPPED", error="the session is stopping")
        running = _background.get(path)
        if running is not None and running[0].is_alive():
            return PostWriteResult(table_path=path, status="ALREADY_RUNNING")
        # Not a daemon: the interpreter finishes a running merge before it exits (and before
        # atexit stops Spark), and stop_background waits for it; a merge cut short would leave
        # only orphan splits for PURGE.
        thread = InheritableThread(
            target=work, name=f"indextables-post-write {path}", daemon=False, session=spark
        )  # Spark Connect needs the session; classic copies its tags
        _background[path] = (thread, scope)
        thread.start()
    return PostWriteResult(table_path=path, status="STARTED")


def join_running(path: str) -> None:
    """Wait for the post-write maintenance of `path` running in the background, if any."""
    with _background_lock:
        running = _background.get(path)
    if running is not None:
        running[0].join()


def wait_for_background(timeout: float | None = None) -> dict[str, PostWriteResult]:
    """Wait for the post-write maintenance running in the background (all tables); returns the
    latest result per table path. TimeoutError if some is still running after `timeout` seconds."""

    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _background_lock:
            # a thread that ended without its `work` (pyspark's InheritableThread raised before
            # calling it, e.g. its session had stopped) left its entry: nothing will remove it
            for path, (t, _) in list(_background.items()):
                if not t.is_alive():
                    del _background[path]
            threads = [t for t, _ in _background.values()]
        if not threads:
            return dict(_last_results)
        for t in threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                raise TimeoutError(f"post-write maintenance still running after {timeout} s: {t.name}")


def stopping(spark: Any) -> bool:
    """Whether `spark` is stopping: its stop() began (stop_background) or pyspark stopped it."""
    with _background_lock:
        if stop_scope(spark) in _stopping:
            return True
    return is_stopped(spark)


def add_watcher(spark: Any, watcher: Watcher) -> bool:
    """Record a watcher of `spark` for stop_background; False (record nothing) when it is stopping."""
    scope = stop_scope(spark)
    with _background_lock:
        if scope in _stopping:
            return False
        _watchers.append((scope, watcher))
        return True


def remove_watcher(watcher: Watcher) -> None:
    with _background_lock:
        _watchers[:] = [(s, w) for s, w in _watchers if w is not watcher]


WATCHER_STOP_SECONDS = 30.0  # a watcher ends within one poll; it may be inside one call to the query


def stop_background(spark: Any) -> None:
    """Before `spark` stops (register's wrapper of SparkSession.stop): no post-write maintenance
    starts for it any more, its stream watchers end, and the maintenance already running finishes,
    as at interpreter exit. Nothing of ours then calls Spark while it stops: a job submitted while
    SparkContext.stop() runs can be dropped unanswered (its thread would wait forever), and
    SparkContext.stop() itself waits for Spark's listener threads."""
    scope = stop_scope(spark)
    with _background_lock:
        _stopping.add(scope)
        watchers = [w for s, w in _watchers if s is scope]
        running = [(path, t) for path, (t, s) in _background.items() if s is scope]
    for w in watchers:
        w.stop()
    for w in watchers:
        w.join(WATCHER_STOP_SECONDS)
    for path, t in running:
        if t is threading.current_thread():
            continue  # stop() called from the maintenance itself
        if t.is_alive():
            log.info("indextables: waiting for the merge-/purge-on-write of %s before the session stops", path)
        t.join()
