"""`IndexTable.maintenance`: the table's maintenance operations (as pyiceberg's `Table.maintenance`).

A generic reader of ops/registry.py: each operation with a `method` is a method here, taking the
operation's command fields after the table (the table fills the first; the command class's
keyword-only fields stay keyword-only), plus `spark=` (operations that can run as a Spark job do)
and `progress=`; it returns the operation's typed result (results.py). The same operations as
the SQL texts (`MERGE SPLITS …`, `PURGE INDEXTABLE …`), the SQL table functions and the command
line:

    t.maintenance.checkpoint()                      t.maintenance.compact()
    t.maintenance.merge_splits(where=None, *, target_size=None, max_dest_splits=None,
                               max_source_splits_per_merge=None, spark=None, progress=None)
    t.maintenance.purge(*, older_than_hours=None, tx_log_retention_hours=None, dry_run=False, progress=None)
    t.maintenance.truncate_time_travel(*, dry_run=False)
    t.maintenance.drop_partitions(where)
    t.maintenance.repair_transaction_log(target, *, progress=None)
    t.maintenance.convert(*, dry_run=False, progress=None)
    t.maintenance.prewarm_cache(where=None, *, spark=None)     (one result per host and cache directory)
    t.maintenance.gc_state(*, dry_run=False)        (old states and orphan manifests; PURGE runs it too)

Each method's docstring is its command class's.
"""

from __future__ import annotations

from typing import Any, Callable

from indextables_spark.core.log.maintenance import gc
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.results import GcStateResult, Progress


class MaintenanceTable:
    """Checkpoints, compaction, merges, purges, time-travel truncation, partition drops, repair,
    conversion of the reference implementation's splits, the split cache (ops/registry.py)."""

    def __init__(self, log: TransactionLog):
        self.log = log

    def gc_state(self, *, dry_run: bool = False) -> GcStateResult:
        """Old state directories beyond retention and orphan manifests (PURGE runs it too)."""
        return gc.gc_state(self.log, dry_run=dry_run)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        from indextables_spark.ops import registry  # lazy: `import indextables_spark.api.table` stays cheap

        op = registry.by("method", name)
        if op is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        command = op.load()
        log = self.log

        def method(*args: Any, spark: Any = None, progress: Progress | None = None, **kwargs: Any) -> Any:
            build = getattr(command, "for_table", None)
            if build is not None:
                cmd = build(log, *args, **kwargs)
            else:
                cmd = command(log.storage.uri, *args, **registry.coerced(command, kwargs))  # type: ignore[call-arg]
            return cmd.run(registry.Context(log.options, spark, progress, table=log))

        method.__name__ = name
        method.__doc__ = command.__doc__
        return method

    def __dir__(self) -> list[str]:
        from indextables_spark.ops import registry  # lazy, as in __getattr__

        return sorted({*super().__dir__(), *(op.method for op in registry.OPERATIONS if op.method)})
