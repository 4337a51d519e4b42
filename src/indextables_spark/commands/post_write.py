"""Merge-on-write and purge-on-write (table-protocol.txt "SkipAction ... Purge-on-write, Merge-on-write").

The Spark writer's commit runs in a Python worker without a session, so this runs afterwards in
the writing session: `register.py`'s `save()` wrapper calls `maybe_run(spark, path, options)` once
the write has committed (SQL `INSERT` through the views bridge writes with `save()` too), and its
`writeStream.start()` wrapper calls `watch_stream`, which runs it after each micro-batch that wrote. Everything here is best effort: a failure is logged as a warning naming
the table and the cause, and never fails the write (the write is already durable).

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
from dataclasses import replace
from typing import Any, Mapping

from ..options import Options
from ..results import PostWriteResult
from ..sessions import default_parallelism, set_job_description

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
    from ..table import IndexTable
    from . import merge, purge

    table = IndexTable(path, opts)
    result = PostWriteResult(table_path=path, status="DONE")
    merged = False
    if opts.get_bool("mergeOnWrite.enabled"):
        cfg = merge.MergeConfig.from_options(opts, target_option="mergeOnWrite.targetSize", default_target=4 << 30)
        plan = merge.plan_merge(table.log, None, cfg)
        threshold = merge_trigger_threshold(default_parallelism(spark), opts)
        if len(plan.groups.groups) >= threshold:
            done = merge.execute_merge(plan, merge.SparkRunner(spark))
            result = replace(result, merge=done)
            merged = done.status == "SUCCESS"
        else:
            result = replace(result, merge_groups=len(plan.groups.groups), merge_threshold=threshold)
    if opts.get_bool("purgeOnWrite.enabled"):
        n = _count_write(table.storage.uri)
        every = opts.get_int("purgeOnWrite.triggerAfterWrites")
        if (merged and opts.get_bool("purgeOnWrite.triggerAfterMerge")) or (every > 0 and n % every == 0):
            purged = purge.purge(
                table.log,
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


def wait_for_background(timeout: float | None = None) -> dict[str, PostWriteResult]:
    """Wait for the post-write maintenance running in the background (all tables); returns the
    latest result per table path. TimeoutError if some is still running after `timeout` seconds."""
    import time

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


def watch_stream(spark, query, path: str, options: Mapping[str, Any]) -> None:
    """Merge-/purge-on-write for a streaming query writing to `path`: evaluated after each
    micro-batch that wrote rows (a StreamingQueryListener on this session, removed when the query
    ends). Nothing is registered when neither is enabled."""
    from pyspark.sql.streaming import StreamingQueryListener

    opts = Options.of(options)
    if not (opts.get_bool("mergeOnWrite.enabled") or opts.get_bool("purgeOnWrite.enabled")):
        return
    query_id = str(query.id)

    class PostWriteListener(StreamingQueryListener):
        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            if str(event.progress.id) == query_id and event.progress.numInputRows > 0:
                maybe_run(spark, path, opts)

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            if str(event.id) == query_id:
                spark.streams.removeListener(self)

    spark.streams.addListener(PostWriteListener())
