"""Opening a table's log with this package's post-commit maintenance, and one shared log per
(path, options) in a process.

IndexTable, the command executor and the operations open tables here: objects made per request or
per Spark planning call reuse the shared log's last snapshot while the log is unchanged (one
listing per snapshot(); see TransactionLog.snapshot). The maintenance hook (the automatic
checkpoint every `checkpoint.interval` versions, compaction after MERGE SPLITS) imports
core/log/maintenance/maintenance.py — the state writer, pyarrow — only when a commit runs it, so opening a log
stays cheap."""

from __future__ import annotations

from indextables_spark.config.options import Options
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.storage import Storage, location_key, open_storage
from indextables_spark.util.lru import LruCache

_LOGS: LruCache[TransactionLog] = LruCache(16)


def _after_commit(log: TransactionLog, version: int, operation: str | None = None) -> None:
    from indextables_spark.core.log.maintenance.maintenance import after_commit  # lazy: the state writer, pyarrow

    after_commit(log, version, operation)


def log_with_maintenance(storage: Storage, options: Options | None = None) -> TransactionLog:
    """A table's transaction log with this package's post-commit maintenance installed (a commit
    itself runs no hooks)."""
    return TransactionLog(storage, options, post_commit=(_after_commit,))


def shared_log(path: str, options: Options) -> TransactionLog:
    """The process's one log of the table at `path` opened with `options`."""
    key = (location_key(path), tuple(sorted(options.items())))
    return _LOGS.get_or_build(key, lambda: log_with_maintenance(open_storage(path, options), options))


def forget_logs() -> None:
    """Drop the process's shared logs (and so their last snapshots): the next open decodes the
    state afresh (benches measuring a first read use it)."""
    _LOGS.clear()
