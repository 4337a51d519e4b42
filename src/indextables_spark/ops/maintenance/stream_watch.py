"""Merge-/purge-on-write after the micro-batches of a streaming query (post_write.py).

`register.py`'s `writeStream.start()` wrapper calls `watch_stream`: a thread of the writing process
then asks the query, every POLL_SECONDS, whether it is still active and for its latest progress,
and runs post_write.maybe_run after the micro-batches that read rows (a merge starts within about
POLL_SECONDS of such a batch, or once the table's running merge ends), until the query has ended
and its last batches were evaluated, or the session stops (post_write.stop_background).

Why the query is asked and no StreamingQueryListener is used: Spark calls a Python listener from
its listener-bus thread through Py4J, and each progress event then makes dozens of Py4J calls back
to read itself (0.3–2 s an event on a loaded 2-core machine); SparkContext.stop() waits for that
thread to deliver every event still queued, so a slow or stuck callback held up the merges and
then the session's stop. The events also arrive later than the query's own state says it ended:
a watcher that learnt the end from the query could leave before the events of the batches it
should have merged.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Mapping, Sequence

from indextables_spark.config.options import Options
from indextables_spark.ops.maintenance import post_write

log = logging.getLogger(__name__)


def watch_stream(spark: Any, query: Any, path: str, options: Mapping[str, Any]) -> None:
    """Merge-/purge-on-write for a streaming query writing to `path`: evaluated after the
    micro-batches that read rows, until the query ends. Nothing is started when neither is enabled.
    `spark`, `query`: the session and its StreamingQuery, duck-typed (no pyspark outside spark/)."""
    opts = Options.of(options)
    if not (opts.get_bool("mergeOnWrite.enabled") or opts.get_bool("purgeOnWrite.enabled")):
        return
    StreamWatch(spark, query, path, opts).start()


def _key(progress: Mapping[str, Any]) -> tuple[Any, Any]:
    """A progress report's identity: a trigger without new data may report the batch id again."""
    return progress["batchId"], progress["timestamp"]


def _rows(progress: Mapping[str, Any]) -> int:
    return int(progress["numInputRows"] or 0)


def reported_after(progress: Sequence[Mapping[str, Any]], seen: tuple[Any, Any] | None) -> list[Mapping[str, Any]]:
    """The reports of `progress` (oldest first) after the one whose key is `seen`; all of them when
    `seen` is None or no longer among them (the query keeps its last 100)."""
    keys = [_key(p) for p in progress]
    if seen is None or seen not in keys:
        return list(progress)
    return list(progress[keys.index(seen) + 1 :])


class StreamWatch:
    """The thread that follows one streaming query (module doc)."""

    POLL_SECONDS = 1.0

    def __init__(self, spark: Any, query: Any, path: str, opts: Options) -> None:
        self.spark, self.query, self.path, self.opts = spark, query, path, opts
        self.seen: tuple[Any, Any] | None = None  # the newest progress report looked at
        self.stopped = threading.Event()  # stop(): the session is stopping
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        from pyspark import InheritableThread  # lazy: carries the caller's local properties to the merges

        if not post_write.add_watcher(self.spark, self):
            return  # the session is stopping
        # A daemon: it may wait as long as the query runs, which must not keep the interpreter
        # alive; the merge itself runs in post_write's non-daemon thread (mergeOnWrite.async.enabled).
        self.thread = InheritableThread(
            target=self._run, name=f"indextables-stream-watch {self.path}", daemon=True, session=self.spark
        )
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()

    def join(self, timeout: float) -> None:
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout)

    def _ending(self) -> bool:
        return self.stopped.is_set() or post_write.stopping(self.spark)

    def _run(self) -> None:
        try:
            while not self._ending():
                active = bool(self.query.isActive)  # first: once it is false, the progress is final
                if self._wrote_since_last_look():
                    self._evaluate()
                if not active:
                    return
                self.stopped.wait(self.POLL_SECONDS)
        except Exception as e:  # noqa: BLE001 - e.g. the session stopped under a running query; maintenance is best effort
            log.warning(
                "indextables: stopped watching the streaming query writing to %s for merge-/purge-on-write: %s: %s",
                self.path,
                type(e).__name__,
                e,
            )
        finally:
            post_write.remove_watcher(self)

    def _wrote_since_last_look(self) -> bool:
        """Whether a micro-batch that read rows reported progress since the last look."""
        last = self.query.lastProgress
        if last is None or _key(last) == self.seen:
            return False
        if _rows(last) > 0:
            self.seen = _key(last)
            return True
        # the newest report read nothing; a batch that did may be just before it (the trigger
        # after a batch reports again when it finds no new data), or may have ended before the watch
        newer = reported_after(self.query.recentProgress, self.seen)
        self.seen = _key(newer[-1]) if newer else _key(last)
        return any(_rows(p) > 0 for p in newer)

    def _evaluate(self) -> None:
        while not self._ending():
            result = post_write.maybe_run(self.spark, self.path, self.opts)
            if result is None or result.status != "ALREADY_RUNNING":
                return
            # that run planned before this batch's splits were committed: evaluate again after it
            post_write.join_running(self.path)
