"""State maintenance operations behind CHECKPOINT / COMPACT / TRUNCATE INDEXTABLES TIME TRAVEL and
the state part of PURGE (log/maintenance.py and log/gc.py do the work). Each returns a typed result
(results.py)."""

from __future__ import annotations

from ..log import gc, maintenance
from ..log.table_log import TransactionLog
from ..results import CheckpointResult, GcStateResult, TruncateTimeTravelResult


def checkpoint(log: TransactionLog) -> CheckpointResult:
    """CHECKPOINT INDEXTABLES: a state at the latest version (upgrades V1–V3 tables to V4)."""
    return maintenance.checkpoint(log)


def compact(log: TransactionLog) -> CheckpointResult:
    """COMPACT INDEXTABLES: a clean, partition-sorted rewrite of the state."""
    return maintenance.compact(log)


def truncate_time_travel(log: TransactionLog, dry_run: bool = False) -> TruncateTimeTravelResult:
    return maintenance.truncate_time_travel(log, dry_run=dry_run)


def gc_state(log: TransactionLog, dry_run: bool = False) -> GcStateResult:
    return gc.gc_state(log, dry_run=dry_run)
